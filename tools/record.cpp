// convtune record --backend B --workload NAME|FILE [--mode train|infer] [--batch N]
//     [--stream S --iterations N ...] [--samples N] --out FILE.json
// convtune record --from-db DB.json --backend B --out FILE.json
// Times every supported algorithm of a backend on every distinct problem of a workload (and of
// a stream's iterations when asked) and stores the numbers for `convtune simulate --replay`.
// The work is convtune::app::record; this file fills the request and prints the report.
#include <fmt/core.h>
#include <unistd.h>

#include <memory>

#include "cli.hpp"
#include "convtune/app/simulate.hpp"

namespace convtune::cli {

namespace {

struct RecordCliOptions {
    app::RecordRequest r;
    bool progress = false;
};

int record_command(const RecordCliOptions& o) {
    app::RecordRequest r = o.r;
    sim::Progress bar("record", o.progress || ::isatty(2));
    r.progress = [&bar](int64_t d, int64_t t, const std::string& w) { bar.update(d, t, w); };
    const app::RecordReport rep = app::record(r);
    bar.finish();
    for (const std::string& d : rep.dropped) fmt::print(stderr, "convtune: warning: --from-db: left out {}\n", d);
    if (rep.source == "tuning-db")
        fmt::print(stderr, "{}: {} problems from the tuning database (winners' medians only)\n", rep.out, rep.problems);
    else
        fmt::print(stderr, "{}: {} problems x {} algorithms of backend {} ({})\n", rep.out, rep.problems,
                   rep.algorithms, rep.backend, rep.environment);
    return ok;
}

}  // namespace

void add_record(CLI::App& app, Action& action) {
    auto* cmd = app.add_subcommand("record",
                                   "Time every algorithm of a backend on a workload's problems, for simulate --replay");
    auto o = std::make_shared<RecordCliOptions>();
    cmd->add_option("--backend,-b", o->r.backend, "Backend to record")->capture_default_str()->check(non_empty());
    cmd->add_option("--workload,-w", o->r.workload.workload,
                    "Built-in network (resnet50, vgg11, ...), a shape file or a workload file")
        ->check(non_empty());
    cmd->add_option("--shapes-dir", o->r.workload.shapes_dir,
                    "Folder of the benchdnn shape files behind the built-in names")
        ->check(non_empty());
    cmd->add_option("--mode", o->r.workload.mode, "infer (the default) or train")->check(non_empty());
    cmd->add_option("--batch", o->r.workload.batch, "Batch size of the workload (default: as written)")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
    cmd->add_option("--dtype", o->r.workload.dtype, "Data type of every problem: f32, f16, bf16")->check(non_empty());
    cmd->add_option("--layout", o->r.workload.layout, "Layout of every problem: nchw or nhwc")->check(non_empty());
    cmd->add_option("--stream,-s", o->r.workload.stream,
                    "Also record the problems of this stream's iterations: fixed, batch, resolution, mixed, trace:FILE")
        ->capture_default_str()
        ->check(non_empty());
    cmd->add_option("--iterations,-n", o->r.iterations, "Iterations of the stream whose problems are recorded")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000000));
    cmd->add_option("--batches", o->r.workload.batches, "Batch sizes of a batch/mixed stream")->check(non_empty());
    cmd->add_option("--scales", o->r.workload.scales, "Spatial scales of a resolution/mixed stream")
        ->check(non_empty());
    cmd->add_option("--seed", o->r.workload.seed, "Seed of the stream's choices")->capture_default_str()->check(seed());
    cmd->add_option("--samples", o->r.samples, "Timed calls per algorithm and problem, after one cold call")
        ->capture_default_str()
        ->check(CLI::Range(0, 1000));
    cmd->add_option("--max-ms", o->r.max_ms, "Stop sampling an algorithm on a problem once its calls took this long")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1e9));
    cmd->add_option("--out,-o", o->r.out, "Recording file to write (JSON)")->required();
    cmd->add_option(
           "--search-flags", o->r.search_flags,
           "Flags of the search whose candidates' first calls are timed in its order, before the sweep (e.g. "
           "benchmark=1,policy=pytorch,allow_tf32=0), or none")
        ->capture_default_str()
        ->check(non_empty());
    cmd->add_option("--from-db", o->r.from_db,
                    "Build the recording from a tuning database instead (winners' medians only)")
        ->check(non_empty());
    cmd->add_flag("--progress", o->progress, "Show a progress bar on stderr even when it is not a terminal");
    cmd->callback([o, &action] { action = [o] { return record_command(*o); }; });
}

}  // namespace convtune::cli
