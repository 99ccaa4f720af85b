// adaptive: "benchmark only when it pays".
//   key        as convtune
//   when       with benchmark on, a shape runs the heuristic's pick (a provisional decision) until
//              it has been asked for adaptive_after times, or, with adaptive_after=0, as many
//              times as its search would cost in calls (adaptive_threshold); then it is searched
//   which      as convtune; the provisional decision reaches as many eligible candidates as the
//              search would time, so that the threshold can count them
//   how        as convtune
//   persisted  as convtune
#include "policies.hpp"

#include "convtune/selector.hpp"

namespace convtune::policies {

namespace {

class Adaptive final : public ConvtuneSearch {
public:
    Policy id() const override { return Policy::adaptive; }
    bool defers_search(const FlagValues& f) const override { return f.benchmark; }
    bool search_due(int64_t seen, const Decision* provisional, const FlagValues& f) const override {
        if (provisional) return seen >= adaptive_threshold(*provisional, f);
        // adaptive_after=0 (auto) waits for the provisional decision, which knows how many
        // candidates a search would time.
        return f.adaptive_after > 0 && seen >= f.adaptive_after;
    }
    int heuristic_reach(const FlagValues& f) const override { return search_reach(f); }
    bool recommended_by_name() const override { return true; }
};

}  // namespace

const SelectionPolicy& adaptive() {
    static const Adaptive p;
    return p;
}

}  // namespace convtune::policies
