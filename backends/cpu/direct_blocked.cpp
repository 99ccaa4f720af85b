// cpu.direct_blocked — vectorised, register-blocked direct convolution on channels-last f32 data
// (the structure of oneDNN's jit/brgemm direct convolutions, written with compiler intrinsics).
//
// Computes all three directions of every valid problem with f32/f16/bf16 storage: 1-D/2-D/3-D,
// any stride, dilation, padding (asymmetric, negative end padding), groups, both layouts.
//
// Method. The unit of work is a micro-kernel that keeps a B x NV block of accumulator vectors in
// registers (NV vectors of VL = 16 (AVX-512) or 8 (AVX2) channels, B positions) and runs a
// reduction in which each step loads NV vectors and broadcasts B scalars (B*NV FMAs per B+NV
// loads):
//   fwd        acc[ow j][k vec] += x[ow j, tap][c] * W[tap][c][k vec]       reduce over (tap, c)
//   bwd_data   acc[iw j][c vec] += dy[iw j, tap][k] * W[tap][k][c vec]      reduce over (tap, k)
//   bwd_filter acc[c j][k vec]  += x[pos, tap][c j] * dy[pos][k vec]        reduce over positions
// Weights are repacked per (group, channel block) into [tap][reduction channel][NV*VL] (zero
// lanes past the group's end), so a K (or C) block never straddles groups.
// fwd / bwd_data read a zero-padded f32 channels-last copy of x (or dy), padded so that every tap
// of every written position is in range: any B positions form a block (across rows and images),
// with no border cases; the zero taps are the ones macs() counts anyway. bwd_data with stride s
// is split into the s phases of the input position (i + pad) mod s; within a phase it is a
// stride-1 correlation over a fixed tap subset, so no zero-upsampled dy and no FMA on a zero.
// bwd_filter items (group, K block, C block, tap) reduce over the positions chunk by chunk,
// keeping partial sums in the workspace (same order as one sequential sum). Depthwise fwd /
// bwd_data (C/g = K/g = 1) vectorise over channels instead; depthwise bwd_filter and groups with
// few channels use the general kernels with partly empty vectors (correct, not fast).
//
// Data: any input other than f32 channels-last (channels-first, f16, bf16) is converted to f32
// channels-last in the workspace inside the run (Note::layout_conversion); outputs are converted
// while they are stored.
// Workspace (bytes, each part rounded up to 64), VL = 16 with AVX-512, 8 otherwise:
//  fwd / bwd_data: 4 * KS * R * ceil_to(O, VL) * groups   packed weights; fwd: R = C/g, O = K/g;
//                                                          bwd_data: R = K/g, O = C/g
//                                                          (depthwise: 4 * KS * ceil_to(C, VL))
//                + 4 * N * Lp0 * Lp1 * Lp2 * Cr           padded copy of the read tensor (Lp: padded
//                                                          extents, Cr: its channels, ceil_to(C, VL)
//                                                          for depthwise); none when it is f32
//                                                          channels-last and needs no padding
//  bwd_filter:     4 * N * in_spatial * C + 4 * N * out_spatial * K   channels-last f32 copies of x
//                                                          and dy, when they are not f32 channels-last
//                + 4 * items * B * NV * VL                partial sums, items = groups * K blocks *
//                                                          C blocks * taps
//
// Numerics: every output is one f32 sum in a fixed order (FMA), products exact for f16/bf16
// inputs: |out - exact| <= gamma_L * sum|a*b| before the final rounding to the storage type,
// gamma_L = L u / (1 - L u), u = 2^-24, L = reduction_length(); with that rounding the bound is
// gamma_L (1 + u_out) + u_out. Deterministic: each output is owned by one thread and reduced in a
// fixed order regardless of the thread count.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "convtune/numeric.hpp"
#include "convtune/tensor.hpp"
#include "cpu/level.hpp"
#include "cpu/elem.hpp"

namespace convtune::cpu::CONVTUNE_ISA_NS {

namespace {

using cpu::dispatch_dtype;

// ---- Vector abstraction -------------------------------------------------------------------
#if defined(__AVX512F__)
constexpr int VL = 16;
using V = __m512;
inline V vzero() { return _mm512_setzero_ps(); }
inline V vload(const float* p) { return _mm512_loadu_ps(p); }
inline void vstore(float* p, V v) { _mm512_storeu_ps(p, v); }
inline V vbcast(const float* p) { return _mm512_set1_ps(*p); }
inline V vfma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
// Register budget (32 zmm): NV * B accumulators + NV weights + 1 broadcast.
constexpr int kMaxB[5] = {0, 8, 12, 8, 6};
constexpr int kPreferNV = 4;
#elif defined(__AVX2__) && defined(__FMA__)
constexpr int VL = 8;
using V = __m256;
inline V vzero() { return _mm256_setzero_ps(); }
inline V vload(const float* p) { return _mm256_loadu_ps(p); }
inline void vstore(float* p, V v) { _mm256_storeu_ps(p, v); }
inline V vbcast(const float* p) { return _mm256_broadcast_ss(p); }
inline V vfma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
// Register budget (16 ymm): with NV = 2, B = 6 the 12 accumulators, 2 weight vectors and the
// broadcast stay in registers (2 + 6 loads per 12 FMAs); wider NV makes GCC re-load weights.
constexpr int kMaxB[5] = {0, 8, 6, 4, 3};
constexpr int kPreferNV = 2;
#else
constexpr int VL = 4;
using V = __m128;
inline V vzero() { return _mm_setzero_ps(); }
inline V vload(const float* p) { return _mm_loadu_ps(p); }
inline void vstore(float* p, V v) { _mm_storeu_ps(p, v); }
inline V vbcast(const float* p) { return _mm_set1_ps(*p); }
inline V vfma(V a, V b, V c) { return _mm_add_ps(_mm_mul_ps(a, b), c); }
constexpr int kMaxB[5] = {0, 6, 6, 3, 2};
constexpr int kPreferNV = 2;
#endif
constexpr int kMaxNV = 4;
constexpr int kMaxBAll = 12;

// ---- Micro-kernels ----------------------------------------------------------------------------
// One reduction segment: `count` steps; step i loads NV vectors at v + i*vstep and broadcasts
// B scalars at b + i*bstep + j*bj.
struct Seg {
    const float* v;
    const float* b;
    int64_t count;
};

// fwd / bwd_data: step i of a segment is input channel i: NV weight vectors at v + i*NV*VL and
// B broadcasts at b + off[j] + i (off: the B positions' offsets into the read tensor). The
// accumulators are stored to out[j] (B pointers, NV*VL floats each).
template <int NV, int B>
void kernel_chan(const Seg* segs, int nseg, const int64_t* off, float* const* out) {
    int64_t o[B];
#pragma GCC unroll 16
    for (int j = 0; j < B; ++j) o[j] = off[j];
    V acc[B][NV];
#pragma GCC unroll 16
    for (int j = 0; j < B; ++j)
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) acc[j][v] = vzero();
    for (int s = 0; s < nseg; ++s) {
        const float* __restrict wp = segs[s].v;
        const float* __restrict xp = segs[s].b;
        const int64_t n = segs[s].count;
        for (int64_t i = 0; i < n; ++i) {
            V w[NV];
#pragma GCC unroll 16
            for (int v = 0; v < NV; ++v) w[v] = vload(wp + i * (NV * VL) + v * VL);
#pragma GCC unroll 16
            for (int j = 0; j < B; ++j) {
                const V b = vbcast(xp + o[j] + i);
#pragma GCC unroll 16
                for (int v = 0; v < NV; ++v) acc[j][v] = vfma(b, w[v], acc[j][v]);
            }
        }
    }
#pragma GCC unroll 16
    for (int j = 0; j < B; ++j)
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) vstore(out[j] + v * VL, acc[j][v]);
}

