// convtune: the default policy.
//   key        `benchmark` is part of it (unlike PyTorch's)
//   when       at once, on the shape's first call
//   which      benchmark off: the heuristic's first eligible candidate; on: candidates in
//              heuristic order until benchmark_limit have run, keeping explore_slots of them for
//              candidates the backend's heuristics do not suggest (the heuristic's pick is always
//              timed); a naive reference implementation only when nothing else is eligible;
//              an algorithm over 10x the winner in 2 earlier searches of this process on the same
//              kind of problem, and never within 1.5x of one, is demoted (not timed)
//   how        MeasureStrategy::robust (measurement.hpp)
//   persisted  in the tuning database when one is given
#include <algorithm>

#include "policies.hpp"

namespace convtune::policies {

int ConvtuneSearch::explore_slots(const FlagValues& f, int limit, bool explores) const {
    return limit > 0 && explores ? std::clamp(f.explore_slots, 0, limit - 1) : 0;
}

MeasureStrategy ConvtuneSearch::measurement(const FlagValues& f) const { return MeasureStrategy::robust(f); }

namespace {

class Convtune final : public ConvtuneSearch {
public:
    Policy id() const override { return Policy::convtune; }
};

}  // namespace

const SelectionPolicy& convtune() {
    static const Convtune p;
    return p;
}

}  // namespace convtune::policies
