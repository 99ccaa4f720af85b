// cpu.direct against the f64 oracle over the awkward-shape sweep; the adjoint identities that
// tie the three directions together without any reference; bitwise reruns.
#define BOOST_TEST_MODULE cpu_reference
#include <boost/test/unit_test.hpp>

#include "convtune/numeric.hpp"
#include "cpu/cpu_backend.hpp"
#include "support/check.hpp"
#include "support/sweep.hpp"

using namespace convtune;

BOOST_AUTO_TEST_CASE(direct_matches_oracle_on_awkward_shapes) {
    int checked = 0;
    for (const auto& c : test::expand(test::awkward_shapes(), {DataType::f32, DataType::f16, DataType::bf16})) {
        const HostTensors in = make_host_tensors(c.problem, 7);
        const auto out = test::check_against(cpu_direct(), in, oracle(in));
        BOOST_TEST(out.passed, c.label << ": " << out.message);
        ++checked;
    }
    BOOST_TEST_MESSAGE(checked << " problems checked");
}

BOOST_AUTO_TEST_CASE(check_catches_a_wrong_result) {
    // The comparison itself must be able to fail: perturb one element of a correct output.
    const ConvProblem p = ConvProblem::parse("n=1,c=3,k=2,in=5x5,ker=3x3,pad=1x1");
    HostTensors t = make_host_tensors(p, 3);
    const OracleResult ref = oracle(t);
    BOOST_REQUIRE(execute(cpu_direct(), t).status.ok());
    BOOST_TEST(compare(t, ref).max_scaled <= cpu_direct().error_bound(p));
    auto* y = reinterpret_cast<float*>(t.y.data());
    y[7] += 1e-3f;
    BOOST_TEST(compare(t, ref).max_scaled > cpu_direct().error_bound(p));
    y[7] = std::numeric_limits<float>::quiet_NaN();
    BOOST_TEST(!compare(t, ref).finite);
}

namespace {
double dot(const std::vector<std::byte>& a, const std::vector<std::byte>& b) {
    const auto* x = reinterpret_cast<const double*>(a.data());
    const auto* y = reinterpret_cast<const double*>(b.data());
    double s = 0;
    for (std::size_t i = 0; i < a.size() / sizeof(double); ++i) s += x[i] * y[i];
    return s;
}
}  // namespace

BOOST_AUTO_TEST_CASE(adjoint_identities_in_f64) {
    // <y, fwd(x,w)> = <bwd_data(y,w), x> = <bwd_filter(x,y), w> for random x, w, y.
    for (const auto& c : test::awkward_shapes()) {
        for (Layout l : {Layout::nchw, Layout::nhwc}) {
            ConvProblem p = c.problem;
            p.dtype = DataType::f64;
            p.layout = l;
            HostTensors base = make_host_tensors(p, 11);
            // Random y as well (make_host_tensors NaN-fills the output of fwd).
            ConvProblem pd = p;
            pd.direction = Direction::bwd_data;
            base.y = make_host_tensors(pd, 12).y;
            HostTensors f = base, bd = base, bf = base;
            f.problem.direction = Direction::fwd;
            bd.problem.direction = Direction::bwd_data;
            bf.problem.direction = Direction::bwd_filter;
            BOOST_REQUIRE(execute(cpu_direct(), f).status.ok());
            BOOST_REQUIRE(execute(cpu_direct(), bd).status.ok());
            BOOST_REQUIRE(execute(cpu_direct(), bf).status.ok());
            const double a = dot(base.y, f.y), b = dot(bd.x, base.x), d = dot(bf.w, base.w);
            const double scale = std::max({std::abs(a), 1.0});
            BOOST_TEST(std::abs(a - b) / scale < 1e-12, c.label << " " << layout_name(l, p.spatial_dims) << ": " << a << " vs " << b);
            BOOST_TEST(std::abs(a - d) / scale < 1e-12, c.label << " " << layout_name(l, p.spatial_dims) << ": " << a << " vs " << d);
        }
    }
}

BOOST_AUTO_TEST_CASE(bitwise_identical_reruns) {
    for (const auto& c : test::expand({test::awkward_shapes()[0], test::awkward_shapes()[12]}, {DataType::f32, DataType::bf16})) {
        HostTensors a = make_host_tensors(c.problem, 5), b = a;
        BOOST_REQUIRE(execute(cpu_direct(), a).status.ok());
        BOOST_REQUIRE(execute(cpu_direct(), b).status.ok());
        BOOST_TEST((output_of(a) == output_of(b)), c.label);
    }
}

BOOST_AUTO_TEST_CASE(layouts_agree) {
    // The same logical tensors in both layouts give the same logical result: checked through the
    // oracle, which is layout-aware, on a problem whose layouts differ in memory.
    ConvProblem p = ConvProblem::parse("n=2,c=3,k=4,in=5x6,ker=3x3,pad=1x1");
    for (Layout l : {Layout::nchw, Layout::nhwc}) {
        p.layout = l;
        const HostTensors in = make_host_tensors(p, 9);
        BOOST_TEST(test::check_against(cpu_direct(), in, oracle(in)).passed);
    }
}

BOOST_AUTO_TEST_CASE(tf32_rounding) {
    BOOST_TEST(round_tf32(1.0f) == 1.0f);
    BOOST_TEST(round_tf32(1.0f + 0x1p-11f) == 1.0f);            // tie rounds to even
    BOOST_TEST(round_tf32(1.0f + 0x1p-10f) == 1.0f + 0x1p-10f);  // representable
    BOOST_TEST(round_tf32(1.0f + 3 * 0x1p-12f) == 1.0f + 0x1p-10f);
    BOOST_TEST(bf16_to_float(float_to_bf16(1.0f + 0x1p-8f)) == 1.0f);
    BOOST_TEST(f16_to_float(float_to_f16(1.0f + 0x1p-10f)) == 1.0f + 0x1p-10f);
}
