// pytorch: PyTorch v8's behaviour (cuDNN graph API), quirks included.
//   key        backend, problem, deterministic, allow_tf32; not `benchmark` (PyTorch issue
//              45372: a shape first met with benchmark off keeps its heuristic pick)
//   when       at once, on the shape's first call
//   which      benchmark off: the heuristic's first eligible candidate; on: only what the
//              ranking's `heuristic` and `fallback` lists hold (draws_from; cuDNN: heuristics
//              mode A and the fallback list, PyTorch's two sources): first each listed candidate
//              has its support decided (on cuDNN its plan built), in ranking order, as PyTorch
//              builds every plan before timing any; then they are timed in heuristic order, a
//              candidate both lists name twice, until benchmark_limit timings have run (0: all),
//              reference implementations included (PyTorch times whatever the library offers)
//   how        one warm-up and one timed call each, the fastest wins (a lucky sample can win)
//   persisted  never (PyTorch's cache lives as long as the process)
#include <vector>

#include "../search.hpp"
#include "convtune/policy.hpp"

namespace convtune::policies {

namespace {

class Pytorch final : public SelectionPolicy {
public:
    bool keys_benchmark() const override { return false; }
    bool decides_support_before_timing() const override { return true; }
    std::span<const ListName> draws_from() const override {
        static constexpr ListName kLists[] = {ListName::heuristic, ListName::fallback};
        return kLists;
    }
    MeasureStrategy measurement(const FlagValues&) const override { return MeasureStrategy::sample_once(); }
    bool persists() const override { return false; }

    // Plan, then time: every listed candidate's support decided first, in ranking order; then the
    // listed eligible ones timed in heuristic order, once per listing, until benchmark_limit
    // timings have run.
    Decision search(SearchContext& ctx) const override {
        SearchTimer timer(ctx);
        const int limit = search_reach(ctx.f);
        int timed = 0;
        Measurement m(measurement(ctx.f));
        ctx.list.decide_drawn();  // the ranking has ended: the list is complete
        std::vector<Candidate>& cands = ctx.list.items();
        for (std::size_t i = 0; i < cands.size(); ++i) {
            Candidate& c = cands[i];
            // Listed undecided: in no list it draws from, so its search never sees it.
            if (ctx.list.undecided(i) || c.state != Candidate::State::not_timed) continue;
            if (c.listings == 0) {
                c.reason = "in neither the heuristic nor the fallback list: PyTorch's search never sees it";
            } else if (limit >= 0 && timed >= limit) {
                c.reason = "benchmark_limit=" + std::to_string(ctx.f.benchmark_limit) + " reached";
            } else if (timer.time(i, m, c.listings - 1)) {
                // A listing after the first is timed again (a duplicate plan) and counts again.
                timed += c.listings;
            }
        }
        return timer.finish(m);
    }
};

}  // namespace

const SelectionPolicy& pytorch() {
    static const Pytorch p;
    return p;
}

}  // namespace convtune::policies