// bwd_filter: step i of a segment is one position: NV dy vectors at v + i*vstep and B
// broadcasts of consecutive input channels at b + i*bstep + j. Accumulates into acc (B rows of
// NV*VL floats, read first unless `zero`), so a long reduction can be split into chunks of
// positions without changing its order.
template <int NV, int B>
void kernel_pos(const Seg* segs, int nseg, int64_t vstep, int64_t bstep, float* out, bool zero) {
    constexpr int64_t out_j = NV * VL;
    V acc[B][NV];
#pragma GCC unroll 16
    for (int j = 0; j < B; ++j)
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) acc[j][v] = zero ? vzero() : vload(out + j * out_j + v * VL);
    for (int s = 0; s < nseg; ++s) {
        const float* __restrict dp = segs[s].v;
        const float* __restrict xp = segs[s].b;
        const int64_t n = segs[s].count;
        for (int64_t i = 0; i < n; ++i) {
            V d[NV];
#pragma GCC unroll 16
            for (int v = 0; v < NV; ++v) d[v] = vload(dp + i * vstep + v * VL);
#pragma GCC unroll 16
            for (int j = 0; j < B; ++j) {
                const V b = vbcast(xp + i * bstep + j);
#pragma GCC unroll 16
                for (int v = 0; v < NV; ++v) acc[j][v] = vfma(b, d[v], acc[j][v]);
            }
        }
    }
#pragma GCC unroll 16
    for (int j = 0; j < B; ++j)
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) vstore(out + j * out_j + v * VL, acc[j][v]);
}

// Depthwise fwd / bwd_data: NV vectors of channels, B positions; per tap the weights are NV
// vectors at w[t] and the inputs NV vectors at x[t] + off[j] (no broadcast: channel c of the
// output only reads channel c).
template <int NV, int B>
void kernel_dw(const float* const* x, const float* const* w, int ntaps, const int64_t* off, float* const* out) {
    int64_t o[B];
#pragma GCC unroll 16
    for (int j = 0; j < B; ++j) o[j] = off[j];
    V acc[B][NV];
#pragma GCC unroll 16
    for (int j = 0; j < B; ++j)
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) acc[j][v] = vzero();
    for (int t = 0; t < ntaps; ++t) {
        const float* __restrict xp = x[t];
        V wv[NV];
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) wv[v] = vload(w[t] + v * VL);
#pragma GCC unroll 16
        for (int j = 0; j < B; ++j)
#pragma GCC unroll 16
            for (int v = 0; v < NV; ++v) acc[j][v] = vfma(vload(xp + o[j] + v * VL), wv[v], acc[j][v]);
    }
#pragma GCC unroll 16
    for (int j = 0; j < B; ++j)
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) vstore(out[j] + v * VL, acc[j][v]);
}
using DwFn = void (*)(const float* const*, const float* const*, int, const int64_t*, float* const*);
// Depthwise blocks: kDwNV vectors of channels, up to kDwB positions (accumulators + weights + one load).
constexpr int kDwNV = 2;
constexpr int kDwB = VL == 16 ? 8 : 6;
template <int... Bs>
constexpr std::array<DwFn, kDwB + 1> dw_row1(std::integer_sequence<int, Bs...>) {
    return {nullptr, &kernel_dw<1, Bs + 1>...};
}
template <int... Bs>
constexpr std::array<DwFn, kDwB + 1> dw_row2(std::integer_sequence<int, Bs...>) {
    return {nullptr, &kernel_dw<2, Bs + 1>...};
}
const std::array<std::array<DwFn, kDwB + 1>, 3> kDw = {std::array<DwFn, kDwB + 1>{},
                                                       dw_row1(std::make_integer_sequence<int, kDwB>{}),
                                                       dw_row2(std::make_integer_sequence<int, kDwB>{})};

using ChanFn = void (*)(const Seg*, int, const int64_t*, float* const*);
using PosFn = void (*)(const Seg*, int, int64_t, int64_t, float*, bool);

// Dispatch tables [NV][B] (null where B exceeds the register budget of NV).
template <int NV, int... Bs>
constexpr std::array<ChanFn, kMaxBAll + 1> chan_row(std::integer_sequence<int, Bs...>) {
    return {nullptr, (Bs + 1 <= kMaxB[NV] ? &kernel_chan<NV, (Bs + 1 <= kMaxB[NV] ? Bs + 1 : 1)> : nullptr)...};
}
template <int NV, int... Bs>
constexpr std::array<PosFn, kMaxBAll + 1> pos_row(std::integer_sequence<int, Bs...>) {
    return {nullptr, (Bs + 1 <= kMaxB[NV] ? &kernel_pos<NV, (Bs + 1 <= kMaxB[NV] ? Bs + 1 : 1)> : nullptr)...};
}
using Seq = std::make_integer_sequence<int, kMaxBAll>;
const std::array<std::array<ChanFn, kMaxBAll + 1>, 5> kChan = {
    std::array<ChanFn, kMaxBAll + 1>{}, chan_row<1>(Seq{}), chan_row<2>(Seq{}), chan_row<3>(Seq{}), chan_row<4>(Seq{})};
