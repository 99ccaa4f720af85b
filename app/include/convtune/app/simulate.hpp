// simulate and record: does benchmark mode pay for a workload, and the timings to replay it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "convtune/app/fields.hpp"
#include "convtune/app/report.hpp"
#include "convtune/app/workload.hpp"
#include "convtune/sim/report.hpp"
#include "convtune/sim/simulator.hpp"

namespace convtune::app {

struct SimulateRequest {
    WorkloadRequest workload;        // workload, shapes_dir, stream, mode, batch, batches, scales, dtype, layout, seed
    int iterations = 0;              // 0: a trace's length, 100 for the other streams
    int repeats = 0;                 // runs of each setting, rotated; 0: 3 live, 1 on a replay
    std::vector<std::string> flags;  // settings: a standard name, "key=value,..." or "LABEL:key=value,..."
    bool compare = false;            // the six standard settings too (always when flags is empty)
    std::string backend;             // live backend (default cpu), or the recording's with replay
    std::string
        replay;  // a recording (file, or a name in the recording library) to replay instead of running a backend
    std::string measured;            // PyTorch's own measurements (pytorch_measure.py): the off and pytorch
                                     // settings replay them; alone (no replay or backend), only those two run
    std::string kernel_cache;        // with measured: the CUDA kernel cache the run starts with (cold, warm;
                                     // empty: warm); refused without measured (a recording holds one state)
    bool strict = false;             // replay: refuse problems the recording lacks (default: estimate them)
    double min_saving = 0.02;        // savings below this fraction count as no difference
    std::string plot;                // also write the SVG plot here
    ProgressFn progress;
};

// SimulateRequest's field table (fields.hpp): the workload's fields, then the simulation's.
template <class V>
void visit_fields(SimulateRequest& r, V&& v) {
    v("workload", r.workload.workload);
    v("shapes_dir", r.workload.shapes_dir);
    v("stream", r.workload.stream);
    v("iterations", r.iterations);
    v("repeats", r.repeats);
    v("mode", r.workload.mode);
    v("batch", r.workload.batch);
    v("batches", r.workload.batches);
    v("scales", r.workload.scales);
    v("dtype", r.workload.dtype);
    v("layout", r.workload.layout);
    v("seed", r.workload.seed);
    v("flags", r.flags);
    v("compare", r.compare);
    v("backend", r.backend);
    v("replay", r.replay);
    v("pytorch_measured", r.measured);
    v("kernel_cache", r.kernel_cache);
    v("strict", r.strict);
    v("min_saving", r.min_saving);
    v("plot", r.plot);
}

struct SimulateReport {
    sim::SimulationResult result;
    sim::ReportContext context;
    // The off and pytorch settings replayed from a --replay name's measured library: its name,
    // the kernel-cache state, the stream's distinct problems and those its model predicted.
    struct PyTorchLibraryUse {
        std::string name, kernel_cache;
        std::vector<std::string> predicted;
        std::size_t problems = 0;
    } pytorch_library;
    bool failed() const;  // a setting could not run the stream
};

// Validates the whole request (and that the plot can be written) before anything runs, then
// simulates and writes the plot. Errors name the request's fields.
SimulateReport simulate(const SimulateRequest& r);
// The JSON form: sim::to_json plus "format" (and "pytorch_library" where one was used).
nlohmann::json to_json(const SimulateReport& r);

struct RecordRequest {
    WorkloadRequest workload;
    int iterations = 1;  // of the stream, whose problems are recorded too
    int samples = 5;
    double max_ms = 3000;
    std::string backend = "cpu";
    std::string out;      // the recording file (required)
    std::string from_db;  // build the recording from this tuning database instead
    // The flags of the search whose first calls are measured in its order (sim::RecordOptions::
    // search_flags; parse_flags text over the defaults), or "none" for no such pass.
    std::string search_flags = "benchmark=1,policy=pytorch";
    ProgressFn progress;
};

struct RecordReport {
    std::string out;
    std::string source;  // "measured" or "tuning-db"
    std::string backend, environment;
    int64_t problems = 0, algorithms = 0;
    std::vector<std::string> dropped;  // from_db: the entries left out, each with why
};

// Measures (or reads the database), then writes the recording to `out`.
RecordReport record(const RecordRequest& r);
// {"format", "out", "source", "backend", "environment", "problems", "algorithms", "dropped"}
nlohmann::json to_json(const RecordReport& r);

}  // namespace convtune::app
