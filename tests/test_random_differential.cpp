// Seeded random differential test: every algorithm of every available host backend (cpu and
// each oneDNN implementation, onednn.auto included) against the f64 oracle, within its
// documented error bound, on random awkward problems: odd sizes, stride > 1, dilation, groups
// (depthwise included), asymmetric and negative end padding, padding beyond the kernel, 1-D, 2-D
// and 3-D, nchw/nhwc, f32 and bf16, all three directions. An algorithm either refuses a problem
// (supports() with a reason) or computes it within its bound.
//
// Fixed budget by default (CONVTUNE_RANDOM_CASES, default kDefaultCases); the seed
// (CONVTUNE_RANDOM_SEED, default kDefaultSeed) is printed with every failure together with the
// `convtune run` command that reproduces it. A bigger sweep (docs/reliability.md):
//   CONVTUNE_RANDOM_SEED=7 CONVTUNE_RANDOM_CASES=20000 MALLOC_PERTURB_=165 build/cpu/tests/test_random_differential
// CONVTUNE_RANDOM_FIRST starts at a later case index (to resume a sweep after a crash: a fatal
// signal prints the case and algorithm it happened in before the process dies).
//
// It also runs the exact reproductions of issue 35 as fixed cases.
#define BOOST_TEST_MODULE random_differential
#include <boost/test/unit_test.hpp>

#include <fmt/core.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "convtune/hash.hpp"
#include "convtune/registry.hpp"
#include "support/check.hpp"
#include "support/cpu_level.hpp"
#include "support/sweep.hpp"

using namespace convtune;

using convtune::test::RequireCpuLevel;
BOOST_TEST_GLOBAL_FIXTURE(RequireCpuLevel);

namespace {

constexpr uint64_t kDefaultSeed = 35;
constexpr uint64_t kDefaultCases = 1500;  // about 20-30 s in Release on 2 cores

uint64_t env_u64(const char* name, uint64_t fallback) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return fallback;
    char* end = nullptr;
    const unsigned long long x = std::strtoull(v, &end, 10);
    if (end == v || *end != '\0')
        throw std::runtime_error(fmt::format("{}={}: expected a non-negative integer", name, v));
    return x;
}

// What is running now, written by the fatal-signal handler (async-signal-safe: write(2) only).
char g_context[2048] = "";

extern "C" void on_fatal_signal(int sig) {
    const char head[] = "\n*** fatal signal while running: ";
    [[maybe_unused]] auto a = ::write(STDERR_FILENO, head, sizeof head - 1);
    [[maybe_unused]] auto b = ::write(STDERR_FILENO, g_context, std::strlen(g_context));
    [[maybe_unused]] auto c = ::write(STDERR_FILENO, "\n", 1);
    std::signal(sig, SIG_DFL);
    std::raise(sig);
}

struct FatalSignalReport {
    FatalSignalReport() {
        for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(s, on_fatal_signal);
    }
};

// A small deterministic generator: case i of seed s is the same on every machine and build.
struct Rng {
    uint64_t state;
    uint64_t next() { return state = splitmix64(state); }
    int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
    int64_t in(int64_t lo, int64_t hi) { return lo + below(hi - lo + 1); }  // [lo, hi]
    bool chance(int num, int den) { return below(den) < num; }
    template <class T, std::size_t N>
    T pick(const T (&xs)[N]) { return xs[below(N)]; }
};

