// convtune simulate --workload NAME|FILE --stream fixed|batch|resolution|mixed|trace:FILE
//     [--iterations N] [--mode train|infer] [--flags S ...|--compare] [--backend B] [--replay FILE]
//     [--json|--csv] [--plot out.svg] [--seed S]
// Replays a workload's iterations under each flag setting through the real selector, on a real
// backend (live) or on recorded timings (--replay), and says whether benchmark mode pays.
#include <fmt/core.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <optional>

#include "cli.hpp"
#include "convtune/error.hpp"
#include "convtune/registry.hpp"
#include "convtune/sim/options.hpp"
#include "convtune/sim/replay_backend.hpp"
#include "convtune/sim/report.hpp"
#include "convtune/sim/simulator.hpp"

namespace convtune::cli {

namespace {

struct SimulateOptions {
    sim::WorkloadArgs w;
    int iterations = 100;
    std::vector<std::string> flags;
    bool compare = false, json = false, csv = false, progress = false, strict = false;
    std::string backend, replay, plot, measured, kernel_cache = "warm";
    double min_saving = 0.02;
};

int simulate_command(const SimulateOptions& o) {
    // Everything is validated before anything runs or is written.
    const sim::Stream stream = o.w.make_stream();
    std::vector<sim::Setting> settings;
    for (const std::string& f : o.flags) settings.push_back(sim::parse_setting(f));
    if (o.compare || settings.empty()) {
        std::vector<sim::Setting> all = sim::standard_settings();
        for (sim::Setting& s : settings) all.push_back(s);
        settings = all;
    }
    for (std::size_t i = 0; i < settings.size(); ++i)
        for (std::size_t j = 0; j < i; ++j)
            if (settings[i].name == settings[j].name) throw Error("--flags: setting '" + settings[i].name + "' given twice");
    if (!o.plot.empty() && ::access(std::filesystem::path(o.plot).parent_path().empty() ? "." : std::filesystem::path(o.plot).parent_path().c_str(), W_OK) != 0)
        throw Error("--plot: cannot write in the folder of '" + o.plot + "'");

    std::optional<sim::PyTorchMeasurements> measured;
    if (!o.measured.empty()) measured = sim::PyTorchMeasurements::load(o.measured);
    const bool measured_only = measured && o.replay.empty() && o.backend.empty();

    std::unique_ptr<sim::ReplayBackend> replay;
    Backend* backend = nullptr;
    if (!o.replay.empty()) {
        sim::Recording rec = sim::Recording::load(o.replay);
        if (!o.backend.empty() && o.backend != rec.environment.backend)
            throw Error("--backend: '" + o.backend + "' does not match the recording's backend '" + rec.environment.backend + "'");
        replay = std::make_unique<sim::ReplayBackend>(std::move(rec), o.w.seed, !o.strict);
        backend = replay.get();
    } else if (!measured_only) {
        backend = &find_backend(o.backend.empty() ? "cpu" : o.backend);
    }

    sim::SimulationOptions so;
    so.iterations = o.iterations;
    so.settings = settings;
    so.seed = o.w.seed;
    so.min_saving = o.min_saving;
    if (measured) so.measured = &*measured;
    so.kernel_cache = o.kernel_cache;
    sim::Progress bar("simulate", o.progress || ::isatty(2));
    so.progress = [&bar](int64_t d, int64_t t, const std::string& w) { bar.update(d, t, w); };
    const sim::SimulationResult r = measured_only ? sim::simulate_measured(stream, so) : sim::simulate(*backend, stream, so);
    bar.finish();

    sim::ReportContext ctx;
    ctx.title = o.w.describe(stream) + ", " + std::to_string(o.iterations) + " iterations";
    const sim::StreamSpec& sp = stream.spec();
    std::string streamd;
    if (sp.kind == sim::StreamKind::batch || sp.kind == sim::StreamKind::mixed) {
        streamd += "batches";
        for (int64_t b : sp.batches) streamd += " " + std::to_string(b);
        streamd += "; ";
    }
    if (sp.kind == sim::StreamKind::resolution || sp.kind == sim::StreamKind::mixed) {
        streamd += "scales";
        for (double s : sp.scales) streamd += fmt::format(" {:g}", s);
        streamd += " (per spatial dim); ";
    }
    if (sp.kind != sim::StreamKind::fixed && sp.kind != sim::StreamKind::trace) streamd += "stream seed " + std::to_string(sp.seed) + "; ";
    ctx.details = streamd + r.engine + (replay ? " of " + o.replay : std::string()) + " on backend " + r.backend + " (" + r.environment + ")";

    if (!o.plot.empty()) sim::write_file_atomic(o.plot, sim::to_svg(r, ctx));
    if (o.json) fmt::print("{}\n", sim::to_json(r, ctx).dump(2));
    else if (o.csv) fmt::print("{}", sim::to_csv(r));
    else fmt::print("{}", sim::format_table(r, ctx));
    bool failed = false;
    for (const sim::ScenarioResult& s : r.scenarios) failed = failed || !s.failure.empty();
    return failed ? run_failed : ok;
}

}  // namespace

void add_simulate(CLI::App& app, Action& action) {
    auto* cmd = app.add_subcommand("simulate", "Replay a workload under each flag setting: does benchmark mode pay?");
    auto o = std::make_shared<SimulateOptions>();
    cmd->add_option("--workload,-w", o->w.workload, "Built-in network (resnet50, vgg11, ...), a shape file or a workload file");
    cmd->add_option("--shapes-dir", o->w.shapes_dir, "Folder of the benchdnn shape files behind the built-in names (default: $CONVTUNE_SHAPES_DIR or the build's)");
    cmd->add_option("--stream,-s", o->w.stream, "fixed, batch, resolution, mixed or trace:FILE")->capture_default_str();
    cmd->add_option("--iterations,-n", o->iterations, "Iterations to simulate")->capture_default_str()->check(CLI::Range(1, 10000000));
    cmd->add_option("--mode", o->w.mode, "infer (forward) or train (forward + backward data + backward filter)")->capture_default_str();
    cmd->add_option("--batch", o->w.batch, "Batch size of the workload (default: as written)")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
    cmd->add_option("--batches", o->w.batches, "Batch sizes a batch/mixed stream draws from, e.g. 1,2,4,8");
    cmd->add_option("--scales", o->w.scales, "Scales of each spatial input size a resolution/mixed stream draws from, e.g. 0.5,1,1.5");
    cmd->add_option("--dtype", o->w.dtype, "Data type of every problem: f32, f16, bf16");
    cmd->add_option("--layout", o->w.layout, "Layout of every problem: nchw or nhwc");
    cmd->add_option("--seed", o->w.seed, "Seed of the stream's choices and of the replay's draws")->capture_default_str();
    cmd->add_option("--flags,-f", o->flags,
                    "A flag setting: off, on, on+det, adaptive, pytorch, key=value,... or LABEL:key=value,... (repeatable)");
    cmd->add_flag("--compare", o->compare, "Compare all five standard settings (the default when no --flags is given)");
    cmd->add_option("--backend,-b", o->backend, "Backend to run live (default cpu), or the recording's backend with --replay");
    cmd->add_option("--replay", o->replay, "Recording (from `convtune record`) to replay instead of running a backend");
    cmd->add_option("--pytorch-measured", o->measured,
                    "PyTorch's own measurements (python/convtune/pytorch_measure.py grid): the off and pytorch settings replay them; "
                    "alone (no --replay or --backend), only those two settings are simulated");
    cmd->add_option("--kernel-cache", o->kernel_cache, "With --pytorch-measured: the CUDA kernel cache the run starts with, cold or warm")
        ->check(CLI::IsMember({"cold", "warm"}));
    cmd->add_flag("--strict", o->strict, "With --replay: refuse problems the recording lacks instead of scaling them from the same layer");
    auto* json = cmd->add_flag("--json", o->json, "Print one JSON document instead of the table");
    auto* csv = cmd->add_flag("--csv", o->csv, "Print one CSV row per setting and iteration instead of the table");
    json->excludes(csv);
    cmd->add_option("--plot", o->plot, "Write an SVG plot of cumulative time per iteration");
    cmd->add_flag("--progress", o->progress, "Show a progress bar on stderr even when it is not a terminal");
    cmd->add_option("--min-saving", o->min_saving, "Savings below this fraction count as no difference")->capture_default_str()->check(CLI::Range(0.0, 1.0));
    cmd->callback([o, &action] { action = [o] { return simulate_command(*o); }; });
}

}  // namespace convtune::cli