const std::array<std::array<PosFn, kMaxBAll + 1>, 5> kPos = {std::array<PosFn, kMaxBAll + 1>{}, pos_row<1>(Seq{}),
                                                             pos_row<2>(Seq{}), pos_row<3>(Seq{}), pos_row<4>(Seq{})};

// ---- Geometry ---------------------------------------------------------------------------------
// Spatial dims in canonical order D, H, W (W innermost); missing dims are size 1.
struct Canon {
    std::array<int64_t, 3> in{1, 1, 1}, out{1, 1, 1}, ker{1, 1, 1}, st{1, 1, 1}, dil{1, 1, 1}, pb{0, 0, 0};
    std::array<int, 3> slot{-1, -1, -1};  // problem slot of each canonical dim (-1: absent)
    int64_t in_sp() const { return in[0] * in[1] * in[2]; }
    int64_t out_sp() const { return out[0] * out[1] * out[2]; }
    int64_t ks() const { return ker[0] * ker[1] * ker[2]; }
};

Canon canon(const ConvProblem& p) {
    Canon c;
    for (int ci = 0; ci < 3; ++ci) {
        const int slot = p.spatial_dims - 3 + ci;
        if (slot < 0) continue;
        const auto u = static_cast<std::size_t>(slot);
        const auto v = static_cast<std::size_t>(ci);
        c.slot[v] = slot;
        c.in[v] = p.in[u];
        c.out[v] = p.out(slot);
        c.ker[v] = p.kernel[u];
        c.st[v] = p.stride[u];
        c.dil[v] = p.dilation[u];
        c.pb[v] = p.pad_begin[u];
    }
    return c;
}

// Problem slot coordinates from canonical (d, h, w).
inline std::array<int64_t, 3> slots(const Canon& c, int64_t d, int64_t h, int64_t w) {
    std::array<int64_t, 3> s{0, 0, 0};
    const int64_t v[3] = {d, h, w};
    for (int ci = 0; ci < 3; ++ci)
        if (c.slot[static_cast<std::size_t>(ci)] >= 0)
            s[static_cast<std::size_t>(c.slot[static_cast<std::size_t>(ci)])] = v[ci];
    return s;
}

// Channel blocking of `n` lanes (per group) into blocks of at most kMaxNV vectors.
struct Blocking {
    int64_t nvec = 1;    // vectors per group (ceil(n / VL))
    int64_t blocks = 1;  // blocks per group
    int nv = 1;          // vectors in a full block
    int64_t nv_of(int64_t b) const { return std::min<int64_t>(nv, nvec - b * nv); }
};
Blocking blocking(int64_t n) {
    Blocking b;
    b.nvec = (n + VL - 1) / VL;
    b.blocks = (b.nvec + kPreferNV - 1) / kPreferNV;
    b.nv = static_cast<int>((b.nvec + b.blocks - 1) / b.blocks);
    return b;
}

bool is_f32_cl(const ConvProblem& p) { return p.dtype == DataType::f32 && p.layout == Layout::nhwc; }

// ---- fwd / bwd_data plan ----------------------------------------------------------------
// Both directions are written as: for every written position, a sum over taps of the read
// tensor at (read0 + q * in_step) times packed weights, where the read tensor is a zero-padded
// f32 channels-last copy, so that every tap of every position is in range and any B positions
// form a block (no border special cases; the zero taps are the ones macs() counts anyway).
//   fwd:      written y at o = q, read x at q*s + r*d - pb                  (one phase)
//   bwd_data: written dx at i = phi + q*s, read dy at q + (phi + pb - r*d)/s for the taps r with
//             r*d = phi + pb (mod s)                                          (s phases)
struct DimPhase {
    int64_t first = 0, count = 0;                   // written coordinate first + q*out_step, q < count
    std::vector<std::pair<int64_t, int64_t>> taps;  // (kernel index, read index at q = 0)
};
struct DimPlan {
    int64_t out_step = 1, in_step = 1;
    std::vector<DimPhase> phases;
    int64_t P = 0, Lp = 1;  // begin padding and length of the padded read tensor
};
struct DataPlan {
    std::array<DimPlan, 3> dim;
    bool copy = true;                       // false: the read tensor is used in place
    std::array<int64_t, 3> rdims{}, wdims{};  // read / written tensor spatial dims
    int64_t read_ch = 1, write_ch = 1, red = 1, och = 1;
    int64_t cstride = 1;     // channel stride of the padded read tensor (read_ch, or rounded up to VL for depthwise)
    bool depthwise = false;  // C/g = K/g = 1: vectorised over channels instead
    std::size_t padded_floats(int64_t n) const {
        return static_cast<std::size_t>(n * dim[0].Lp * dim[1].Lp * dim[2].Lp * cstride);
    }
};

DataPlan data_plan(const ConvProblem& p, const Canon& c) {
    const bool fwd = p.direction == Direction::fwd;
    DataPlan dp;
    dp.rdims = fwd ? c.in : c.out;
    dp.wdims = fwd ? c.out : c.in;
    dp.read_ch = fwd ? p.c : p.k;
    dp.write_ch = fwd ? p.k : p.c;
    dp.red = fwd ? p.c_per_group() : p.k_per_group();
    dp.och = fwd ? p.k_per_group() : p.c_per_group();
    dp.depthwise = p.groups > 1 && p.c_per_group() == 1 && p.k_per_group() == 1;
    // Depthwise loads whole vectors of channels: the copy is padded to a multiple of VL channels.
    dp.cstride = dp.depthwise ? (dp.read_ch + VL - 1) / VL * VL : dp.read_ch;
    bool in_place = is_f32_cl(p) && dp.cstride == dp.read_ch;
    for (std::size_t d = 0; d < 3; ++d) {
        DimPlan& dm = dp.dim[d];
        const int64_t s = c.st[d], dl = c.dil[d], pb = c.pb[d], kn = c.ker[d];
        if (fwd) {
            dm.out_step = 1;
            dm.in_step = s;
            DimPhase ph;
            ph.count = c.out[d];
            for (int64_t r = 0; r < kn; ++r) ph.taps.push_back({r, r * dl - pb});
            dm.phases.push_back(std::move(ph));
        } else {
            dm.out_step = s;
            dm.in_step = 1;
            for (int64_t phi = 0; phi < std::min(s, c.in[d]); ++phi) {
                DimPhase ph;
                ph.first = phi;
                ph.count = (c.in[d] - phi + s - 1) / s;
                for (int64_t r = 0; r < kn; ++r) {
                    const int64_t t = phi + pb - r * dl;
                    if (((t % s) + s) % s == 0) ph.taps.push_back({r, t / s});  // exact division
                }
                dm.phases.push_back(std::move(ph));
            }
        }
        int64_t lo = 0, hi = -1;
        bool any = false;
        for (const DimPhase& ph : dm.phases)
            for (auto [r, r0] : ph.taps) {
                const int64_t last = r0 + (ph.count - 1) * dm.in_step;
                lo = any ? std::min(lo, r0) : r0;
                hi = any ? std::max(hi, last) : last;
                any = true;
            }
        dm.P = any ? std::max<int64_t>(0, -lo) : 0;
        dm.Lp = any ? dm.P + hi + 1 : 1;
        if (dm.P != 0 || dm.Lp > dp.rdims[d]) in_place = false;
    }
    if (in_place) {
        dp.copy = false;
        for (std::size_t d = 0; d < 3; ++d) dp.dim[d].Lp = dp.rdims[d];
    }
    return dp;
}


