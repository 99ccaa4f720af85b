// incremental: in-band tuning, after cuTENSOR's incremental autotuning. A shape is never searched:
// its real calls are the samples.
//   key        as convtune (`benchmark` is part of it)
//   when       never a search. With benchmark on, each real call of the shape (Selector::run)
//              runs the candidate whose call is due and times it on the device's execution clock
//              as it runs: every candidate computes the right output, so no call is spent on
//              timing alone. The first call runs the heuristic's first eligible candidate (what
//              benchmark off runs), the second it again (a sample of what it takes), the next
//              ones the other candidates' first calls (their warm-ups), then rounds of one call
//              of each candidate still racing. Exploring is paced (measurement.hpp,
//              ExplorationBudget, one per selector): a call of another candidate than the pick is
//              made only while exploring's extra cost so far, plus that call's estimate, stays
//              within 20% of what the selector's calls would have taken without it; otherwise the
//              call runs the fastest candidate called so far. So a first iteration full of new
//              shapes runs their picks, and a shape is pinned later than without pacing. Once the
//              measurement has decided, the shape is pinned. select() without a call answers
//              with the heuristic's pick, marked provisional, until then. With benchmark off it
//              is the convtune policy.
//   which      as convtune's search: the eligible candidates in heuristic order (deterministic
//              keeps only deterministic ones, so only those rotate and one of them is pinned), at
//              most benchmark_limit of them (0: all), a naive reference only when nothing else is
//              eligible, with convtune's explore slots (explore_slots of the benchmark_limit kept
//              for candidates the heuristics do not suggest, when the ranking has such); a
//              candidate that fails or runs out of memory is replaced by the next.
//   how        MeasureStrategy::in_band (measurement.hpp): convtune's robust rule on the calls as
//              they come, paced (explore_fraction 0.2): racing drops a candidate clearly slower than the leader (every call over
//              3x the leader's slowest after the first round; from min_samples on, slower beyond
//              the noise), the rotation ends when one candidate is left, when the ones left are
//              tied with stable medians, at max_samples rounds (the cap) or once search_budget_ms
//              of calls have run; then the fastest median is pinned if its lead over the
//              heuristic's pick exceeds the noise, else the heuristic's pick.
//   persisted  as convtune: the pinned decision, with its spread and sample count, is stored in
//              the tuning database (unless its spread is above 50%), and a later process reads
//              it back and rotates nothing
#include "policies.hpp"

namespace convtune::policies {

namespace {

class Incremental final : public ConvtuneSearch {
public:
    Policy id() const override { return Policy::incremental; }
    bool in_band(const FlagValues& f) const override { return f.benchmark; }
    MeasureStrategy measurement(const FlagValues& f) const override { return MeasureStrategy::in_band(f); }
    bool recommended_by_name() const override { return true; }
};

}  // namespace

const SelectionPolicy& incremental() {
    static const Incremental p;
    return p;
}

}  // namespace convtune::policies
