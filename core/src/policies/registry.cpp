// The policy registry: every policy's user-facing name and the function of its file in this
// folder that returns its object, in listing order (--policy's help, all_policies). A new policy
// is its file and one line here. The name is user-facing (--policy, --flags policy=, cache keys,
// tuning databases): never rename one.
#include <array>
#include <iterator>
#include <string>

#include "convtune/error.hpp"
#include "convtune/policy.hpp"

// One line each, every line ending in a backslash up to the list's end.
#define CONVTUNE_POLICIES(X)        \
    X("pytorch", pytorch)           \
    X("pytorch-v7", pytorch_v7)     \
    X("convtune", convtune)         \
    X("adaptive", adaptive)         \
    X("incremental", incremental)   \
    /* the list's end */

namespace convtune {

namespace policies {
#define CONVTUNE_DECLARE_POLICY(name, object) const SelectionPolicy& object();
CONVTUNE_POLICIES(CONVTUNE_DECLARE_POLICY)
#undef CONVTUNE_DECLARE_POLICY
}  // namespace policies

namespace {

struct PolicyEntry {
    std::string_view name;
    const SelectionPolicy& (*object)();
};

constexpr PolicyEntry kPolicies[] = {
#define CONVTUNE_POLICY_ENTRY(name, object) {name, policies::object},
    CONVTUNE_POLICIES(CONVTUNE_POLICY_ENTRY)
#undef CONVTUNE_POLICY_ENTRY
};

}  // namespace

Policy::Policy() : p_(&policies::convtune()) {}

std::span<const Policy> all_policies() {
    static const auto all = [] {
        std::array<Policy, std::size(kPolicies)> a;
        for (std::size_t i = 0; i < a.size(); ++i) a[i] = Policy(kPolicies[i].object());
        return a;
    }();
    return all;
}

std::string_view SelectionPolicy::name() const {
    for (const PolicyEntry& e : kPolicies)
        if (&e.object() == this) return e.name;
    throw Error("policy: a policy that is not registered");
}

std::string_view to_string(Policy p) { return p->name(); }

Policy parse_policy(std::string_view s) {
    // Read at every framework call (convtune.torch passes the policy by name): nothing allocated
    // unless the name is unknown.
    for (const PolicyEntry& e : kPolicies)
        if (s == e.name) return Policy(e.object());
    std::string known;  // "a, b, c or d"
    for (std::size_t i = 0; i < std::size(kPolicies); ++i)
        known += std::string(i == 0                          ? ""
                             : i + 1 == std::size(kPolicies) ? " or "
                                                             : ", ") +
                 std::string(kPolicies[i].name);
    throw ParseError("policy: unknown policy " + quote_input(s) + " (expected " + known + ")");
}

}  // namespace convtune
