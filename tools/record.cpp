// convtune record --backend B --workload NAME|FILE [--mode train|infer] [--batch N]
//     [--stream S --iterations N ...] [--samples N] --out FILE.json
// convtune record --from-db DB.json --backend B --out FILE.json
// Times every supported algorithm of a backend on every distinct problem of a workload (and of
// a stream's iterations when asked) and stores the numbers for `convtune simulate --replay`.
#include <fmt/core.h>
#include <unistd.h>

#include <memory>

#include "cli.hpp"
#include "convtune/error.hpp"
#include "convtune/file_io.hpp"
#include "convtune/registry.hpp"
#include "convtune/sim/options.hpp"
#include "convtune/sim/recording.hpp"
#include "convtune/sim/report.hpp"

namespace convtune::cli {

namespace {

struct RecordCliOptions {
    sim::WorkloadArgs w;
    int iterations = 1;
    int samples = 5;
    double max_ms = 3000;
    std::string backend = "cpu", out, from_db;
    bool progress = false;
};

int record_command(const RecordCliOptions& o) {
    if (o.out.empty()) throw Error("--out: required");
    check_output_path(o.out);  // refused before anything is recorded
    if (!o.from_db.empty()) {
        const auto sections = TuningDatabase::read_file(o.from_db);
        const sim::Recording r = sim::recording_from_db(sections, o.backend);
        r.save(o.out);
        fmt::print(stderr, "{}: {} problems from the tuning database (winners' medians only)\n", o.out, r.problems.size());
        return ok;
    }
    const sim::Stream stream = o.w.make_stream();
    const std::vector<ConvProblem> problems = sim::distinct_problems(stream, o.iterations);
    const Backend& b = find_backend(o.backend);
    sim::RecordOptions ro;
    ro.samples = o.samples;
    ro.max_ms_per_algorithm = o.max_ms;
    sim::Progress bar("record", o.progress || ::isatty(2));
    ro.progress = [&bar](int64_t d, int64_t t, const std::string& w) { bar.update(d, t, w); };
    const sim::Recording r = sim::record(b, problems, ro);
    bar.finish();
    r.save(o.out);
    fmt::print(stderr, "{}: {} problems x {} algorithms of backend {} ({})\n", o.out, r.problems.size(), r.algorithms.size(), b.name(),
               r.environment.describe());
    return ok;
}

}  // namespace

void add_record(CLI::App& app, Action& action) {
    auto* cmd = app.add_subcommand("record", "Time every algorithm of a backend on a workload's problems, for simulate --replay");
    auto o = std::make_shared<RecordCliOptions>();
    cmd->add_option("--backend,-b", o->backend, "Backend to record")->capture_default_str();
    cmd->add_option("--workload,-w", o->w.workload, "Built-in network (resnet50, vgg11, ...), a shape file or a workload file");
    cmd->add_option("--shapes-dir", o->w.shapes_dir, "Folder of the benchdnn shape files behind the built-in names");
    cmd->add_option("--mode", o->w.mode, "infer or train")->capture_default_str();
    cmd->add_option("--batch", o->w.batch, "Batch size of the workload (default: as written)")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
    cmd->add_option("--dtype", o->w.dtype, "Data type of every problem: f32, f16, bf16");
    cmd->add_option("--layout", o->w.layout, "Layout of every problem: nchw or nhwc");
    cmd->add_option("--stream,-s", o->w.stream, "Also record the problems of this stream's iterations: fixed, batch, resolution, mixed, trace:FILE")
        ->capture_default_str();
    cmd->add_option("--iterations,-n", o->iterations, "Iterations of the stream whose problems are recorded")->capture_default_str()->check(CLI::Range(1, 1000000));
    cmd->add_option("--batches", o->w.batches, "Batch sizes of a batch/mixed stream");
    cmd->add_option("--scales", o->w.scales, "Spatial scales of a resolution/mixed stream");
    cmd->add_option("--seed", o->w.seed, "Seed of the stream's choices")->capture_default_str();
    cmd->add_option("--samples", o->samples, "Timed calls per algorithm and problem, after one cold call")->capture_default_str()->check(CLI::Range(0, 1000));
    cmd->add_option("--max-ms", o->max_ms, "Stop sampling an algorithm on a problem once its calls took this long")->capture_default_str()->check(CLI::Range(0.0, 1e9));
    cmd->add_option("--out,-o", o->out, "Recording file to write (JSON)")->required();
    cmd->add_option("--from-db", o->from_db, "Build the recording from a tuning database instead (winners' medians only)");
    cmd->add_flag("--progress", o->progress, "Show a progress bar on stderr even when it is not a terminal");
    cmd->callback([o, &action] { action = [o] { return record_command(*o); }; });
}

}  // namespace convtune::cli