std::size_t round_up(std::size_t b) { return (b + 63) / 64 * 64; }

// bwd_filter work items (group, K block, C block of cbmax channels, tap) and their accumulators.
struct BwdFilterShape {
    Blocking bl;
    int64_t cbmax = 1, cblocks = 1, items = 1, slot_floats = 1;
};
BwdFilterShape bwd_filter_shape(const ConvProblem& p) {
    BwdFilterShape s;
    s.bl = blocking(p.k_per_group());
    s.cbmax = kMaxB[s.bl.nv];
    s.cblocks = (p.c_per_group() + s.cbmax - 1) / s.cbmax;
    s.items = p.groups * s.bl.blocks * s.cblocks * canon(p).ks();
    s.slot_floats = s.cbmax * s.bl.nv * VL;
    return s;
}

struct Sizes {
    std::size_t wpack = 0, xconv = 0, yconv = 0, accum = 0;
    std::size_t total() const { return wpack + xconv + yconv + accum; }
};
Sizes sizes(const ConvProblem& p) {
    Sizes s;
    const Canon c = canon(p);
    if (p.direction != Direction::bwd_filter) {
        const DataPlan dp = data_plan(p, c);
        const Blocking bl = blocking(dp.och);
        s.wpack = dp.depthwise ? round_up(4u * static_cast<std::size_t>(c.ks() * dp.cstride))
                               : round_up(4u * static_cast<std::size_t>(c.ks() * dp.red * bl.nvec * VL * p.groups));
        // The padded copy of the read tensor (x for fwd, dy for bwd_data).
        if (dp.copy) (p.direction == Direction::fwd ? s.xconv : s.yconv) = round_up(4u * dp.padded_floats(p.n));
        return s;
    }
    if (!is_f32_cl(p)) {
        s.xconv = round_up(4u * static_cast<std::size_t>(p.n * c.in_sp() * p.c));
        s.yconv = round_up(4u * static_cast<std::size_t>(p.n * c.out_sp() * p.k));
    }
    const BwdFilterShape sh = bwd_filter_shape(p);
    s.accum = round_up(4u * static_cast<std::size_t>(sh.items * sh.slot_floats));
    return s;
}

// ---- The algorithm ------------------------------------------------------------------------
template <class E>
class Impl {
public:
    using T = typename E::T;
    Impl(const ConvProblem& p, const ConvTensors& t, std::byte* ws) : p_(p), t_(t), c_(canon(p)) {
        const Sizes s = sizes(p);
        wpack_ = reinterpret_cast<float*>(ws);
        xconv_ = reinterpret_cast<float*>(ws + s.wpack);
        yconv_ = reinterpret_cast<float*>(ws + s.wpack + s.xconv);
        accum_ = reinterpret_cast<float*>(ws + s.wpack + s.xconv + s.yconv);
    }

    void run() {
        switch (p_.direction) {
            case Direction::fwd: run_fwd_or_bwd_data(true); break;
            case Direction::bwd_data: run_fwd_or_bwd_data(false); break;
            case Direction::bwd_filter: run_bwd_filter(); break;
        }
    }

private:
    const ConvProblem& p_;
    const ConvTensors& t_;
    Canon c_;
    float *wpack_ = nullptr, *xconv_ = nullptr, *yconv_ = nullptr, *accum_ = nullptr;

    // Offset of each tap (canonical order, W fastest) in a weight tensor with strides wst.
    std::vector<int64_t> tap_offsets(const Strides& wst) const {
        std::vector<int64_t> off(static_cast<std::size_t>(c_.ks()));
        for (int64_t tap = 0; tap < c_.ks(); ++tap) {
            const auto rs = slots(c_, tap / (c_.ker[1] * c_.ker[2]), tap / c_.ker[2] % c_.ker[1], tap % c_.ker[2]);
            off[static_cast<std::size_t>(tap)] = wst.at(0, 0, rs[0], rs[1], rs[2]);
        }
        return off;
    }

    // f32 channels-last view of x (or dy): the user's buffer when it already is one.
    const float* channels_last(bool is_x, float* buf) const {
        const T* src = static_cast<const T*>(is_x ? t_.x.data : t_.y.data);
        if constexpr (std::is_same_v<T, float>)
            if (p_.layout == Layout::nhwc) return src;
        const int64_t ch = is_x ? p_.c : p_.k;
        const std::array<int64_t, 3>& dims = is_x ? c_.in : c_.out;
        const Strides st = is_x ? x_strides(p_) : y_strides(p_);
        const int64_t rows = p_.n * dims[0] * dims[1];
#pragma omp parallel for schedule(static)
        for (int64_t row = 0; row < rows; ++row) {
            const int64_t n = row / (dims[0] * dims[1]), d = row / dims[1] % dims[0], h = row % dims[1];
            for (int64_t w = 0; w < dims[2]; ++w) {
                const auto sl = slots(c_, d, h, w);
                const T* sp = src + st.at(n, 0, sl[0], sl[1], sl[2]);
                float* dp = buf + (row * dims[2] + w) * ch;
                for (int64_t k = 0; k < ch; ++k) dp[k] = E::load(sp[k * st.channel]);
            }
        }
        return buf;
    }

