// convtune simulate --workload NAME|FILE --stream fixed|batch|resolution|mixed|trace:FILE
//     [--iterations N] [--repeats R] [--mode train|infer] [--flags S ...|--compare] [--backend B] [--replay
//     FILE|NAME|auto [--strict]]
//     [--json|--csv] [--plot out.svg] [--seed S]
// Replays a workload's iterations under each flag setting through the real selector, on a real
// backend (live) or on recorded timings (--replay), and says whether benchmark mode pays.
// The work is convtune::app::simulate; this file fills the request and prints the report.
#include <fmt/core.h>
#include <unistd.h>

#include <memory>

#include "cli.hpp"
#include "convtune/app/simulate.hpp"

namespace convtune::cli {

namespace {

struct SimulateOptions {
    app::SimulateRequest r;
    bool json = false, csv = false, progress = false;
};

int simulate_command(const SimulateOptions& o) {
    app::SimulateRequest r = o.r;
    sim::Progress bar("simulate", o.progress || ::isatty(2));
    r.progress = [&bar](int64_t d, int64_t t, const std::string& w) { bar.update(d, t, w); };
    const app::SimulateReport rep = app::simulate(r);
    bar.finish();
    if (o.json) fmt::print("{}", app::json_text(app::to_json(rep)));
    else if (o.csv) fmt::print("{}", sim::to_csv(rep.result));
    else fmt::print("{}", sim::format_table(rep.result, rep.context));
    return rep.failed() ? run_failed : ok;
}

}  // namespace

void add_simulate(CLI::App& app, Action& action) {
    auto* cmd = app.add_subcommand("simulate", "Replay a workload under each flag setting: does benchmark mode pay?");
    auto o = std::make_shared<SimulateOptions>();
    cmd->add_option("--workload,-w", o->r.workload.workload,
                    "Built-in network (resnet50, vgg11, ...), a shape file or a workload file")
        ->check(non_empty());
    cmd->add_option(
           "--shapes-dir", o->r.workload.shapes_dir,
           "Folder of the benchdnn shape files behind the built-in names (default: $CONVTUNE_SHAPES_DIR or the "
           "build's)")
        ->check(non_empty());
    cmd->add_option("--stream,-s", o->r.workload.stream, "fixed, batch, resolution, mixed or trace:FILE")
        ->capture_default_str()
        ->check(non_empty());
    cmd->add_option("--iterations,-n", o->r.iterations, "Iterations to simulate (default: a trace's length, else 100)")
        ->check(CLI::Range(1, 10000000));
    cmd->add_option(
           "--repeats", o->r.repeats,
           "Runs of each setting, a fresh start each, in rotated order; the spread decides what is noise (default: 3 "
           "live, 1 on a replay)")
        ->check(CLI::Range(1, 1000));
    cmd->add_option("--mode", o->r.workload.mode,
                    "infer (forward, the default) or train (forward + backward data + backward filter)")
        ->check(non_empty());
    cmd->add_option("--batch", o->r.workload.batch, "Batch size of the workload (default: as written)")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
    cmd->add_option("--batches", o->r.workload.batches, "Batch sizes a batch/mixed stream draws from, e.g. 1,2,4,8")
        ->check(non_empty());
    cmd->add_option("--scales", o->r.workload.scales,
                    "Scales of each spatial input size a resolution/mixed stream draws from, e.g. 0.5,1,1.5")
        ->check(non_empty());
    cmd->add_option("--dtype", o->r.workload.dtype, "Data type of every problem: f32, f16, bf16")->check(non_empty());
    cmd->add_option("--layout", o->r.workload.layout, "Layout of every problem: nchw or nhwc")->check(non_empty());
    cmd->add_option("--seed", o->r.workload.seed, "Seed of the stream's choices and of the replay's draws")
        ->capture_default_str()
        ->check(seed());
    cmd->add_option(
           "--flags,-f", o->r.flags,
           "A flag setting: off, on, on+det, adaptive, pytorch, incremental, key=value,... or LABEL:key=value,... "
           "(repeatable)")
        ->check(non_empty());
    cmd->add_flag("--compare", o->r.compare,
                  "Compare all six standard settings (the default when no --flags is given)");
    cmd->add_option("--backend,-b", o->r.backend,
                    "Backend to run live (default cpu), or the recording's backend with --replay")
        ->check(non_empty());
    cmd->add_option(
           "--replay", o->r.replay,
           "Recording (from `convtune record`) to replay instead of running a backend, or a name in the recording "
           "library (`convtune list recordings`), e.g. h200, or auto: the name of this machine's GPU (h100 on an H100)")
        ->check(non_empty());
    cmd->add_option(
           "--pytorch-measured", o->r.measured,
           "PyTorch's own measurements (python/convtune/pytorch_measure.py grid): the off and pytorch settings replay "
           "them; alone (no --replay or --backend), only those two settings are simulated")
        ->check(non_empty());
    cmd->add_option("--kernel-cache", o->r.kernel_cache,
                    "With PyTorch's measurements (--pytorch-measured, or a --replay name whose library holds them): "
                    "the CUDA kernel cache the run starts with, cold or warm (default warm)")
        ->check(CLI::IsMember({"cold", "warm"}));
    cmd->add_flag(
        "--strict", o->r.strict,
        "With --replay: refuse problems the recording lacks instead of estimating them with the performance model "
        "fitted on it");
    auto* json = cmd->add_flag("--json", o->json, "Print one JSON document instead of the table");
    auto* csv = cmd->add_flag("--csv", o->csv, "Print one CSV row per setting and iteration instead of the table");
    json->excludes(csv);
    cmd->add_option("--plot", o->r.plot, "Write an SVG plot of cumulative time per iteration")->check(non_empty());
    cmd->add_flag("--progress", o->progress, "Show a progress bar on stderr even when it is not a terminal");
    cmd->add_option("--min-saving", o->r.min_saving, "Savings below this fraction count as no difference")
        ->capture_default_str()
        ->check(fraction());
    cmd->callback([o, &action] { action = [o] { return simulate_command(*o); }; });
}

}  // namespace convtune::cli
