// adaptive: "benchmark only when it pays".
//   key        as convtune
//   when       with benchmark on, a shape runs the heuristic's pick (a provisional decision) until
//              it has been asked for adaptive_after times, or, with adaptive_after=0, as many
//              times as its search would cost in calls (adaptive_threshold); then it is searched
//   which      as convtune; the provisional decision reaches as many eligible candidates as the
//              search would time, so that the threshold can count them
//   how        as convtune
//   persisted  as convtune
#include <algorithm>

#include "policies.hpp"

namespace convtune {

int64_t adaptive_threshold(const Decision& provisional, const FlagValues& f) {
    if (f.adaptive_after > 0) return f.adaptive_after;
    // Ski rental: a search times each eligible candidate up to benchmark_limit of them (a
    // warm-up and up to max_samples runs, each about as long as the heuristic's pick or
    // longer), so it costs about timed x (1 + max_samples) calls of the shape. Running the
    // heuristic's pick that many times first keeps the total within about twice the better of
    // "never search" and "search at once", whichever the stream turns out to favour
    // (docs/autotuning.md has the numbers).
    int64_t eligible = 0;
    for (const Candidate& c : provisional.candidates)
        eligible += c.state == Candidate::State::not_timed || c.state == Candidate::State::chosen_untimed;
    if (const int limit = f.policy->search_reach(f); limit > 0)
        eligible = std::min<int64_t>(eligible, limit);  // what the search times
    return std::max<int64_t>(2, eligible * (1 + f.max_samples));
}

namespace policies {

namespace {

class Adaptive final : public ConvtuneSearch {
public:
    bool defers_search(const FlagValues& f) const override { return f.benchmark; }
    bool search_due(int64_t seen, const Decision* provisional, const FlagValues& f) const override {
        if (provisional) return seen >= adaptive_threshold(*provisional, f);
        // adaptive_after=0 (auto) waits for the provisional decision, which knows how many
        // candidates a search would time.
        return f.adaptive_after > 0 && seen >= f.adaptive_after;
    }
    int heuristic_reach(const FlagValues& f) const override { return search_reach(f); }
};

}  // namespace

const SelectionPolicy& adaptive() {
    static const Adaptive p;
    return p;
}

}  // namespace policies

}  // namespace convtune
