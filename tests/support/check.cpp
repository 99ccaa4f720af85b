#include "support/check.hpp"

#include <fmt/core.h>

#include "convtune/error.hpp"

namespace convtune::test {

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

CheckOutcome check_against(const Algorithm& a, const HostTensors& inputs, const OracleResult& ref) {
    CheckOutcome o;
    HostTensors t = inputs;
    const RunResult r = execute(a, t);
    const ConvProblem& p = t.problem;
    if (!r.status.ok()) {
        o.message = fmt::format("{} on {}: run returned {} ({})", a.id(), p.to_string(), r.status.code_name(),
                                r.status.message);
        return o;
    }
    o.ran = true;
    o.stats = compare(t, ref);
    const double bound = a.error_bound(p);
    o.passed = o.stats.finite && o.stats.max_scaled <= bound;
    if (!o.passed)
        o.message = fmt::format(
            "{} on {}: max scaled error {:.3e} > bound {:.3e} (max abs {:.3e}, rel L2 {:.3e}, {} at index {})", a.id(),
            p.to_string(), o.stats.max_scaled, bound, o.stats.max_abs, o.stats.rel_l2,
            o.stats.finite ? "worst" : "non-finite", o.stats.worst_index);
    return o;
}

}  // namespace convtune::test
