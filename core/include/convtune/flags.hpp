// Flags: the torch.backends.cudnn emulation plus convtune's own policy knobs.
//
// The five PyTorch flags keep PyTorch's names and defaults (enabled=true, benchmark=false,
// benchmark_limit=10, deterministic=false, allow_tf32=true). Values are process-wide, as
// PyTorch's are: set_global_flags changes what every thread's next convolution does. A thread
// may override them for itself (set_thread_flags, or a FlagsGuard until it is destroyed; guards
// nest), so two threads can run with different flags at once. Every convolution reads the flags
// (current_flags()) when it runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

namespace convtune {

class SelectionPolicy;

// The selection policy a selection follows: one of the registered policies (their registry:
// core/src/policies/registry.cpp; the objects: policy.hpp), held by value as a handle to its one
// object. The default is convtune.
class Policy {
public:
    Policy();
    explicit Policy(const SelectionPolicy& p) : p_(&p) {}
    const SelectionPolicy& operator*() const { return *p_; }
    const SelectionPolicy* operator->() const { return p_; }
    bool operator==(const Policy&) const = default;

private:
    const SelectionPolicy* p_;
};
// The policy's registered name ("pytorch", "pytorch-v7", "convtune", "adaptive", "incremental").
std::string_view to_string(Policy p);
Policy parse_policy(std::string_view s);  // throws ParseError

struct FlagValues {
    // torch.backends.cudnn.*
    bool enabled = true;
    bool benchmark = false;
    int benchmark_limit = 10;  // 0 = time every candidate
    bool deterministic = false;
    bool allow_tf32 = true;
    // convtune's own knobs
    Policy policy;                   // the selection policy (default: convtune)
    std::size_t workspace_limit = std::numeric_limits<std::size_t>::max();  // bytes
    double search_budget_ms = 2000;  // convtune policy: timing budget per problem (after warm-ups)
    int min_samples = 3;             // convtune policy: samples per candidate before the median can be stable
    int max_samples = 15;            // convtune policy: samples per candidate at most
    double stable_rel = 0.02;        // convtune policy: median is stable when it moved less than this
    int explore_slots = 3;           // convtune policy: of the benchmark_limit candidates timed, up to this
                                     // many are kept for candidates the backend's heuristics do not
                                     // suggest (Ranking::suggested); at most benchmark_limit - 1
    int adaptive_after = 0;          // adaptive policy: search a shape on its N-th occurrence; 0 = auto
                                     // (what its search times x (1 + max_samples): see adaptive_threshold)

    bool operator==(const FlagValues&) const = default;
    // "enabled=1,benchmark=0,benchmark_limit=10,deterministic=0,allow_tf32=1,policy=convtune"
    std::string to_string() const;
};

// The numeric flags and their lower bounds, in one place: parse_flags and the Python module
// (python/src/module.cpp, which exports the bounds to python/convtune/backends/cudnn.py for its
// PyTorch-style messages) check values against these. Integer flags also fit in their type.
struct NumericFlag {
    const char* key;
    double lo;
    std::variant<int FlagValues::*, std::size_t FlagValues::*, double FlagValues::*> field;
};
std::span<const NumericFlag> numeric_flags();
const NumericFlag* find_numeric_flag(std::string_view key);  // nullptr when not numeric
// The boolean flags, likewise, and every flag's name in FlagValues' order (the numeric and
// boolean ones and "policy"): parse_flags, the Python module's dict of flags and, through it,
// python/convtune/backends/cudnn.py read their names from here.
struct BoolFlag {
    const char* key;
    bool FlagValues::*field;
};
std::span<const BoolFlag> bool_flags();
const BoolFlag* find_bool_flag(std::string_view key);  // nullptr when not boolean
std::span<const char* const> flag_names();

// Applies "key=value,key=value" to `base` (keys: enabled, benchmark, benchmark_limit,
// deterministic, allow_tf32, policy, workspace_limit, search_budget_ms, min_samples,
// max_samples, stable_rel, explore_slots, adaptive_after; booleans 0/1/true/false). Throws ParseError naming
// the key. A new flag goes into flag_names() and bool_flags() or numeric_flags(); the Python
// module takes it from there.
FlagValues parse_flags(std::string_view text, FlagValues base = {});

// The flags in effect on this thread: its override (thread_flags()) when it has one, else the
// process-wide ones.
FlagValues current_flags();
// Sets the process-wide values (threads with an override keep it).
void set_global_flags(const FlagValues& v);
FlagValues global_flags();

// This thread's override, if any. set_thread_flags(v) sets it (a complete set of values, copied;
// later process-wide changes do not reach this thread until it is cleared), set_thread_flags({})
// clears it. Other threads never see it. Values are stored by value, so saving thread_flags()
// and restoring it later is safe in any order (the Python module's thread-scoped flags() does
// that: a Python `with` block may be left out of order by generators or coroutines).
std::optional<FlagValues> thread_flags();
void set_thread_flags(const std::optional<FlagValues>& v);

// Overrides this thread's flags until destroyed, then puts back the override it found (none, or
// an enclosing guard's): set_thread_flags in RAII form.
class FlagsGuard {
public:
    explicit FlagsGuard(const FlagValues& v);
    ~FlagsGuard();
    FlagsGuard(const FlagsGuard&) = delete;
    FlagsGuard& operator=(const FlagsGuard&) = delete;

private:
    std::optional<FlagValues> previous_;
};

}  // namespace convtune
