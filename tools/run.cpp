// convtune run --problem SPEC [--backend B] [--algo ID | --flags F [--db PATH]] [--check] [--repeat N] [--json]
// Runs one problem once (or timed: warm-up + N timed runs, median reported) with one algorithm:
// the given id, the one the selector chooses under --flags (as convtune::convolution would), or
// the backend's heuristic first choice. --check compares with the f64 oracle. The output tensor's
// FNV-1a hash is printed, so results of separate processes can be compared bit for bit.
#include <fmt/core.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "convtune/convtune.hpp"
#include "convtune/error.hpp"
#include "convtune/hash.hpp"
#include "convtune/host_data.hpp"
#include "convtune/registry.hpp"
#include "convtune/stats.hpp"
#include "convtune/verify/oracle.hpp"

namespace convtune::cli {

namespace {

struct RunOptions {
    std::string problem, backend = "cpu", algo, flags, db;
    bool check = false, json = false;
    int repeat = 0;
    uint64_t seed = 1;
    ProblemOverrides over;
};

std::string fingerprint(const std::vector<std::byte>& bytes) { return fmt::format("{:016x}", fnv1a(bytes)); }

int run_command(const RunOptions& o) {
    const ConvProblem p = o.over.apply(ConvProblem::parse_any(o.problem));
    const Algorithm* algo = nullptr;
    std::string selected_by = "heuristic";
    if (!o.algo.empty() && !o.flags.empty()) throw Error("run: give --algo or --flags, not both");
    if (!o.db.empty() && o.flags.empty()) throw Error("run: --db needs --flags (the database serves the selector)");
    if (!o.algo.empty()) {
        algo = &find_algorithm(o.algo);
        selected_by = "--algo";
    } else if (!o.flags.empty()) {
        const FlagValues f = parse_flags(o.flags);
        Backend& b = find_backend(o.backend);
        require_available(b);
        Context ctx(o.db);
        const auto d = ctx.selector(b).select(p, f);
        algo = b.find(d->algorithm);
        if (!algo) throw Error("run: the selector chose '" + d->algorithm + "', which backend '" + std::string(b.name()) + "' does not have");
        selected_by = std::string(to_string(d->source));
    } else {
        Backend& b = find_backend(o.backend);
        require_available(b);
        const auto order = b.heuristic_order(p);
        if (order.empty()) throw Error("algo: no algorithm of backend '" + std::string(b.name()) + "' supports " + p.to_string());
        algo = order.front();
    }
    require_available(algo->backend());
    if (const Support s = algo->supports(p); !s)
        throw Error("algo: " + std::string(algo->id()) + " does not support this problem: " + s.reason);

    // The whole run's peak, refused before anything is allocated: the tensors, then the
    // workspace during the run or, with --check, the oracle's arrays after it.
    check_memory_budget(p);  // the tensors alone, first
    if (algo->backend().memory() == Memory::host) check_memory_budget(p, algo->workspace_size(p), o.check ? oracle_bytes(p) : 0);
    else if (o.check) check_memory_budget(p, 0, oracle_bytes(p));
    HostTensors t = make_host_tensors(p, o.seed);
    std::vector<double> times;
    RunResult r = execute(*algo, t, o.repeat > 0);
    if (r.status.ok() && o.repeat > 0) {
        times.push_back(r.ms);
        for (int i = 1; i < o.repeat && r.status.ok(); ++i) {
            r = execute(*algo, t, true);
            times.push_back(r.ms);
        }
    }
    nlohmann::json doc{{"problem", p.to_string()}, {"algorithm", algo->id()}, {"selected_by", selected_by}, {"status", r.status.code_name()}};
    if (!r.status.ok()) {
        doc["message"] = r.status.message;
        if (o.json) fmt::print("{}\n", doc.dump(2));
        else fmt::print(stderr, "convtune: {} failed ({}): {}\n", algo->id(), r.status.code_name(), r.status.message);
        return run_failed;
    }
    doc["output_fnv1a"] = fingerprint(output_of(t));
    double median = 0;
    if (!times.empty()) {
        std::sort(times.begin(), times.end());
        median = convtune::median(times);
        doc["median_ms"] = median;
        doc["min_ms"] = times.front();
        doc["max_ms"] = times.back();
        doc["gflops"] = p.flops() / (median * 1e6);
    }
    bool passed = true;
    if (o.check) {
        const OracleResult ref = oracle(t);
        const ErrorStats e = compare(t, ref);
        const double bound = algo->error_bound(p);
        passed = e.finite && e.max_scaled <= bound;
        doc["check"] = {{"max_abs", e.max_abs}, {"rel_l2", e.rel_l2}, {"max_scaled", e.max_scaled},
                        {"bound", bound}, {"finite", e.finite}, {"passed", passed}};
    }
    if (o.json) {
        fmt::print("{}\n", doc.dump(2));
    } else {
        fmt::print("problem   {}\nalgorithm {} ({})\noutput    FNV-1a {}\n", p.to_string(), algo->id(), selected_by,
                   doc["output_fnv1a"].get<std::string>());
        if (!times.empty())
            fmt::print("time      {:.3f} ms median of {} (min {:.3f}, max {:.3f}), {:.1f} GFLOP/s\n", median, times.size(), times.front(),
                       times.back(), p.flops() / (median * 1e6));
        if (o.check) {
            const auto& c = doc["check"];
            fmt::print("check     {}: max abs error {:.3e}, relative L2 {:.3e}, max scaled {:.3e} (bound {:.3e}){}\n",
                       passed ? "PASS" : "FAIL", c["max_abs"].get<double>(), c["rel_l2"].get<double>(), c["max_scaled"].get<double>(),
                       c["bound"].get<double>(), c["finite"].get<bool>() ? "" : ", non-finite output");
        }
    }
    return passed ? ok : check_failed;
}

}  // namespace

void add_run(CLI::App& app, Action& action) {
    auto* cmd = app.add_subcommand("run", "Run one problem with one algorithm, optionally timed and checked");
    auto o = std::make_shared<RunOptions>();
    cmd->add_option("--problem,-p", o->problem, "Problem: canonical form (dir=fwd,c=64,...) or a benchdnn descriptor")->required();
    cmd->add_option("--backend,-b", o->backend, "Backend whose heuristic picks the algorithm (default cpu)")->check(non_empty());
    cmd->add_option("--algo,-a", o->algo, "Algorithm id (see `convtune list`)")->check(non_empty());
    cmd->add_option("--flags", o->flags, "Let the selector choose under these flags, e.g. benchmark=1,deterministic=1 (see `convtune tune`)")->check(non_empty());
    cmd->add_option("--db", o->db, "Tuning database the selector reads and writes (with --flags)")->check(non_empty());
    cmd->add_flag("--check", o->check, "Compare with the f64 oracle (exit 1 when above the algorithm's error bound)");
    cmd->add_option("--repeat", o->repeat, "Timed runs after one warm-up (0 = run once, untimed)")->check(CLI::Range(0, 1000000));
    cmd->add_option("--seed", o->seed, "Seed of the input data")->check(seed());
    cmd->add_flag("--json", o->json, "Print one JSON document");
    o->over.add_to(*cmd);
    cmd->callback([o, &action] { action = [o] { return run_command(*o); }; });
}

}  // namespace convtune::cli
