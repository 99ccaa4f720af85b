// A backend defined outside the library (tests/example_backend) registered with one line, then
// reached by name as a compiled-in one: the registry, the selector, convolution().
#define BOOST_TEST_MODULE example_backend
#include <boost/test/unit_test.hpp>

#include "convtune/convtune.hpp"
#include "convtune/error.hpp"
#include "convtune/host_data.hpp"
#include "convtune/policy.hpp"
#include "convtune/registry.hpp"
#include "convtune/verify/oracle.hpp"
#include "example_backend/example_backend.hpp"
#include "support/check.hpp"

using namespace convtune;

namespace {
struct Registered {
    Registered() { register_backend(example::example_backend()); }  // the one registration line
};
const ConvProblem kP = ConvProblem::parse("n=2,c=3,k=4,in=7x6,ker=3x2,stride=2x1,dil=1x2,pad=1x1");
}  // namespace

BOOST_TEST_GLOBAL_FIXTURE(Registered);

BOOST_AUTO_TEST_CASE(found_by_name_and_by_algorithm_id) {
    BOOST_TEST(&find_backend("example") == &example::example_backend());
    BOOST_TEST(find_algorithm("example.direct").backend().name() == "example");
    BOOST_TEST(backends().back()->name() == "example");
    BOOST_TEST(test::error_of([] { register_backend(example::example_backend()); }) ==
               "backend: 'example' is already registered");
}

BOOST_AUTO_TEST_CASE(convolution_runs_it_within_its_error_bound) {
    for (const char* flags : {"benchmark=0", "benchmark=1"}) {
        FlagsGuard g(parse_flags(flags));
        HostTensors t = make_host_tensors(kP, 4);
        const OracleResult ref = oracle(t);
        BOOST_TEST(convolution(kP, t.views(), "example").ok());
        const ErrorStats e = compare(t, ref);
        BOOST_TEST(e.finite);
        BOOST_TEST(e.max_scaled <= find_algorithm("example.direct").error_bound(kP));
    }
}

BOOST_AUTO_TEST_CASE(its_ranking_offers_the_default_named_lists) {
    // The heuristic list holds each supporting algorithm once, the fallback list none, `all` each
    // once: a search drawing from heuristic and fallback (pytorch) or from all (convtune) sees
    // example.direct once.
    const auto r = example::example_backend().ranking(kP);
    const Algorithm* a = r->next();
    BOOST_REQUIRE(a);
    BOOST_TEST(a->id() == "example.direct");
    BOOST_TEST(r->in_list(*a, ListName::heuristic) == 1);
    BOOST_TEST(r->in_list(*a, ListName::fallback) == 0);
    BOOST_TEST(r->in_list(*a, ListName::all) == 1);
    for (const char* policy : {"pytorch", "convtune"})
        BOOST_TEST(r->in_lists(*a, parse_policy(policy)->draws_from()) == 1);
    BOOST_TEST(!r->next());
}

BOOST_AUTO_TEST_CASE(what_it_does_not_support_is_an_error_naming_the_backend) {
    ConvProblem p = kP;
    p.direction = Direction::bwd_data;
    HostTensors t = make_host_tensors(p, 4);
    const std::string m = test::error_of([&] { (void)convolution(p, t.views(), "example"); });
    BOOST_TEST(m.find("no algorithm of backend 'example'") == 0u, m);
    BOOST_TEST(m.find("forward only") != std::string::npos, m);
}
