// Checking an algorithm's result against the f64 oracle with its documented bound.
#pragma once

#include <functional>
#include <string>

#include "convtune/algorithm.hpp"
#include "convtune/host_data.hpp"
#include "convtune/verify/oracle.hpp"

namespace convtune::test {

struct CheckOutcome {
    bool ran = false;
    bool passed = false;
    std::string message;  // what failed, with the problem and numbers
    ErrorStats stats;
};

// Runs `a` on inputs made from `seed` and compares with `ref` (the oracle of the same inputs).
CheckOutcome check_against(const Algorithm& a, const HostTensors& inputs, const OracleResult& ref);

// The message of the convtune::Error that f throws ("" when it throws none).
std::string error_of(const std::function<void()>& f);
inline bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace convtune::test
