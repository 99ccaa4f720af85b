// The policies as objects (policy.hpp) and the measurement strategies (measurement.hpp): the one
// registry maps every name to its object, each policy answers the selector's questions as
// docs/autotuning.md documents, and the measurement picks repeatably under noise.
#define BOOST_TEST_MODULE policy
#include <boost/test/unit_test.hpp>

#include <set>

#include "convtune/cache_key.hpp"
#include "convtune/error.hpp"
#include "convtune/policy.hpp"
#include "convtune/selector.hpp"
#include "support/fake_backend.hpp"

using namespace convtune;

namespace {
FlagValues flags(const std::string& s) { return parse_flags(s); }
}  // namespace

BOOST_AUTO_TEST_SUITE(registry)

BOOST_AUTO_TEST_CASE(every_name_maps_to_its_own_object) {
    std::set<std::string_view> names;
    std::set<const SelectionPolicy*> objects;
    for (Policy p : all_policies()) {
        const SelectionPolicy& o = policy_of(p);
        BOOST_TEST((o.id() == p), to_string(p));
        BOOST_TEST(o.name() == to_string(p));
        BOOST_TEST((parse_policy(to_string(p)) == p), to_string(p));
        names.insert(o.name());
        objects.insert(&o);
    }
    BOOST_TEST(all_policies().size() == 4u);
    BOOST_TEST(names.size() == all_policies().size());
    BOOST_TEST(objects.size() == all_policies().size());
    BOOST_CHECK_EXCEPTION(parse_policy("fastest"), ParseError, [](const ParseError& e) {
        return std::string(e.what()) == "policy: unknown policy 'fastest' (expected pytorch, pytorch-v7, convtune or adaptive)";
    });
}

BOOST_AUTO_TEST_CASE(each_policy_answers_as_documented) {
    const FlagValues on = flags("benchmark=1,benchmark_limit=4,deterministic=1,explore_slots=2");
    const SelectionPolicy &pt = policy_of(Policy::pytorch), &v7 = policy_of(Policy::pytorch_v7), &ct = policy_of(Policy::convtune),
                          &ad = policy_of(Policy::adaptive);
    // key
    BOOST_TEST(!pt.keys_benchmark());
    BOOST_TEST(!v7.keys_benchmark());
    BOOST_TEST(ct.keys_benchmark());
    BOOST_TEST(ad.keys_benchmark());
    // which
    BOOST_TEST(pt.search_reach(on) == 4);
    BOOST_TEST(v7.search_reach(on) == -1);
    BOOST_TEST(ct.search_reach(flags("benchmark_limit=0")) == -1);
    BOOST_TEST(pt.explore_slots(on, 4, true) == 0);
    BOOST_TEST(ct.explore_slots(on, 4, true) == 2);
    BOOST_TEST(ct.explore_slots(on, 4, false) == 0);
    BOOST_TEST(ct.explore_slots(flags("explore_slots=9"), 4, true) == 3);  // the heuristic's pick keeps its slot
    BOOST_TEST(!pt.holds_back_reference());
    BOOST_TEST(ct.holds_back_reference());
    BOOST_TEST(v7.uses_fixed_default(on));
    BOOST_TEST(!v7.uses_fixed_default(flags("deterministic=0")));
    BOOST_TEST(!pt.uses_fixed_default(on));
    BOOST_TEST(ad.heuristic_reach(on) == 4);
    BOOST_TEST(ct.heuristic_reach(on) == 1);
    // when
    BOOST_TEST(!ct.defers_search(on));
    BOOST_TEST(ad.defers_search(on));
    BOOST_TEST(!ad.defers_search(flags("benchmark=0")));
    BOOST_TEST(!ad.search_due(5, nullptr, on));  // adaptive_after=0: wait for the provisional decision
    BOOST_TEST(ad.search_due(3, nullptr, flags("benchmark=1,adaptive_after=3")));
    BOOST_TEST(!ad.search_due(2, nullptr, flags("benchmark=1,adaptive_after=3")));
    // how
    BOOST_TEST(pt.measurement(on).max_samples == 1);
    BOOST_TEST(ct.measurement(flags("max_samples=7")).max_samples == 7);
    // persisted
    BOOST_TEST(!pt.persists());
    BOOST_TEST(!v7.persists());
    BOOST_TEST(ct.persists());
    BOOST_TEST(ad.persists());
    // The cache key follows the policy's answer.
    test::FakeBackend b("fake", {{"a"}});
    const ConvProblem p = ConvProblem::parse("n=1,c=2,k=2,in=4x4,ker=3x3");
    for (Policy pol : all_policies()) {
        FlagValues f = on;
        f.policy = pol;
        BOOST_TEST(CacheKey::of(b, p, f).benchmark.has_value() == policy_of(pol).keys_benchmark(), to_string(pol));
    }
}

BOOST_AUTO_TEST_SUITE_END()
