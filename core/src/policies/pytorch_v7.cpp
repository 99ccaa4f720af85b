// pytorch-v7: PyTorch's legacy-API behaviour (cudnnFind*).
//   key        as pytorch: no `benchmark`
//   when       at once
//   which      benchmark off: the backend's fixed default when deterministic (and eligible),
//              else the heuristic's first eligible candidate; on: every eligible candidate
//              (benchmark_limit does not apply to the legacy API's find)
//   how        one warm-up and one timed call each, the fastest wins
//   persisted  never
#include "../search.hpp"
#include "convtune/policy.hpp"

namespace convtune::policies {

namespace {

class PytorchV7 final : public SelectionPolicy {
public:
    bool keys_benchmark() const override { return false; }
    int search_reach(const FlagValues&) const override { return -1; }
    bool uses_fixed_default(const FlagValues& f) const override { return f.deterministic; }
    MeasureStrategy measurement(const FlagValues&) const override { return MeasureStrategy::sample_once(); }
    bool persists() const override { return false; }

    // The backend's fixed default when it is eligible, else the heuristic's first eligible.
    Decision pick(SearchContext& ctx) const override {
        if (uses_fixed_default(ctx.f))
            if (const Algorithm* fd = ctx.backend().fixed_default(ctx.p)) {
                ctx.list.reach(-1);
                std::vector<Candidate>& cands = ctx.list.items();
                for (std::size_t i = 0; i < cands.size(); ++i)
                    if (cands[i].id == fd->id() && cands[i].state == Candidate::State::not_timed)
                        return ctx.choose_untimed(i, Source::fixed,
                                                  "PyTorch v7: deterministic && !benchmark uses the fixed default");
            }
        return SelectionPolicy::pick(ctx);
    }
};

}  // namespace

const SelectionPolicy& pytorch_v7() {
    static const PytorchV7 p;
    return p;
}

}  // namespace convtune::policies