    // The zero-padded f32 channels-last copy of the read tensor described by dp.
    const float* padded_copy(const DataPlan& dp, bool is_x, float* buf) const {
        if (!dp.copy) return static_cast<const float*>(is_x ? t_.x.data : t_.y.data);
        const T* src = static_cast<const T*>(is_x ? t_.x.data : t_.y.data);
        const Strides st = is_x ? x_strides(p_) : y_strides(p_);
        const int64_t ch = dp.read_ch, cs = dp.cstride, L0 = dp.dim[0].Lp, L1 = dp.dim[1].Lp, L2 = dp.dim[2].Lp;
        const int64_t rows = p_.n * L0 * L1;
#pragma omp parallel for schedule(static)
        for (int64_t row = 0; row < rows; ++row) {
            const int64_t n = row / (L0 * L1), i0 = row / L1 % L0 - dp.dim[0].P, i1 = row % L1 - dp.dim[1].P;
            float* out = buf + row * L2 * cs;
            const bool row_ok = i0 >= 0 && i0 < dp.rdims[0] && i1 >= 0 && i1 < dp.rdims[1];
            for (int64_t l2 = 0; l2 < L2; ++l2) {
                const int64_t i2 = l2 - dp.dim[2].P;
                float* o = out + l2 * cs;
                if (!row_ok || i2 < 0 || i2 >= dp.rdims[2]) {
                    std::fill(o, o + cs, 0.0f);
                    continue;
                }
                const auto sl = slots(c_, i0, i1, i2);
                const T* sp = src + st.at(n, 0, sl[0], sl[1], sl[2]);
                for (int64_t k = 0; k < ch; ++k) o[k] = E::load(sp[k * st.channel]);
                std::fill(o + ch, o + cs, 0.0f);
            }
        }
        return buf;
    }

    // fwd and bwd_data: the same blocked kernel over the plan's phases.
    void run_fwd_or_bwd_data(bool fwd) {
        const DataPlan dp = data_plan(p_, c_);
        if (dp.depthwise) return run_depthwise(dp, fwd);
        const int64_t kpg = p_.k_per_group(), red = dp.red, och = dp.och, in_ch = dp.read_ch, out_ch = dp.write_ch;
        const Blocking bl = blocking(och);
        const int64_t ks = c_.ks();
        const T* w = static_cast<const T*>(t_.w.data);
        const Strides wst = w_strides(p_);
        // Packed weights: [group][block][tap][red][nv_b*VL], blocks of a group are contiguous.
        const int64_t group_floats = ks * red * bl.nvec * VL;
        auto block_base = [&](int64_t g, int64_t b) { return wpack_ + g * group_floats + ks * red * b * bl.nv * VL; };
        const std::vector<int64_t> tap_off = tap_offsets(wst);
#pragma omp parallel for collapse(2) schedule(static)
        for (int64_t g = 0; g < p_.groups; ++g)
            for (int64_t b = 0; b < bl.blocks; ++b) {
                const int64_t nvl = bl.nv_of(b) * VL;
                float* dst = block_base(g, b);
                const int64_t o0 = b * bl.nv * VL, ovalid = std::min<int64_t>(nvl, och - o0);  // written channels
                if (ovalid < nvl) std::fill(dst, dst + ks * red * nvl, 0.0f);
                // Tiles of VL written channels (fwd: VL rows of the weight tensor, read a few
                // consecutive elements each while their lines stay in cache) x one reduction
                // channel x every tap: each store run fills whole lines of dst, instead of one
                // element per line with the taps' lines a power of two apart.
                const int64_t lstep = fwd ? VL : std::max<int64_t>(ovalid, 1);
                for (int64_t lb = 0; lb < ovalid; lb += lstep)
                    for (int64_t i = 0; i < red; ++i)
                        for (int64_t tap = 0; tap < ks; ++tap) {
                            const int64_t toff = tap_off[static_cast<std::size_t>(tap)];
                            float* d = dst + (tap * red + i) * nvl;
                            for (int64_t l = lb; l < std::min(lb + lstep, ovalid); ++l) {
                                const int64_t k = fwd ? g * kpg + o0 + l : g * kpg + i, cc = fwd ? i : o0 + l;
                                d[l] = E::load(w[wst.at(k, cc, 0, 0, 0) + toff]);
                            }
                        }
            }

        const float* src = padded_copy(dp, fwd, fwd ? xconv_ : yconv_);
        T* dst = static_cast<T*>(fwd ? t_.y.data : t_.x.data);
        const Strides dst_st = fwd ? y_strides(p_) : x_strides(p_);
        const bool direct = is_f32_cl(p_);
        const int64_t L0 = dp.dim[0].Lp, L1 = dp.dim[1].Lp, L2 = dp.dim[2].Lp;

        // Phase combinations and position chunks (positions: n, q0, q1, q2 flattened).
        struct Combo {
            std::array<const DimPhase*, 3> ph;
            int64_t positions;
        };
        std::vector<Combo> combos;
        for (const DimPhase& a : dp.dim[0].phases)
            for (const DimPhase& b : dp.dim[1].phases)
                for (const DimPhase& e : dp.dim[2].phases) {
                    const int64_t np = p_.n * a.count * b.count * e.count;
                    if (np > 0) combos.push_back({{&a, &b, &e}, np});
                }
        const int bmax = kMaxB[bl.nv];
        // Work items: (group, channel block, chunk of positions). Two loop orders, chosen by the
        // estimated traffic beyond L2:
        //  - blocks innermost: a chunk's read window (~64 KiB) stays in cache while every block
        //    of the group's weights passes over it: the weights are re-read once per chunk;
        //  - positions innermost: one block's weights stay in L2 while the whole read tensor
        //    streams past: the read tensor is re-read once per block (and per phase), and each
        //    output cache line is fetched and written back once per block.
        const int64_t chunk = std::clamp<int64_t>(65536 / (4 * in_ch) / bmax * bmax, bmax, 1024);
        struct Chunk {
            int64_t combo, begin, end;
        };
        std::vector<Chunk> chunks;
        for (std::size_t ci = 0; ci < combos.size(); ++ci)
            for (int64_t b0 = 0; b0 < combos[ci].positions; b0 += chunk)
                chunks.push_back({static_cast<int64_t>(ci), b0, std::min(b0 + chunk, combos[ci].positions)});
        const int64_t nchunks = static_cast<int64_t>(chunks.size()), items = nchunks * p_.groups * bl.blocks;
        const double weight_bytes = 4.0 * static_cast<double>(group_floats * p_.groups);
        const double read_bytes = 4.0 * static_cast<double>(dp.padded_floats(p_.n));
        const double write_bytes = 4.0 * static_cast<double>(p_.n * dp.wdims[0] * dp.wdims[1] * dp.wdims[2] * out_ch);
        const bool blocks_inner =
            static_cast<double>(nchunks) * weight_bytes <=
            static_cast<double>(bl.blocks) * (static_cast<double>(combos.size()) * read_bytes + 2 * write_bytes);

#pragma omp parallel
        {
            std::vector<Seg> segs;
            alignas(64) float tile[kMaxBAll * kMaxNV * VL];
            int64_t off[kMaxBAll];
            float* outp[kMaxBAll];
            std::array<int64_t, kMaxBAll> pn{}, pq0{}, pq1{}, pq2{};
#pragma omp for schedule(static)
            for (int64_t it = 0; it < items; ++it) {
                int64_t ch, g, b;
                if (blocks_inner) {
                    b = it % bl.blocks;
                    g = it / bl.blocks % p_.groups;
                    ch = it / bl.blocks / p_.groups;
                } else {
                    ch = it % nchunks;
                    b = it / nchunks % bl.blocks;
                    g = it / nchunks / bl.blocks;
                }
                const Chunk& ck = chunks[static_cast<std::size_t>(ch)];
                const Combo& co = combos[static_cast<std::size_t>(ck.combo)];
                const DimPhase &f0 = *co.ph[0], &f1 = *co.ph[1], &f2 = *co.ph[2];
                const int nv = static_cast<int>(bl.nv_of(b));
                const int64_t nvl = nv * VL;
                const int64_t ch0 = b * bl.nv * VL;  // first written channel (within group) of the block
                const int64_t valid = std::min<int64_t>(nvl, och - ch0);
                const float* wblk = block_base(g, b);
                segs.clear();
                for (auto [k0, a0] : f0.taps)
                    for (auto [k1, a1] : f1.taps)
                        for (auto [k2, a2] : f2.taps) {
                            const int64_t tap = (k0 * c_.ker[1] + k1) * c_.ker[2] + k2;
                            const int64_t toff =
                                (((dp.dim[0].P + a0) * L1 + dp.dim[1].P + a1) * L2 + dp.dim[2].P + a2) * in_ch;
                            segs.push_back({wblk + tap * red * nvl, src + toff + g * red, red});
                        }
                // Position counters (n, q0, q1, q2) of ck.begin, then advanced one by one (no
                // divisions in the block loop).
                int64_t cn, c0, c1, c2;
                {
                    int64_t r = ck.begin;
                    c2 = r % f2.count, r /= f2.count;
                    c1 = r % f1.count, r /= f1.count;
                    c0 = r % f0.count, cn = r / f0.count;
                }
                for (int64_t q = ck.begin; q < ck.end; q += bmax) {
                    const int bn = static_cast<int>(std::min<int64_t>(bmax, ck.end - q));
                    for (int j = 0; j < bn; ++j) {
                        const std::size_t u = static_cast<std::size_t>(j);
                        pn[u] = cn, pq0[u] = c0, pq1[u] = c1, pq2[u] = c2;
                        if (++c2 == f2.count) {
                            c2 = 0;
                            if (++c1 == f1.count) {
                                c1 = 0;
                                if (++c0 == f0.count) c0 = 0, ++cn;
                            }
                        }
                        off[j] = (((pn[u] * L0 + pq0[u] * dp.dim[0].in_step) * L1 + pq1[u] * dp.dim[1].in_step) * L2 +
                                  pq2[u] * dp.dim[2].in_step) *
                                 in_ch;
                        const int64_t o0 = f0.first + pq0[u] * dp.dim[0].out_step,
                                      o1 = f1.first + pq1[u] * dp.dim[1].out_step,
                                      o2 = f2.first + pq2[u] * dp.dim[2].out_step;
                        if (direct && valid == nvl)
                            outp[j] = reinterpret_cast<float*>(dst) +
                                      (((pn[u] * dp.wdims[0] + o0) * dp.wdims[1] + o1) * dp.wdims[2] + o2) * out_ch +
                                      g * och + ch0;
                        else
                            outp[j] = tile + j * nvl;
                    }
                    kChan[static_cast<std::size_t>(nv)][static_cast<std::size_t>(bn)](
                        segs.data(), static_cast<int>(segs.size()), off, outp);
                    if (!(direct && valid == nvl))
                        for (int j = 0; j < bn; ++j) {
                            const std::size_t u = static_cast<std::size_t>(j);
                            const auto sl =
                                slots(c_, f0.first + pq0[u] * dp.dim[0].out_step,
                                      f1.first + pq1[u] * dp.dim[1].out_step, f2.first + pq2[u] * dp.dim[2].out_step);
                            T* o = dst + dst_st.at(pn[u], g * och + ch0, sl[0], sl[1], sl[2]);
                            for (int64_t l = 0; l < valid; ++l) o[l * dst_st.channel] = E::store(tile[j * nvl + l]);
                        }
                }
            }
        }
    }

