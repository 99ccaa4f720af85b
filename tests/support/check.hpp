// Checking an algorithm's result against the f64 oracle with its documented bound.
#pragma once

#include <string>

#include "convtune/algorithm.hpp"
#include "convtune/host_data.hpp"
#include "cpu/oracle.hpp"

namespace convtune::test {

struct CheckOutcome {
    bool ran = false;
    bool passed = false;
    std::string message;  // what failed, with the problem and numbers
    ErrorStats stats;
};

// Runs `a` on inputs made from `seed` and compares with `ref` (the oracle of the same inputs).
CheckOutcome check_against(const Algorithm& a, const HostTensors& inputs, const OracleResult& ref);

}  // namespace convtune::test