// Random problem number `index` of `seed`, small enough that the f64 oracle and the naive
// references take milliseconds. Half are awkward throughout (any kernel, dilation, padding
// beyond the kernel, negative end padding); half are near-ordinary layers (square 1x1 / 3x3 /
// 5x5 / 7x7 kernels, "same" padding, stride 1 or 2, channels often whole SIMD blocks), with one
// awkward detail at most, so that the specialised kernels (1x1, depthwise, Winograd, AMX/bf16
// blocked ones) are offered and checked too.
ConvProblem random_problem(uint64_t seed, uint64_t index) {
    Rng r{splitmix64(seed) ^ splitmix64(index + 0x35)};
    static constexpr int64_t kChannels[] = {1, 2, 3, 4, 5, 7, 8, 9, 13, 15, 16, 17, 24, 31, 32, 33, 48, 64};
    static constexpr int64_t kBlocked[] = {8, 16, 16, 32, 32, 48, 64, 64, 96, 128};
    for (;;) {
        ConvProblem p;
        const bool ordinary = r.chance(1, 2);
        const int64_t dims = r.below(4);
        p.spatial_dims = dims == 0 ? 1 : dims == 3 ? 3 : 2;
        p.direction = static_cast<Direction>(r.below(3));
        p.dtype = r.chance(1, 2) ? DataType::f32 : DataType::bf16;
        p.layout = r.chance(1, 2) ? Layout::nchw : Layout::nhwc;
        p.n = r.in(1, 3);
        auto channels = [&] { return ordinary && r.chance(3, 4) ? r.pick(kBlocked) : r.pick(kChannels); };
        const int64_t g = r.below(10);
        if (g < 6) {  // dense
            p.groups = 1;
            p.c = channels();
            p.k = channels();
        } else if (g < 8) {  // depthwise, channel multiplier 1 or 2
            p.groups = channels();
            p.c = p.groups;
            p.k = p.groups * r.in(1, 2);
        } else {  // grouped
            p.groups = r.in(2, 4);
            p.c = p.groups * channels();
            p.k = p.groups * channels();
        }
        static constexpr int64_t kOrdinaryKernels[] = {1, 1, 3, 3, 3, 5, 7};
        const int64_t square = r.pick(kOrdinaryKernels);
        const int64_t ordinary_stride = r.chance(1, 3) ? 2 : 1;
        const int64_t ordinary_size = r.in(1, p.spatial_dims == 3 ? 9 : p.spatial_dims == 2 ? 20 : 60);
        const int odd_dim =
            ordinary && r.chance(1, 2) ? static_cast<int>(r.below(p.spatial_dims)) : -1;  // the one awkward dim
        const int64_t max_kernel = p.spatial_dims == 1 ? 7 : p.spatial_dims == 2 ? 5 : 3;
        for (int i = 0; i < p.spatial_dims; ++i) {
            const auto u = static_cast<std::size_t>(i);
            if (ordinary && i != odd_dim) {
                p.kernel[u] = p.spatial_dims == 3 ? std::min<int64_t>(square, 3) : square;
                p.stride[u] = ordinary_stride;
                p.pad_begin[u] = p.pad_end[u] = (p.kernel[u] - 1) / 2;
                p.in[u] = ordinary_size;
                continue;
            }
            p.kernel[u] = r.chance(1, 8) && p.spatial_dims < 3 ? 7 : r.in(1, max_kernel);
            p.dilation[u] = r.chance(1, 4) ? r.in(2, 3) : 1;
            p.stride[u] = r.chance(1, 3) ? r.in(2, 3) : 1;
            const int64_t eff = p.effective_kernel(i);
            const int64_t pad_choice = r.below(4);
            p.pad_begin[u] = pad_choice == 0 ? 0 : pad_choice == 1 ? (eff - 1) / 2 : r.in(0, eff);
            p.in[u] = r.in(1, eff + (p.spatial_dims == 3 ? 4 : 9));
            p.pad_end[u] = r.chance(1, 2) ? p.pad_begin[u] : r.in(-std::min<int64_t>(p.in[u] - 1, 3), eff);
        }
        if (p.check()) continue;
        if (p.macs() > 2'000'000 || p.x_elements() > 200'000 || p.y_elements() > 200'000 || p.w_elements() > 200'000)
            continue;
        return p;
    }
}

struct Tally {
    int problems = 0, runs = 0, refused = 0;
    std::vector<std::string> failures;
    std::map<std::string, int> per_algorithm;
};

// Every host algorithm on p: refused (with a reason) or within its bound.
void check_problem(const ConvProblem& p, uint64_t data_seed, const std::string& where, Tally& t) {
    const HostTensors in = make_host_tensors(p, data_seed);
    std::optional<OracleResult> ref;
    ++t.problems;
    for (const Algorithm* a : test::host_algorithms()) {
        std::snprintf(g_context, sizeof g_context, "%s: %s on %s (data seed %llu)", where.c_str(),
                      std::string(a->id()).c_str(), p.to_string().c_str(), static_cast<unsigned long long>(data_seed));
        const Support s = a->supports(p);
        if (!s) {
            ++t.refused;
            BOOST_TEST(!s.reason.empty(), a->id() << " refuses " << p.to_string() << " without a reason");
            continue;
        }
        if (!ref) ref = oracle(in);
        const auto out = test::check_against(*a, in, *ref);
        ++t.runs;
        ++t.per_algorithm[std::string(a->id())];
        if (!out.passed) {
            const char* perturb = std::getenv("MALLOC_PERTURB_");
            const std::string env =
                perturb != nullptr && *perturb != '\0' ? fmt::format("MALLOC_PERTURB_={} ", perturb) : "";
            const std::string msg =
                fmt::format("{}: {}\n  reproduce: {}convtune run -b {} -a {} -p '{}' --seed {} --check", where,
                            out.message, env, a->backend().name(), a->id(), p.to_string(), data_seed);
            t.failures.push_back(msg);
            BOOST_ERROR(msg);
        }
    }
    g_context[0] = '\0';
}

const FatalSignalReport g_fatal_signal_report;

}  // namespace

