// The core utilities each place shares: statistics, hashes, the cache key, device tensors, the
// flag filter and the selector's observer hook.
#define BOOST_TEST_MODULE core_utils
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>

#include "convtune/cache_key.hpp"
#include "convtune/device_tensors.hpp"
#include "convtune/error.hpp"
#include "convtune/hash.hpp"
#include "convtune/host_data.hpp"
#include "convtune/selector.hpp"
#include "convtune/stats.hpp"
#include "support/fake_backend.hpp"

using namespace convtune;
using test::FakeBackend;
using test::FakeSpec;

namespace {
const ConvProblem kP = ConvProblem::parse("n=2,c=4,k=4,in=6x6,ker=3x3,pad=1x1");

// A host device whose algorithms read no tensor data (as a replay of recorded timings).
class NoDataBackend final : public FakeBackend {
public:
    using FakeBackend::FakeBackend;
    bool needs_tensor_data() const override { return false; }
    void upload(void* dst, const void* src, std::size_t bytes) const override {
        ++uploads;
        FakeBackend::upload(dst, src, bytes);
    }
    mutable int uploads = 0;
};
}  // namespace

BOOST_AUTO_TEST_SUITE(stats)

BOOST_AUTO_TEST_CASE(median_is_the_middle_or_the_mean_of_the_two_middle_values) {
    BOOST_TEST(median({}) == 0.0);
    BOOST_TEST(median({3.0}) == 3.0);
    BOOST_TEST(median({5.0, 1.0, 3.0}) == 3.0);
    BOOST_TEST(median({4.0, 1.0, 3.0, 2.0}) == 2.5);  // not the upper middle value (3)
}

BOOST_AUTO_TEST_CASE(mad_and_relative_spread) {
    BOOST_TEST(median_abs_deviation({}) == 0.0);
    BOOST_TEST(median_abs_deviation({1.0, 2.0, 3.0, 4.0, 100.0}) == 1.0);  // deviations 2 1 0 1 97
    BOOST_TEST(relative_spread({}) == 0.0);
    BOOST_TEST(relative_spread({0.0, 0.0}) == 0.0);
    BOOST_TEST(relative_spread({1.0, 2.0, 4.0}) == 1.5);  // (4 - 1) / 2
}

