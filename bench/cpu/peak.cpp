// FMA peak loop: kChains independent accumulators, each updated by acc = acc * b + c in every
// iteration. b < 1 and c > 0 keep the values near 1 (no overflow, no subnormals), and the
// result is consumed, so the compiler can neither drop nor reassociate the chains (no
// -ffast-math). 12 chains cover the FMA latency x throughput of current x86 cores (Zen 3: 4
// cycles x 2 pipes = 8; Intel AVX-512: 4 x 2 = 8).
#include "peak.hpp"

#include <omp.h>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace convtune::bench {

namespace {

constexpr int kChains = 12;

#if defined(__AVX512F__)
using Vec = __m512;
constexpr int kLanes = 16;
constexpr const char* kIsa = "AVX-512 FMA";
inline Vec vset(float v) { return _mm512_set1_ps(v); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
inline float vsum(Vec a) { return _mm512_reduce_add_ps(a); }
#elif defined(__AVX2__) && defined(__FMA__)
using Vec = __m256;
constexpr int kLanes = 8;
constexpr const char* kIsa = "AVX2 FMA";
inline Vec vset(float v) { return _mm256_set1_ps(v); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline float vsum(Vec a) {
    alignas(32) float t[8];
    _mm256_store_ps(t, a);
    float s = 0;
    for (float v : t) s += v;
    return s;
}
#else
typedef float Vec __attribute__((vector_size(16)));
constexpr int kLanes = 4;
constexpr const char* kIsa = "128-bit vectors (no FMA instructions enabled at compile time)";
inline Vec vset(float v) { return Vec{v, v, v, v}; }
inline Vec vfma(Vec a, Vec b, Vec c) { return a * b + c; }
inline float vsum(Vec a) { return a[0] + a[1] + a[2] + a[3]; }
#endif

// Runs `iters` iterations of kChains FMAs; returns a value that depends on every chain.
__attribute__((noinline)) float fma_loop(int64_t iters, float seed) {
    Vec acc[kChains];
    for (int i = 0; i < kChains; ++i) acc[i] = vset(seed + 0.01f * static_cast<float>(i));
    const Vec b = vset(0.999999f), c = vset(1e-6f);
    for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
        for (int i = 0; i < kChains; ++i) acc[i] = vfma(acc[i], b, c);
    }
    Vec s = acc[0];
    for (int i = 1; i < kChains; ++i) s = s + acc[i];
    return vsum(s);
}

volatile float g_sink = 0;

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Wall seconds for `threads` threads each running `iters` iterations.
double time_team(int threads, int64_t iters) {
    float sink = 0;
    const double t0 = now_s();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    sink += fma_loop(iters, 0.5f + 0.001f * static_cast<float>(omp_get_thread_num()));
    const double t = now_s() - t0;
    g_sink = g_sink + sink;
    return t;
}

}  // namespace

std::string peak_isa() {
    return std::string(kIsa) + ", " + std::to_string(kLanes) + " floats per vector, " + std::to_string(kChains) +
           " chains";
}

long long peak_iterations(int threads, double seconds) {
    // Grow a trial run to at least 10 ms, then size from the fastest of several trials: a trial
    // that lost its core to another process must not make every later sample short.
    int64_t iters = 1 << 16;
    double t = time_team(threads, iters);
    while (t < 0.01) {
        iters *= 4;
        t = time_team(threads, iters);
    }
    for (int i = 0; i < 4; ++i) t = std::min(t, time_team(threads, iters));
    return std::max<int64_t>(1 << 16, static_cast<int64_t>(static_cast<double>(iters) * seconds / t));
}

double peak_gflops(int threads, long long iterations) {
    const double t = time_team(threads, iterations);
    return static_cast<double>(iterations) * kChains * kLanes * 2.0 * threads / t * 1e-9;
}

}  // namespace convtune::bench
