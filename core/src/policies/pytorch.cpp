// pytorch: PyTorch v8's behaviour (cuDNN graph API), quirks included.
//   key        backend, problem, deterministic, allow_tf32; not `benchmark` (PyTorch issue
//              45372: a shape first met with benchmark off keeps its heuristic pick)
//   when       at once, on the shape's first call
//   which      benchmark off: the heuristic's first eligible candidate; on: only what PyTorch's
//              lists name (Ranking::framework_listings; cuDNN: heuristics mode A and the
//              fallback list): first each listed candidate has its support decided (on cuDNN
//              its plan built), in ranking order, as PyTorch builds every plan before timing
//              any; then they are timed in heuristic order, a candidate both lists name twice,
//              until benchmark_limit timings have run (0: all), reference implementations
//              included (PyTorch times whatever the library offers)
//   how        one warm-up and one timed call each, the fastest wins (a lucky sample can win)
//   persisted  never (PyTorch's cache lives as long as the process)
#include "policies.hpp"

namespace convtune::policies {

namespace {

class Pytorch final : public SelectionPolicy {
public:
    Policy id() const override { return Policy::pytorch; }
    bool keys_benchmark() const override { return false; }
    bool decides_support_before_timing() const override { return true; }
    bool times_framework_listings() const override { return true; }
    MeasureStrategy measurement(const FlagValues&) const override { return MeasureStrategy::sample_once(); }
    bool persists() const override { return false; }
};

}  // namespace

const SelectionPolicy& pytorch() {
    static const Pytorch p;
    return p;
}

}  // namespace convtune::policies
