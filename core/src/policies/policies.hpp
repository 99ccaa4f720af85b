// What the policies of this folder share beyond SelectionPolicy: convtune's answers, which the
// adaptive and incremental policies start from. (Each policy's object is returned by a function
// of its file, named in registry.cpp.)
#pragma once

#include "convtune/policy.hpp"

namespace convtune::policies {

// convtune's search (convtune.cpp), which the adaptive and incremental policies share.
class ConvtuneSearch : public SelectionPolicy {
public:
    bool keys_benchmark() const override { return true; }
    int explore_slots(const FlagValues& f, int limit, bool explores) const override;
    bool holds_back_reference() const override { return true; }
    MeasureStrategy measurement(const FlagValues& f) const override;
    Demotion demotion() const override { return {10, 2, 1.5}; }
    bool persists() const override { return true; }
};

}  // namespace convtune::policies
