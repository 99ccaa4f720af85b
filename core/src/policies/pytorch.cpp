// pytorch: PyTorch v8's behaviour (cuDNN graph API), quirks included.
//   key        backend, problem, deterministic, allow_tf32; not `benchmark` (PyTorch issue
//              45372: a shape first met with benchmark off keeps its heuristic pick)
//   when       at once, on the shape's first call
//   which      benchmark off: the heuristic's first eligible candidate; on: first every
//              candidate the heuristics suggest has its support decided (on cuDNN its plan
//              built), in ranking order, as PyTorch builds a plan for every configuration of
//              its heuristics' list (mode A + fallback) before timing any; then candidates in
//              heuristic order are timed until benchmark_limit have run (0: all), reference
//              implementations included (PyTorch times whatever the library offers)
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
    MeasureStrategy measurement(const FlagValues&) const override { return MeasureStrategy::sample_once(); }
    bool persists() const override { return false; }
};

}  // namespace

const SelectionPolicy& pytorch() {
    static const Pytorch p;
    return p;
}

}  // namespace convtune::policies
