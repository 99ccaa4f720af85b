#include "convtune/app/run.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "convtune/convtune.hpp"
#include "convtune/error.hpp"
#include "convtune/execute.hpp"
#include "convtune/hash.hpp"
#include "convtune/memory_budget.hpp"
#include "convtune/registry.hpp"
#include "convtune/stats.hpp"
#include "convtune/verify/oracle.hpp"

namespace convtune::app {

namespace {

constexpr int kMaxRepeat = 1'000'000;

struct Choice {
    const Algorithm* algo = nullptr;
    std::string selected_by;
};

Choice choose(const RunRequest& r, const ConvProblem& p) {
    if (!r.algo.empty() && !r.flags.empty()) throw InvalidRequest("algo", "give {algo} or {flags}, not both");
    if (!r.db.empty() && r.flags.empty())
        throw InvalidRequest("db", "needs {flags} (the database serves the selector)");
    if (!r.algo.empty()) return {&find_algorithm(r.algo), "--algo"};
    Backend& b = find_backend(r.backend);
    require_available(b);
    if (!r.flags.empty()) {
        const FlagValues f = parse_flags(r.flags);
        Context ctx(r.db);
        const auto d = ctx.selector(b).select(p, f);
        const Algorithm* a = b.find(d->algorithm);
        if (!a)
            throw Error("run: the selector chose '" + d->algorithm + "', which backend '" + std::string(b.name()) +
                        "' does not have");
        return {a, std::string(to_string(d->source))};
    }
    const auto order = b.heuristic_order(p);
    if (order.empty())
        throw Error("algo: no algorithm of backend '" + std::string(b.name()) + "' supports " + p.to_string());
    return {order.front(), "heuristic"};
}

}  // namespace

RunReport run(const RunRequest& r) {
    if (r.repeat < 0 || r.repeat > kMaxRepeat)
        throw InvalidRequest("repeat", fmt::format("must be in [0, {}] (got {})", kMaxRepeat, r.repeat));
    const ConvProblem p = with_overrides(ConvProblem::parse_any(r.problem), r.dir, r.dtype, r.layout);
    const Choice c = choose(r, p);
    const Algorithm& algo = *c.algo;
    require_available(algo.backend());
    if (const Support s = algo.supports(p); !s)
        throw Error("algo: " + std::string(algo.id()) + " does not support this problem: " + s.reason);

    // The whole run's peak, refused before anything is allocated: the tensors, then the
    // workspace during the run or, with check, the oracle's arrays after it.
    check_memory_budget(p);  // the tensors alone, first
    if (algo.backend().memory() == Memory::host)
        check_memory_budget(p, algo.workspace_size(p), r.check ? oracle_bytes(p) : 0);
    else if (r.check) check_memory_budget(p, 0, oracle_bytes(p));

    RunReport rep;
    rep.problem = p.to_string();
    rep.algorithm = algo.id();
    rep.selected_by = c.selected_by;
    rep.flops = p.flops();
    HostTensors t = make_host_tensors(p, r.seed);
    RunResult res = execute(algo, t, r.repeat > 0);
    if (res.status.ok() && r.repeat > 0) {
        rep.times_ms.push_back(res.ms);
        for (int i = 1; i < r.repeat && res.status.ok(); ++i) {
            res = execute(algo, t, true);
            rep.times_ms.push_back(res.ms);
        }
    }
    rep.status = res.status;
    if (!rep.status.ok()) return rep;
    rep.output_fnv1a = fmt::format("{:016x}", fnv1a(output_of(t)));
    std::sort(rep.times_ms.begin(), rep.times_ms.end());
    if (r.check) {
        const ErrorStats e = compare(t, oracle(t));
        const double bound = algo.error_bound(p);
        rep.check = RunReport::Check{.max_abs = e.max_abs,
                                     .rel_l2 = e.rel_l2,
                                     .max_scaled = e.max_scaled,
                                     .bound = bound,
                                     .finite = e.finite,
                                     .passed = e.finite && e.max_scaled <= bound};
    }
    return rep;
}

nlohmann::json to_json(const RunReport& r) {
    nlohmann::json doc{{"format", report_format},
                       {"problem", r.problem},
                       {"algorithm", r.algorithm},
                       {"selected_by", r.selected_by},
                       {"status", r.status.code_name()}};
    if (!r.status.ok()) {
        doc["message"] = r.status.message;
        return doc;
    }
    doc["output_fnv1a"] = r.output_fnv1a;
    if (!r.times_ms.empty()) {
        const double median = convtune::median(r.times_ms);
        doc["median_ms"] = median;
        doc["min_ms"] = r.times_ms.front();
        doc["max_ms"] = r.times_ms.back();
        doc["gflops"] = r.flops / (median * 1e6);
    }
    if (r.check)
        doc["check"] = {{"max_abs", r.check->max_abs}, {"rel_l2", r.check->rel_l2}, {"max_scaled", r.check->max_scaled},
                        {"bound", r.check->bound},     {"finite", r.check->finite}, {"passed", r.check->passed}};
    return doc;
}

std::string to_text(const RunReport& r) {
    std::string s = fmt::format("problem   {}\nalgorithm {} ({})\noutput    FNV-1a {}\n", r.problem, r.algorithm,
                                r.selected_by, r.output_fnv1a);
    if (!r.times_ms.empty()) {
        const double median = convtune::median(r.times_ms);
        s += fmt::format("time      {:.3f} ms median of {} (min {:.3f}, max {:.3f}), {:.1f} GFLOP/s\n", median,
                         r.times_ms.size(), r.times_ms.front(), r.times_ms.back(), r.flops / (median * 1e6));
    }
    if (const auto& c = r.check)
        s += fmt::format("check     {}: max abs error {:.3e}, relative L2 {:.3e}, max scaled {:.3e} (bound {:.3e}){}\n",
                         c->passed ? "PASS" : "FAIL", c->max_abs, c->rel_l2, c->max_scaled, c->bound,
                         c->finite ? "" : ", non-finite output");
    return s;
}

}  // namespace convtune::app