    // Depthwise fwd / bwd_data (C/g = K/g = 1): vectors run over channels of the padded copy,
    // the packed weights are [tap][channel]; same phases, positions and chunks as above.
    void run_depthwise(const DataPlan& dp, bool fwd) {
        const int64_t ks = c_.ks(), C = p_.c, cs = dp.cstride;
        const T* w = static_cast<const T*>(t_.w.data);
        const Strides wst = w_strides(p_);
#pragma omp parallel for schedule(static)
        for (int64_t tap = 0; tap < ks; ++tap) {
            const auto rs = slots(c_, tap / (c_.ker[1] * c_.ker[2]), tap / c_.ker[2] % c_.ker[1], tap % c_.ker[2]);
            for (int64_t c = 0; c < cs; ++c)
                wpack_[tap * cs + c] = c < C ? E::load(w[wst.at(c, 0, rs[0], rs[1], rs[2])]) : 0.0f;
        }
        const float* src = padded_copy(dp, fwd, fwd ? xconv_ : yconv_);
        T* dst = static_cast<T*>(fwd ? t_.y.data : t_.x.data);
        const Strides dst_st = fwd ? y_strides(p_) : x_strides(p_);
        const bool direct = is_f32_cl(p_);
        const int64_t L0 = dp.dim[0].Lp, L1 = dp.dim[1].Lp, L2 = dp.dim[2].Lp;
        struct Combo {
            std::array<const DimPhase*, 3> ph;
            int64_t positions;
        };
        std::vector<Combo> combos;
        for (const DimPhase& a : dp.dim[0].phases)
            for (const DimPhase& b : dp.dim[1].phases)
                for (const DimPhase& e : dp.dim[2].phases) {
                    const int64_t np = p_.n * a.count * b.count * e.count;
                    if (np > 0) combos.push_back({{&a, &b, &e}, np});
                }
        const int64_t nvec = cs / VL, cblocks = (nvec + kDwNV - 1) / kDwNV;
        const int64_t chunk = std::clamp<int64_t>(65536 / (4 * cs) / kDwB * kDwB, kDwB, 1024);
        struct Chunk {
            int64_t combo, begin, end;
        };
        std::vector<Chunk> chunks;
        for (std::size_t ci = 0; ci < combos.size(); ++ci)
            for (int64_t b0 = 0; b0 < combos[ci].positions; b0 += chunk)
                chunks.push_back({static_cast<int64_t>(ci), b0, std::min(b0 + chunk, combos[ci].positions)});
        const int64_t items = static_cast<int64_t>(chunks.size()) * cblocks;
#pragma omp parallel
        {
            std::vector<const float*> tx, tw;
            alignas(64) float tile[kDwB * kDwNV * VL];
            int64_t off[kDwB];
            float* outp[kDwB];
            std::array<int64_t, kDwB> pn{}, po0{}, po1{}, po2{};
#pragma omp for schedule(static)
            for (int64_t it = 0; it < items; ++it) {
                const int64_t cb = it % cblocks;
                const Chunk& ck = chunks[static_cast<std::size_t>(it / cblocks)];
                const Combo& co = combos[static_cast<std::size_t>(ck.combo)];
                const DimPhase &f0 = *co.ph[0], &f1 = *co.ph[1], &f2 = *co.ph[2];
                const int nv = static_cast<int>(std::min<int64_t>(kDwNV, nvec - cb * kDwNV));
                const int64_t c0 = cb * kDwNV * VL, nvl = nv * VL, valid = std::min<int64_t>(nvl, C - c0);
                tx.clear();
                tw.clear();
                for (auto [k0, a0] : f0.taps)
                    for (auto [k1, a1] : f1.taps)
                        for (auto [k2, a2] : f2.taps) {
                            const int64_t tap = (k0 * c_.ker[1] + k1) * c_.ker[2] + k2;
                            tx.push_back(
                                src + (((dp.dim[0].P + a0) * L1 + dp.dim[1].P + a1) * L2 + dp.dim[2].P + a2) * cs + c0);
                            tw.push_back(wpack_ + tap * cs + c0);
                        }
                int64_t cn, q0, q1, q2;
                {
                    int64_t r = ck.begin;
                    q2 = r % f2.count, r /= f2.count;
                    q1 = r % f1.count, r /= f1.count;
                    q0 = r % f0.count, cn = r / f0.count;
                }
                for (int64_t q = ck.begin; q < ck.end; q += kDwB) {
                    const int bn = static_cast<int>(std::min<int64_t>(kDwB, ck.end - q));
                    for (int j = 0; j < bn; ++j) {
                        const std::size_t u = static_cast<std::size_t>(j);
                        off[j] = (((cn * L0 + q0 * dp.dim[0].in_step) * L1 + q1 * dp.dim[1].in_step) * L2 +
                                  q2 * dp.dim[2].in_step) *
                                 cs;
                        pn[u] = cn;
                        po0[u] = f0.first + q0 * dp.dim[0].out_step;
                        po1[u] = f1.first + q1 * dp.dim[1].out_step;
                        po2[u] = f2.first + q2 * dp.dim[2].out_step;
                        if (++q2 == f2.count) {
                            q2 = 0;
                            if (++q1 == f1.count) {
                                q1 = 0;
                                if (++q0 == f0.count) q0 = 0, ++cn;
                            }
                        }
                        outp[j] =
                            direct && valid == nvl
                                ? reinterpret_cast<float*>(dst) +
                                      (((pn[u] * dp.wdims[0] + po0[u]) * dp.wdims[1] + po1[u]) * dp.wdims[2] + po2[u]) *
                                          C +
                                      c0
                                : tile + j * nvl;
                    }
                    kDw[static_cast<std::size_t>(nv)][static_cast<std::size_t>(bn)](
                        tx.data(), tw.data(), static_cast<int>(tx.size()), off, outp);
                    if (!(direct && valid == nvl))
                        for (int j = 0; j < bn; ++j) {
                            const std::size_t u = static_cast<std::size_t>(j);
                            const auto sl = slots(c_, po0[u], po1[u], po2[u]);
                            T* o = dst + dst_st.at(pn[u], c0, sl[0], sl[1], sl[2]);
                            for (int64_t l = 0; l < valid; ++l) o[l * dst_st.channel] = E::store(tile[j * nvl + l]);
                        }
                }
            }
        }
    }