BOOST_AUTO_TEST_CASE(slower_beyond_noise_needs_no_overlap) {
    const std::vector<double> a{1.0, 1.0, 1.0}, b{1.2, 1.2, 1.2};
    BOOST_TEST(slower_beyond_noise(a, b, 3, 0.02));
    BOOST_TEST(!slower_beyond_noise(b, a, 3, 0.02));
    BOOST_TEST(!slower_beyond_noise(a, {1.01, 1.01, 1.01}, 3, 0.02));  // within the floor
    BOOST_TEST(!slower_beyond_noise(a, {}, 3, 0.02));
    // Measured on the H200 (TF32 bwd_data, a 70 us kernel): two alike outliers give b a median
    // 13% above a's and a MAD of 0.0007, yet b's fastest sample beats a's median: not beyond
    // the noise (in 10 processes, b was the faster of the two).
    const std::vector<double> x{0.1, 0.0777, 0.0783}, y{0.0884, 0.0757, 0.0891};
    BOOST_TEST(!slower_beyond_noise(x, y, 3, 0.02));
    BOOST_TEST(slower_beyond_noise(x, {0.0884, 0.0817, 0.0891}, 3, 0.02));  // the same without the overlap
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(hashes)

BOOST_AUTO_TEST_CASE(reference_values) {
    // splitmix64's first output from state 0 and the FNV-1a test vectors.
    BOOST_TEST(splitmix64(0) == 0xe220a8397b1dcdafull);
    BOOST_TEST(fnv1a(std::string_view{}) == 0xcbf29ce484222325ull);
    BOOST_TEST(fnv1a(std::string_view{"a"}) == 0xaf63dc4c8601ec8cull);
    const std::byte a[1] = {std::byte{'a'}};
    BOOST_TEST(fnv1a(std::span<const std::byte>(a)) == 0xaf63dc4c8601ec8cull);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(cache_keys)

BOOST_AUTO_TEST_CASE(round_trip_under_every_policy) {
    FakeBackend b("fake", {{"a"}});
    for (const char* f : {"benchmark=1", "benchmark=0,deterministic=1", "policy=pytorch,allow_tf32=0",
                          "policy=adaptive,benchmark=1", "policy=pytorch-v7"}) {
        FlagValues v = parse_flags(f);
        for (bool limited : {false, true}) {
            if (limited) v.workspace_limit = 4096;
            const CacheKey k = CacheKey::of(b, kP, v);
            BOOST_TEST(k.to_string() == cache_key(b, kP, v));
            BOOST_TEST((CacheKey::parse(k.to_string()) == k), k.to_string());
        }
    }
    const CacheKey k = CacheKey::of(b, kP, parse_flags("benchmark=1"));
    BOOST_TEST(k.to_string() == "fake|" + kP.to_string() + "|det=0|tf32=1|bench=1|policy=convtune");
    BOOST_TEST((k.benchmark == std::optional<bool>(true)));
    BOOST_TEST(!CacheKey::of(b, kP, parse_flags("policy=pytorch")).benchmark.has_value());
}

BOOST_AUTO_TEST_CASE(malformed_keys_are_parse_errors) {
    const std::string p = kP.to_string();
    for (const std::string& bad : std::vector<std::string>{
             "fake", "fake|" + p, "|" + p + "|det=0|tf32=1|policy=convtune", "fake|n=0|det=0|tf32=1|policy=convtune",
             "fake|" + p + "|det=2|tf32=1|policy=convtune", "fake|" + p + "|tf32=1|det=0|policy=convtune",
             "fake|" + p + "|det=0|tf32=1|ws=x|policy=convtune", "fake|" + p + "|det=0|tf32=1|policy=fastest",
             "fake|" + p + "|det=0|tf32=1|bench=1", "fake|" + p + "|det=0|tf32=1|policy=convtune|bench=1"})
        BOOST_CHECK_THROW(CacheKey::parse(bad), ParseError);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(device_tensors)

BOOST_AUTO_TEST_CASE(filled_as_host_tensors_from_the_seed) {
    FakeBackend b("fake", {{"a"}});
    for (uint64_t seed : {uint64_t{1}, uint64_t{9}}) {
        const DeviceTensors t(b, kP, seed);
        BOOST_REQUIRE(t.ok());
        const HostTensors h = make_host_tensors(kP, seed);
        BOOST_TEST(t.views().x.bytes == h.x.size());
        BOOST_TEST(std::memcmp(t.views().x.data, h.x.data(), h.x.size()) == 0);
        BOOST_TEST(std::memcmp(t.views().w.data, h.w.data(), h.w.size()) == 0);
        const float* y = static_cast<const float*>(t.views().y.data);  // the fwd output: NaN
        BOOST_TEST(std::isnan(y[0]));
        BOOST_TEST(t.output().data == t.views().y.data);
    }
    const DeviceTensors d(b, kP);
    BOOST_TEST(std::memcmp(d.views().w.data, make_host_tensors(kP, DeviceTensors::default_seed).w.data(),
                           d.views().w.bytes) == 0);
}

BOOST_AUTO_TEST_CASE(uploads_given_host_buffers_and_downloads_the_output) {
    FakeBackend b("fake", {{"a"}});
    ConvProblem p = kP;
    p.direction = Direction::bwd_filter;
    HostTensors h = make_host_tensors(p, 3);
    const DeviceTensors t(b, p, h.views());
    BOOST_REQUIRE(t.ok());
    BOOST_TEST(t.output().data == t.views().w.data);
    std::memset(t.views().w.data, 0, t.views().w.bytes);
    std::vector<std::byte> out(t.output().bytes, std::byte{1});
    t.download_output(out.data());
    BOOST_TEST((out == std::vector<std::byte>(out.size(), std::byte{0})));
}

BOOST_AUTO_TEST_CASE(a_device_that_needs_no_data_gets_allocations_only) {
    NoDataBackend b("nodata", {{"a"}});
    const DeviceTensors t(b, kP);
    BOOST_REQUIRE(t.ok());
    const HostTensors h = make_host_tensors(kP);
    BOOST_TEST(t.bytes() == h.x.size() + h.w.size() + h.y.size());
    BOOST_TEST(b.uploads == 0);
}

BOOST_AUTO_TEST_CASE(allocation_failure_is_reported_not_thrown) {
    FakeBackend b("fake", {{"a"}});
    b.memory_limit = 8;
    const DeviceTensors t(b, kP);
    BOOST_TEST(!t.ok());
    BOOST_TEST(t.bytes() == 0u);
    BOOST_CHECK_THROW(t.require("here"), Error);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(flag_filter_reason_is_the_selectors_filter) {
    const Notes tc{Note::tensor_core}, nd{Note::nondeterministic}, dc{Note::down_convert_inputs};
    BOOST_TEST(flag_filter_reason(tc, kP, parse_flags("allow_tf32=0")) == "allow_tf32=0 drops TENSOR_CORE for f32");
    BOOST_TEST(flag_filter_reason(tc, kP, parse_flags("allow_tf32=1")).empty());
    BOOST_TEST(flag_filter_reason(nd, kP, parse_flags("deterministic=1")) == "deterministic=1 drops NONDETERMINISTIC");
    BOOST_TEST(flag_filter_reason(nd, kP, parse_flags("deterministic=0")).empty());
    BOOST_TEST(flag_filter_reason(dc, kP, {}) == "DOWN_CONVERT_INPUTS is always dropped");
    ConvProblem h = kP;
    h.dtype = DataType::f16;
    BOOST_TEST(flag_filter_reason(tc, h, parse_flags("allow_tf32=0")).empty());
}

BOOST_AUTO_TEST_CASE(selector_observer_sees_searches_timed_calls_and_executions) {
    struct Log final : SelectorObserver {
        int searches = 0, timed = 0, executions = 0;
        double timed_ms = 0, exec_ms = 0;
        void search_started(const ConvProblem&) override { ++searches; }
        void candidate_timed(const ConvProblem&, const Algorithm&, double ms) override { ++timed, timed_ms += ms; }
        void executed(const ConvProblem&, const Algorithm& a, const Status& s, double ms) override {
            ++executions, exec_ms += ms;
            BOOST_TEST(a.id() == "fast");
            BOOST_TEST(s.ok());
        }
    } log;
    FakeBackend b("fake", {{"slow", {3}}, {"fast", {1}}});
    TuningCache cache;
    Selector sel(b, cache);
    sel.set_observer(&log);
    const DeviceTensors t(b, kP);
    const FlagValues f = parse_flags("benchmark=1,policy=pytorch");
    BOOST_TEST(sel.run(kP, t.views(), f).ok());
    BOOST_TEST(sel.run(kP, t.views(), f).ok());  // from the cache: no second search
    BOOST_TEST(log.searches == 1);
    BOOST_TEST(log.timed == 4);  // pytorch: a warm-up and one sample of each candidate
    BOOST_TEST(log.timed_ms == 8.0);
    BOOST_TEST(log.executions == 2);
    BOOST_TEST(log.exec_ms == 2.0);
}

BOOST_AUTO_TEST_CASE(the_nvidia_driver_release_is_read_from_both_kernel_module_lines) {
    // The proprietary module's line and the open one's ("for x86_64" before the release: read as
    // "for" before, so every open-module driver looked the same in the environment and the keys).
    BOOST_TEST(nvidia_driver_release("NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15  Thu Jan 16 2025") ==
               "570.86.15");
    BOOST_TEST(
        nvidia_driver_release(
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
            "(dvs-builder@U16-I3-B03-4-3)") ==
        "580.159.04");
    BOOST_TEST(nvidia_driver_release("NVRM version: something else").empty());
    BOOST_TEST(nvidia_driver_release("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  Release Build").empty());
}
