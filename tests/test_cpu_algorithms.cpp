// Every algorithm of every available host backend (cpu, onednn) against the f64 oracle, within
// its documented error bound, over the awkward-shape sweep (all directions, layouts, dtypes) and
// the ResNet-50 v1.5 layers at batch 1; deterministic algorithms rerun bitwise-identically.
#define BOOST_TEST_MODULE cpu_algorithms
#include <boost/test/unit_test.hpp>

#include <map>

#include "convtune/registry.hpp"
#include "support/check.hpp"
#include "support/cpu_level.hpp"
#include "support/sweep.hpp"

using namespace convtune;

using convtune::test::RequireCpuLevel;
BOOST_TEST_GLOBAL_FIXTURE(RequireCpuLevel);
using convtune::test::host_algorithms;

namespace {

void check_all(const std::vector<test::Case>& cases, std::map<std::string, int>& ran, bool skip_reference = false) {
    for (const auto& c : cases) {
        const HostTensors in = make_host_tensors(c.problem, 21);
        std::optional<OracleResult> ref;
        for (const Algorithm* a : host_algorithms()) {
            if (!a->supports(c.problem)) continue;
            if (skip_reference && a->notes().has(Note::reference)) continue;
            if (!ref) ref = oracle(in);
            const auto out = test::check_against(*a, in, *ref);
            BOOST_TEST(out.passed, c.label << ": " << out.message);
            ++ran[std::string(a->id())];
        }
    }
}

}  // namespace

BOOST_AUTO_TEST_CASE(awkward_shapes_all_algorithms) {
    std::map<std::string, int> ran;
    check_all(test::expand(test::awkward_shapes(), {DataType::f32, DataType::f16, DataType::bf16}), ran);
    for (const Algorithm* a : host_algorithms()) {
        BOOST_TEST_MESSAGE(a->id() << ": " << ran[std::string(a->id())] << " sweep problems");
        BOOST_TEST(ran[std::string(a->id())] > 0, a->id() << " supports no problem of the sweep");
    }
}

BOOST_AUTO_TEST_CASE(resnet50_layers_batch1) {
    std::vector<test::Case> cases;
    for (const auto& c : test::shape_file_cases("shapes_resnet_50_v1_5", 1))
        for (Direction d : {Direction::fwd, Direction::bwd_data, Direction::bwd_filter}) {
            test::Case x = c;
            x.problem.direction = d;
            x.problem.layout = d == Direction::fwd ? Layout::nchw : Layout::nhwc;
            cases.push_back(x);
        }
    std::map<std::string, int> ran;
    // The naive reference (cpu.direct) is proven on the sweep and by the adjoint identities; its
    // loops are too slow to repeat on every full-size layer.
    check_all(cases, ran, true);
    for (auto& [id, n] : ran) BOOST_TEST_MESSAGE(id << ": " << n << " ResNet-50 problems");
    // Every unique layer of the file (23) was read in every direction; every CPU algorithm but the
    // reference, and oneDNN in every direction, was checked on some of them.
    BOOST_TEST(cases.size() == 3u * 23u);
    for (const Algorithm* a : find_backend("cpu").algorithms())
        if (!a->notes().has(Note::reference))
            BOOST_TEST(ran[std::string(a->id())] > 0, a->id() << " was checked on no ResNet-50 layer");
    bool onednn = false;
    for (Backend* b : backends()) onednn = onednn || (b->name() == "onednn" && b->availability().ok);
    if (onednn)
        for (const std::string prefix : {"onednn.fwd.", "onednn.bwd_data.", "onednn.bwd_filter."}) {
            int n = 0;
            for (const auto& [id, count] : ran) n += id.rfind(prefix, 0) == 0 ? count : 0;
            BOOST_TEST(n > 0, prefix << "* was checked on no ResNet-50 layer");
        }
}

BOOST_AUTO_TEST_CASE(deterministic_algorithms_rerun_bitwise) {
    const auto cases = test::expand({test::awkward_shapes()[0], test::awkward_shapes()[12]}, {DataType::f32});
    for (const Algorithm* a : host_algorithms()) {
        if (a->notes().has(Note::nondeterministic)) continue;
        for (const auto& c : cases) {
            if (!a->supports(c.problem)) continue;
            HostTensors x = make_host_tensors(c.problem, 4), y = x;
            BOOST_REQUIRE(execute(*a, x).status.ok());
            BOOST_REQUIRE(execute(*a, y).status.ok());
            BOOST_TEST((output_of(x) == output_of(y)), a->id() << " on " << c.problem.to_string());
        }
    }
}
