// The key a decision is remembered under, in memory and in a tuning database:
//   backend|problem|det=0|tf32=1[|bench=1][|ws=BYTES]|policy=NAME
// `problem` is ConvProblem's canonical string; `bench` is present under the convtune and
// adaptive policies only (PyTorch's key has no `benchmark`, its quirk); `ws` only when the
// workspace limit is not the default (unlimited).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "convtune/flags.hpp"
#include "convtune/problem.hpp"

namespace convtune {

class Backend;

struct CacheKey {
    std::string backend;
    ConvProblem problem;
    bool deterministic = false;
    bool allow_tf32 = true;
    std::optional<bool> benchmark;                // keyed by the convtune and adaptive policies only
    std::optional<std::size_t> workspace_limit;   // present when not the default
    Policy policy;

    // The key of a decision for p on backend b under flags f.
    static CacheKey of(const Backend& b, const ConvProblem& p, const FlagValues& f);
    std::string to_string() const;
    // The inverse of to_string; throws ParseError naming the part that breaks the form above.
    static CacheKey parse(std::string_view text);
    bool operator==(const CacheKey&) const = default;
};

}  // namespace convtune