    // bwd_filter: items (group, K block, C block, tap) own their dw elements; the reduction
    // over positions runs chunk by chunk (a few output rows), every thread sweeping its items
    // over the chunk while the chunk's x and dy rows are in cache. Partial sums live in the
    // workspace between chunks (f32, exactly what the registers held), so each dw element is
    // still one sequential sum in position order.
    void run_bwd_filter() {
        const int64_t cpg = p_.c_per_group(), kpg = p_.k_per_group();
        const BwdFilterShape sh = bwd_filter_shape(p_);
        const Blocking& bl = sh.bl;
        const float* x = channels_last(true, xconv_);
        const float* dy = channels_last(false, yconv_);
        T* dw = static_cast<T*>(t_.w.data);
        const Strides wst = w_strides(p_);
        const int64_t ks = c_.ks(), cbmax = sh.cbmax, cblocks = sh.cblocks, items = sh.items;
        const int64_t slot = sh.slot_floats;
        const int64_t in_sp = c_.in_sp(), out_sp = c_.out_sp();
        const std::vector<int64_t> tap_off = tap_offsets(wst);
        // Per kw: the ow range whose input is valid (contiguous in ow).
        std::vector<std::pair<int64_t, int64_t>> ow_range(static_cast<std::size_t>(c_.ker[2]), {0, 0});
        for (int64_t kw = 0; kw < c_.ker[2]; ++kw) {
            int64_t lo = c_.out[2], hi = 0;
            for (int64_t o = 0; o < c_.out[2]; ++o) {
                const int64_t i = o * c_.st[2] - c_.pb[2] + kw * c_.dil[2];
                if (i >= 0 && i < c_.in[2]) lo = std::min(lo, o), hi = std::max(hi, o + 1);
            }
            ow_range[static_cast<std::size_t>(kw)] = {lo, std::max(lo, hi)};
        }
        // Chunks of whole output rows (n, od, oh), at least 64 positions each.
        const int64_t rows = p_.n * c_.out[0] * c_.out[1];
        const int64_t rows_per_chunk = std::max<int64_t>(1, (64 + c_.out[2] - 1) / c_.out[2]);
        float* acc = accum_;
#pragma omp parallel
        {
            const int64_t nt = omp_get_num_threads(), tid = omp_get_thread_num();
            const int64_t it0 = items * tid / nt, it1 = items * (tid + 1) / nt;
            std::vector<Seg> segs;
            std::vector<std::array<int64_t, 3>> rc;  // (n, od, oh) of the chunk's rows
            for (int64_t r0 = 0; r0 < rows; r0 += rows_per_chunk) {
                const int64_t r1 = std::min(rows, r0 + rows_per_chunk);
                rc.clear();
                for (int64_t row = r0; row < r1; ++row)
                    rc.push_back({row / (c_.out[0] * c_.out[1]), row / c_.out[1] % c_.out[0], row % c_.out[1]});
                for (int64_t it = it0; it < it1; ++it) {
                    const int64_t tap = it % ks, cb = it / ks % cblocks, b = it / ks / cblocks % bl.blocks,
                                  g = it / ks / cblocks / bl.blocks;
                    const int64_t r0k = tap / (c_.ker[1] * c_.ker[2]), r1k = tap / c_.ker[2] % c_.ker[1],
                                  r2k = tap % c_.ker[2];
                    const int nv = static_cast<int>(bl.nv_of(b));
                    const int64_t nvl = nv * VL;
                    const int64_t k0 = b * bl.nv * VL, kvalid = std::min<int64_t>(nvl, kpg - k0);
                    const int64_t c0 = cb * cbmax;
                    const int cn = static_cast<int>(std::min<int64_t>(cbmax, cpg - c0));
                    const auto [olo, ohi] = ow_range[static_cast<std::size_t>(r2k)];
                    segs.clear();
                    if (ohi > olo)
                        for (const auto& [n, od, oh] : rc) {
                            const int64_t id = od * c_.st[0] - c_.pb[0] + r0k * c_.dil[0];
                            const int64_t ih = oh * c_.st[1] - c_.pb[1] + r1k * c_.dil[1];
                            if (id < 0 || id >= c_.in[0] || ih < 0 || ih >= c_.in[1]) continue;
                            const int64_t iw = olo * c_.st[2] - c_.pb[2] + r2k * c_.dil[2];
                            segs.push_back(
                                {dy + (n * out_sp + (od * c_.out[1] + oh) * c_.out[2] + olo) * p_.k + g * kpg + k0,
                                 x + (n * in_sp + (id * c_.in[1] + ih) * c_.in[2] + iw) * p_.c + g * cpg + c0,
                                 ohi - olo});
                        }
                    float* a = acc + it * slot;
                    if (kvalid == nvl)
                        kPos[static_cast<std::size_t>(nv)][static_cast<std::size_t>(cn)](
                            segs.data(), static_cast<int>(segs.size()), p_.k, c_.st[2] * p_.c, a, r0 == 0);
                    else
                        partial_pos(segs, nvl, cn, kvalid, a, r0 == 0);  // K/g not a multiple of VL
                }
            }
            // Store dw in the weight tensor's order (K outermost, taps innermost): the ks items
            // of one (group, K block, C block) are consecutive, and may belong to two threads.
#pragma omp barrier
#pragma omp for schedule(static)
            for (int64_t gi = 0; gi < items / ks; ++gi) {
                const int64_t cb = gi % cblocks, b = gi / cblocks % bl.blocks, g = gi / cblocks / bl.blocks;
                const int64_t nvl = bl.nv_of(b) * VL, k0 = b * bl.nv * VL, kvalid = std::min<int64_t>(nvl, kpg - k0),
                              c0 = cb * cbmax;
                const int64_t cn = std::min<int64_t>(cbmax, cpg - c0);
                const float* a = acc + gi * ks * slot;
                for (int64_t l = 0; l < kvalid; ++l)
                    for (int64_t j = 0; j < cn; ++j) {
                        T* o = dw + wst.at(g * kpg + k0 + l, c0 + j, 0, 0, 0);
                        for (int64_t tap = 0; tap < ks; ++tap)
                            o[tap_off[static_cast<std::size_t>(tap)]] = E::store(a[tap * slot + j * nvl + l]);
                    }
            }
        }
    }

