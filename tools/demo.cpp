// convtune demo: one ResNet-50 layer with every algorithm of every available host backend that
// supports it — time (warm-up + median of timed runs) and error against the f64 oracle — then the
// ids of the algorithms that do not support it, on one line; and the level the CPU algorithms
// run at.
#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>

#include "cli.hpp"
#include "convtune/app/list.hpp"
#include "convtune/host_data.hpp"
#include "convtune/registry.hpp"
#include "convtune/stats.hpp"
#include "convtune/verify/oracle.hpp"

namespace convtune::cli {

namespace {

struct DemoOptions {
    std::string problem = R"(mb4ic128ih28oc128oh28kh3ph1n"resnet_50_v1_5:res3b_branch2b")";
    int repeat = 3;
    ProblemOverrides over;
};

int demo(const DemoOptions& o) {
    const ConvProblem p = o.over.apply(ConvProblem::parse_any(o.problem));
    fmt::print(
        "convtune demo: {}\n  {:.2f} GFLOP per run; error = max |out - f64 oracle| / sum|a*b|, bound = the algorithm's "
        "documented bound\n",
        p.to_string(), p.flops() / 1e9);
    fmt::print("  {}\n\n", app::to_text(app::cpu_levels()));
    HostTensors in = make_host_tensors(p, 1);
    const OracleResult ref = oracle(in);
    fmt::print("{:<44} {:>10} {:>9} {:>10} {:>10}  {}\n", "algorithm", "median ms", "GFLOP/s", "error", "bound",
               "result");
    int failed = 0;
    std::vector<std::string> not_applicable;
    for (Backend* b : backends()) {
        if (const Availability av = b->availability(); !av.ok) {
            fmt::print("{:<44} unavailable: {}\n", std::string(b->name()) + ".*", av.reason);
            continue;
        }
        for (const Algorithm* a : b->algorithms()) {
            if (!a->supports(p)) {
                not_applicable.emplace_back(a->id());
                continue;
            }
            HostTensors t = in;
            std::vector<double> ms;
            RunResult r;
            for (int i = 0; i < o.repeat; ++i) {
                r = execute(*a, t, true);
                if (!r.status.ok()) break;
                ms.push_back(r.ms);
            }
            if (!r.status.ok()) {
                fmt::print("{:<44} {:>10}  {}: {}\n", a->id(), "-", r.status.code_name(), r.status.message);
                ++failed;
                continue;
            }
            const double med = median(ms);
            const ErrorStats e = compare(t, ref);
            const double bound = a->error_bound(p);
            const bool pass = e.finite && e.max_scaled <= bound;
            failed += pass ? 0 : 1;
            fmt::print("{:<44} {:>10.3f} {:>9.1f} {:>10.2e} {:>10.2e}  {}\n", a->id(), med, p.flops() / (med * 1e6),
                       e.max_scaled, bound, pass ? "ok" : "WRONG");
        }
    }
    if (!not_applicable.empty())
        fmt::print("not applicable to this problem ({}; `convtune run --algo ID` says why): {}\n",
                   not_applicable.size(), fmt::join(not_applicable, " "));
    return failed ? check_failed : ok;
}

}  // namespace

void add_demo(CLI::App& app, Action& action) {
    auto* cmd = app.add_subcommand("demo", "Run one ResNet-50 layer with every algorithm: time and error");
    auto o = std::make_shared<DemoOptions>();
    cmd->add_option("--problem,-p", o->problem, "Problem (canonical or benchdnn)")->capture_default_str();
    cmd->add_option("--repeat", o->repeat, "Timed runs per algorithm (after one warm-up each)")
        ->check(CLI::Range(1, 1000));
    o->over.add_to(*cmd);
    cmd->callback([o, &action] { action = [o] { return demo(*o); }; });
}

}  // namespace convtune::cli
