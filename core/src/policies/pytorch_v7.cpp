// pytorch-v7: PyTorch's legacy-API behaviour (cudnnFind*).
//   key        as pytorch: no `benchmark`
//   when       at once
//   which      benchmark off: the backend's fixed default when deterministic (and eligible),
//              else the heuristic's first eligible candidate; on: every eligible candidate
//              (benchmark_limit does not apply to the legacy API's find)
//   how        one warm-up and one timed call each, the fastest wins
//   persisted  never
#include "policies.hpp"

namespace convtune::policies {

namespace {

class PytorchV7 final : public SelectionPolicy {
public:
    Policy id() const override { return Policy::pytorch_v7; }
    bool keys_benchmark() const override { return false; }
    int search_reach(const FlagValues&) const override { return -1; }
    bool uses_fixed_default(const FlagValues& f) const override { return f.deterministic; }
    MeasureStrategy measurement(const FlagValues&) const override { return MeasureStrategy::sample_once(); }
    bool persists() const override { return false; }
};

}  // namespace

const SelectionPolicy& pytorch_v7() {
    static const PytorchV7 p;
    return p;
}

}  // namespace convtune::policies
