// convtune run --problem SPEC [--backend B] [--algo ID | --flags F [--db PATH]] [--check] [--repeat N] [--json]
// Runs one problem once (or timed: warm-up + N timed runs, median reported) with one algorithm:
// the given id, the one the selector chooses under --flags (as convtune::convolution would), or
// the backend's heuristic first choice. --check compares with the f64 oracle. The output tensor's
// FNV-1a hash is printed, so results of separate processes can be compared bit for bit.
// The work is convtune::app::run; this file fills the request and prints the report.
#include <fmt/core.h>

#include <memory>

#include "cli.hpp"
#include "convtune/app/run.hpp"

namespace convtune::cli {

namespace {

struct RunOptions {
    app::RunRequest r;
    bool json = false;
    ProblemOverrides over;
};

int run_command(const RunOptions& o) {
    app::RunRequest r = o.r;
    r.dir = o.over.dir;
    r.dtype = o.over.dtype;
    r.layout = o.over.layout;
    const app::RunReport rep = app::run(r);
    if (o.json) fmt::print("{}", app::json_text(app::to_json(rep)));
    if (!rep.status.ok()) {
        if (!o.json)
            fmt::print(stderr, "convtune: {} failed ({}): {}\n", rep.algorithm, rep.status.code_name(),
                       rep.status.message);
        return run_failed;
    }
    if (!o.json) fmt::print("{}", app::to_text(rep));
    return rep.passed() ? ok : check_failed;
}

}  // namespace

void add_run(CLI::App& app, Action& action) {
    auto* cmd = app.add_subcommand("run", "Run one problem with one algorithm, optionally timed and checked");
    auto o = std::make_shared<RunOptions>();
    cmd->add_option("--problem,-p", o->r.problem, "Problem: canonical form (dir=fwd,c=64,...) or a benchdnn descriptor")
        ->required();
    cmd->add_option("--backend,-b", o->r.backend, "Backend whose heuristic picks the algorithm (default cpu)")
        ->check(non_empty());
    cmd->add_option("--algo,-a", o->r.algo, "Algorithm id (see `convtune list`)")->check(non_empty());
    cmd->add_option("--flags", o->r.flags,
                    "Let the selector choose under these flags, e.g. benchmark=1,deterministic=1 (see `convtune tune`)")
        ->check(non_empty());
    cmd->add_option("--db", o->r.db, "Tuning database the selector reads and writes (with --flags)")
        ->check(non_empty());
    cmd->add_flag("--check", o->r.check, "Compare with the f64 oracle (exit 1 when above the algorithm's error bound)");
    cmd->add_option("--repeat", o->r.repeat, "Timed runs after one warm-up (0 = run once, untimed)")
        ->check(CLI::Range(0, 1000000));
    cmd->add_option("--seed", o->r.seed, "Seed of the input data")->check(seed());
    cmd->add_flag("--json", o->json, "Print one JSON document");
    o->over.add_to(*cmd);
    cmd->callback([o, &action] { action = [o] { return run_command(*o); }; });
}

}  // namespace convtune::cli