// The problems of issue 35 (an independent check against PyTorch float64 on a machine with
// AVX-512 and AMX), exactly as reported, where the report gave them; and shapes of the
// reported kinds where it described them.
BOOST_AUTO_TEST_CASE(issue_35_reproductions) {
    static constexpr const char* kCases[] = {
        // brgconv:avx512_core_amx_bf16 forward: SIGSEGV (stride 2, the last output row wholly in the end padding).
        "dir=fwd,dtype=bf16,layout=nhwc,n=1,c=8,k=4,in=3x4,ker=1x3,stride=2x1,pad=0x0,pad_end=2x0",
        // jit:avx512_core_amx_bf16 / jit_bf16:avx512_core_bf16 backward weights: garbage where a kernel tap reads only
        // padding,
        "dir=bwd_filter,dtype=bf16,layout=nhwc,n=2,c=16,k=4,in=3x2,ker=3x7,stride=2x3,pad=0x3,pad_end=0x3",
        // a 1x1 kernel with dilation > 1 and C = 33,
        "dir=bwd_filter,dtype=bf16,layout=nhwc,n=2,c=33,k=16,in=5x7,ker=1x1,dil=2x2",
        "dir=bwd_filter,dtype=bf16,layout=ncw,n=1,c=33,k=8,in=9,ker=1,dil=3",
        // 3-D, stride 2, input depth 3.
        "dir=bwd_filter,dtype=bf16,layout=ndhwc,n=2,c=16,k=16,in=3x5x5,ker=3x3x3,stride=2x2x2,pad=1x1x1",
        "dir=bwd_filter,dtype=bf16,layout=ncdhw,n=1,c=16,k=16,in=3x6x6,ker=2x3x3,stride=2x2x2,pad=0x1x1",
        // jit_bf16_1x1:avx512_core_bf16 forward: wrong values (odd C on channels-last data).
        "dir=fwd,dtype=bf16,layout=nwc,n=1,c=3,k=32,in=118,ker=1",
        // jit_1x1:avx512_core_amx_bf16 forward: SIGABRT on 1-D and 3-D problems (an AMX machine, seed 43).
        "dir=fwd,dtype=bf16,layout=nwc,n=3,c=128,k=16,in=45,ker=1",
        "dir=fwd,dtype=bf16,layout=ncw,n=1,c=128,k=64,in=39,ker=1",
        "dir=fwd,dtype=bf16,layout=ndhwc,n=1,c=48,k=64,in=3x3x3,ker=1x1x1",
        "dir=fwd,dtype=bf16,layout=ndhwc,n=3,c=64,k=32,in=3x3x3,ker=1x1x1",
        // jit:avx2 backward weights, f32: garbage / SIGSEGV with negative end padding.
        "dir=bwd_filter,dtype=f32,n=1,c=48,k=48,in=8x4,ker=7x7,stride=2x2,pad=3x3,pad_end=-1x3",
        // brgconv:avx512_core forward, f32: wrong values, the brgemm kernel reading past the end of the
        // width (with 2 threads; with 1 thread; the 2-D form; bf16's brgconv:avx512_core_bf16 likewise).
        "dir=fwd,dtype=f32,layout=ncw,n=1,c=96,k=192,g=3,in=19,ker=11,pad=5",
        "dir=fwd,dtype=f32,layout=nwc,n=1,c=32,k=64,in=7,ker=9,pad=4",
        "dir=fwd,dtype=f32,layout=nhwc,n=1,c=96,k=192,g=3,in=1x19,ker=1x11,pad=0x5",
        "dir=fwd,dtype=bf16,layout=nwc,n=1,c=32,k=64,in=7,ker=9,pad=4",
        // cpu.winograd_f2x3 / f4x3: depthwise, outputs that are a single product.
        "dir=bwd_data,dtype=f32,layout=nhwc,n=3,c=96,k=96,g=96,in=4x6,ker=3x3,pad=0x0",
    };
    Tally t;
    for (const char* spec : kCases)
        for (uint64_t seed : {1, 21})
            check_problem(ConvProblem::parse(spec), seed, fmt::format("issue 35 case '{}'", spec), t);
    BOOST_TEST_MESSAGE(
        fmt::format("issue 35 cases: {} runs, {} refusals, {} failures", t.runs, t.refused, t.failures.size()));
}

BOOST_AUTO_TEST_CASE(random_problems) {
    const uint64_t seed = env_u64("CONVTUNE_RANDOM_SEED", kDefaultSeed);
    const uint64_t cases = env_u64("CONVTUNE_RANDOM_CASES", kDefaultCases);
    const uint64_t first = env_u64("CONVTUNE_RANDOM_FIRST", 0);
    const auto t0 = std::chrono::steady_clock::now();
    Tally t;
    for (uint64_t i = first; i < first + cases; ++i) {
        const ConvProblem p = random_problem(seed, i);
        const uint64_t data_seed = splitmix64(seed * 1000003 + i) % 1000000;
        check_problem(p, data_seed, fmt::format("CONVTUNE_RANDOM_SEED={} case {}", seed, i), t);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    BOOST_TEST_MESSAGE(
        fmt::format("random problems: seed {}, cases {}..{}, {} algorithm runs, {} refusals, {} failures, {:.1f} s",
                    seed, first, first + cases - 1, t.runs, t.refused, t.failures.size(), s));
    for (const auto& [id, n] : t.per_algorithm) BOOST_TEST_MESSAGE(fmt::format("  {}: {} runs", id, n));
    if (!t.failures.empty())
        BOOST_TEST_MESSAGE(fmt::format(
            "rerun this sweep with CONVTUNE_RANDOM_SEED={} CONVTUNE_RANDOM_CASES={} CONVTUNE_RANDOM_FIRST={}", seed,
            cases, first));
}