    // Scalar version of kernel_pos for a block whose last dy vector is partial (reading a full
    // vector could run past the tensor): same accumulation order, FMA per element.
    void partial_pos(const std::vector<Seg>& segs, int64_t nvl, int cn, int64_t kvalid, float* a, bool zero) const {
        if (zero) std::fill(a, a + cn * nvl, 0.0f);
        const int64_t xstep = c_.st[2] * p_.c;
        for (const Seg& s : segs)
            for (int64_t i = 0; i < s.count; ++i)
                for (int j = 0; j < cn; ++j) {
                    const float xv = s.b[i * xstep + j];
                    for (int64_t l = 0; l < kvalid; ++l)
                        a[j * nvl + l] = std::fma(xv, s.v[i * p_.k + l], a[j * nvl + l]);
                }
    }
};

class DirectBlocked final : public CpuAlgorithm {
public:
    DirectBlocked() : CpuAlgorithm("cpu.direct_blocked", Note::layout_conversion, CpuFamily::direct_blocked) {}

    Support supports(const ConvProblem& p) const override {
        if (auto e = p.check()) return Support::no("invalid problem: " + *e);
        if (p.dtype == DataType::f64) return Support::no("f64 data: the kernels are f32 (use cpu.direct)");
        return Support::yes();
    }
    std::size_t workspace_size(const ConvProblem& p) const override { return sizes(p).total(); }
    Status run(const ConvProblem& p, const ConvTensors& t, Workspace ws) const override {
        if (p.dtype == DataType::f64) return Status::unsupported("f64 data");
        if (ws.bytes < sizes(p).total()) return Status::failure("workspace smaller than workspace_size()");
        dispatch_dtype(p.dtype, [&](auto e) {
            using E = decltype(e);
            if constexpr (!std::is_same_v<typename E::T, double>) Impl<E>(p, t, static_cast<std::byte*>(ws.data)).run();
        });
        return Status::success();
    }
    double error_bound(const ConvProblem& p) const override {
        const double u = unit_roundoff(DataType::f32), uo = unit_roundoff(p.dtype);
        const double lu = static_cast<double>(p.reduction_length()) * u;
        const double gamma = lu / (1.0 - lu);
        return gamma * (1.0 + uo) + uo;
    }
};

}  // namespace

const Algorithm& cpu_direct_blocked() {
    static const DirectBlocked a;
    return a;
}

}  // namespace convtune::cpu::CONVTUNE_ISA_NS
