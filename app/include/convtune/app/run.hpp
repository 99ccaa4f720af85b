// run: one problem run once (or timed) with one algorithm, optionally checked against the f64
// oracle; the output tensor's FNV-1a hash, so that results of separate processes can be compared
// bit for bit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "convtune/algorithm.hpp"
#include "convtune/app/fields.hpp"
#include "convtune/app/report.hpp"

namespace convtune::app {

struct RunRequest {
    std::string problem;  // canonical or benchdnn
    std::string backend = "cpu";
    // The algorithm: this id; or the one the selector chooses under these flags ("key=value,...",
    // as convtune::convolution would), with the tuning database `db` ("" = none); or, with
    // neither, the backend's heuristic first choice. Not both algo and flags.
    std::string algo, flags, db;
    bool check = false;              // compare with the f64 oracle
    int repeat = 0;                  // timed runs after one warm-up (0: run once, untimed)
    uint64_t seed = 1;               // of the input data
    std::string dir, dtype, layout;  // overrides of the problem's fields ("" = as written)
};

// RunRequest's field table (fields.hpp).
template <class V>
void visit_fields(RunRequest& r, V&& v) {
    v("problem", r.problem);
    v("backend", r.backend);
    v("algo", r.algo);
    v("flags", r.flags);
    v("db", r.db);
    v("check", r.check);
    v("repeat", r.repeat);
    v("seed", r.seed);
    v("dir", r.dir);
    v("dtype", r.dtype);
    v("layout", r.layout);
}

struct RunReport {
    std::string problem;    // canonical form
    std::string algorithm;  // its id
    // "--algo" (given), "heuristic" (the backend's first choice), or the selector's source
    // (database, search, heuristic, ...)
    std::string selected_by;
    Status status;                 // the run's: ok, or why it failed
    std::string output_fnv1a;      // the output tensor's FNV-1a hash, 16 hex digits (when it ran)
    std::vector<double> times_ms;  // the timed runs, sorted (empty: untimed)
    double flops = 0;              // of one run
    struct Check {
        double max_abs = 0, rel_l2 = 0, max_scaled = 0, bound = 0;
        bool finite = true, passed = true;
    };
    std::optional<Check> check;  // with RunRequest::check, when it ran
    bool passed() const { return status.ok() && (!check || check->passed); }
};

// Chooses the algorithm (errors name the request's fields and are thrown before anything is
// allocated: an unknown or unsupporting algorithm, a peak above the memory budget), then runs it.
// A failed run is not an error: RunReport::status says why.
RunReport run(const RunRequest& r);
// {"format", "problem", "algorithm", "selected_by", "status", and "message" when it failed, else
//  "output_fnv1a", "median_ms", "min_ms", "max_ms", "gflops" when timed, "check": {"max_abs",
//  "rel_l2", "max_scaled", "bound", "finite", "passed"} when checked}
nlohmann::json to_json(const RunReport& r);
// What `convtune run` prints for a run that did not fail: problem, algorithm, output hash, time, check.
std::string to_text(const RunReport& r);

}  // namespace convtune::app
