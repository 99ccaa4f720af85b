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
// fwd / bwd_data read an f32 channels-last view of x (or dy): the user's tensor, or an unpadded
// copy. Per spatial dim the written positions are split into segments with a constant set of
// in-range taps (the border positions read fewer); a position's class is its segment in every
// dim, any B positions of one class form a block (across rows and images), and no tap of the
// padding is multiplied. bwd_data with stride s is split into the s phases of the input position
// (i + pad) mod s; within a phase it is a stride-1 correlation over a fixed tap subset, so no
// zero-upsampled dy and no FMA on a zero. Work items are (channel block, chunk of positions);
// outputs go to the written tensor directly (f32 channels-last) or through a staging tile of the
// chunk, stored transposed in register tiles (AVX-512 16x16, AVX2 8x8) when channels-first.
// bwd_filter items (group, K block, C block, tap) reduce over the positions chunk by chunk,
// keeping partial sums in the workspace (same order as one sequential sum). Depthwise fwd /
// bwd_data (C/g = K/g = 1) vectorise over channels instead; depthwise bwd_filter and groups with
// few channels use the general kernels with partly empty vectors (correct, not fast).
//
// Data: any input other than f32 channels-last (channels-first, f16, bf16) is converted to f32
// channels-last in the workspace inside the run (Note::layout_conversion; f32 channels-first by
// tile transposes); outputs are converted while they are stored.
// Workspace (bytes, each part rounded up to 64), VL = 16 with AVX-512, 8 otherwise:
//  fwd / bwd_data: 4 * KS * (R * ceil_to(O, VL) + 16 * blocks) * groups
//                                                          packed weights; fwd: R = C/g, O = K/g;
//                                                          bwd_data: R = K/g, O = C/g; blocks:
//                                                          channel blocks per group (each tap's
//                                                          rows are followed by 16 unused floats)
//                                                          (depthwise: 4 * KS * ceil_to(C, VL))
//                + 4 * N * in_spatial * Cr                 channels-last copy of the read tensor
//                                                          (in_spatial, Cr: its positions and
//                                                          channels, ceil_to(C, VL) for
//                                                          depthwise); none when it is f32
//                                                          channels-last with Cr channels
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
#include <cstdint>
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

// ---- Transposes (layout conversions) ----------------------------------------------------------
// transpose_tile: row(j)[i] = src[i * ss + j] for i < rows, j < cols (rows, cols <= kTile; row(j):
// a float* for column j of src); nothing else is written. AVX-512: 16x16 in registers (masked
// loads and stores for partial tiles); AVX2: 8x8; otherwise element by element. kStream: whole
// aligned rows with non-temporal stores (AVX-512; the caller fences before the data is read).
#if defined(__AVX512F__)
constexpr int kTile = 16;
template <bool kStream = false, class Row>
inline void transpose_tile(const float* src, int64_t ss, int rows, int cols, Row row) {
    const __mmask16 cm = static_cast<__mmask16>((1u << cols) - 1), rm = static_cast<__mmask16>((1u << rows) - 1);
    __m512 r[16], t[16];
    if (cols == 16 && rows == 16)
        for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * ss);
    else
        for (int i = 0; i < 16; ++i) r[i] = i < rows ? _mm512_maskz_loadu_ps(cm, src + i * ss) : _mm512_setzero_ps();
    // Pairs of rows interleaved, then 4x4 blocks within each 128-bit lane: r[4m + c] lane L holds
    // column 4L + c of rows 4m .. 4m+3.
    // (The zero-masked forms with a full mask: GCC 12's plain _mm512_unpack*_ps warn about their
    // deliberately undefined pass-through operand.)
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_maskz_unpacklo_ps(0xFFFF, r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_maskz_unpackhi_ps(0xFFFF, r[2 * i], r[2 * i + 1]);
    }
    for (int m = 0; m < 4; ++m) {
        r[4 * m] = _mm512_shuffle_ps(t[4 * m], t[4 * m + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * m + 1] = _mm512_shuffle_ps(t[4 * m], t[4 * m + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[4 * m + 2] = _mm512_shuffle_ps(t[4 * m + 1], t[4 * m + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * m + 3] = _mm512_shuffle_ps(t[4 * m + 1], t[4 * m + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    // 4x4 transpose of the 128-bit lanes of r[c], r[4 + c], r[8 + c], r[12 + c]: column 4L + c.
    for (int c = 0; c < 4; ++c) {
        const __m512 v0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x44), v1 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xEE);
        const __m512 v2 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x44),
                     v3 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xEE);
        const __m512 o[4] = {_mm512_shuffle_f32x4(v0, v2, 0x88), _mm512_shuffle_f32x4(v0, v2, 0xDD),
                             _mm512_shuffle_f32x4(v1, v3, 0x88), _mm512_shuffle_f32x4(v1, v3, 0xDD)};
        for (int L = 0; L < 4; ++L) {
            if (4 * L + c >= cols) continue;
            float* d = row(4 * L + c);
            if (rows == 16 && kStream && reinterpret_cast<std::uintptr_t>(d) % 64 == 0) _mm512_stream_ps(d, o[L]);
            else if (rows == 16) _mm512_storeu_ps(d, o[L]);
            else _mm512_mask_storeu_ps(d, rm, o[L]);
        }
    }
}
#elif defined(__AVX2__)
constexpr int kTile = 8;
inline __m256i lane_mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
template <bool kStream = false, class Row>
inline void transpose_tile(const float* src, int64_t ss, int rows, int cols, Row row) {
    const __m256i cm = lane_mask(cols), rm = lane_mask(rows);
    __m256 r[8], t[8];
    // (Masked loads and stores only for partial tiles: they are slow on some CPUs.)
    for (int i = 0; i < 8; ++i)
        r[i] = i >= rows   ? _mm256_setzero_ps()
               : cols == 8 ? _mm256_loadu_ps(src + i * ss)
                           : _mm256_maskload_ps(src + i * ss, cm);
    for (int i = 0; i < 4; ++i) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int m = 0; m < 2; ++m) {
        r[4 * m] = _mm256_shuffle_ps(t[4 * m], t[4 * m + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * m + 1] = _mm256_shuffle_ps(t[4 * m], t[4 * m + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[4 * m + 2] = _mm256_shuffle_ps(t[4 * m + 1], t[4 * m + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * m + 3] = _mm256_shuffle_ps(t[4 * m + 1], t[4 * m + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    // r[4m + c] lane L holds column 4L + c of rows 4m .. 4m+3.
    for (int j = 0; j < cols; ++j) {
        const __m256 o =
            j < 4 ? _mm256_permute2f128_ps(r[j], r[4 + j], 0x20) : _mm256_permute2f128_ps(r[j - 4], r[j], 0x31);
        if (rows == 8) _mm256_storeu_ps(row(j), o);
        else _mm256_maskstore_ps(row(j), rm, o);
    }
}
#else
constexpr int kTile = 16;
template <bool kStream = false, class Row>
inline void transpose_tile(const float* src, int64_t ss, int rows, int cols, Row row) {
    for (int j = 0; j < cols; ++j) {
        float* d = row(j);
        for (int i = 0; i < rows; ++i) d[i] = src[i * ss + j];
    }
}
#endif

// dst[j * ds + i] = src[i * ss + j] for i < rows, j < cols, tile by tile (kStream as above).
template <bool kStream = false>
inline void transpose(const float* src, int64_t ss, int64_t rows, int64_t cols, float* dst, int64_t ds) {
    for (int64_t i = 0; i < rows; i += kTile)
        for (int64_t j = 0; j < cols; j += kTile)
            transpose_tile<kStream>(src + i * ss + j, ss, static_cast<int>(std::min<int64_t>(kTile, rows - i)),
                                    static_cast<int>(std::min<int64_t>(kTile, cols - j)),
                                    [=](int jj) { return dst + (j + jj) * ds + i; });
}

// ---- Micro-kernels ----------------------------------------------------------------------------
// fwd / bwd_data: one reduction segment per tap: `count` input channels, NV weight vectors at
// v + i*NV*VL and B broadcasts at x + (xoff + off[j]) + i (off: the B positions' offsets into the
// read tensor x, xoff: the tap's offset; their sum is in range, xoff alone need not be). The
// accumulators are stored to out[j] (B pointers, NV*VL floats each).
struct ChanSeg {
    const float* v;
    int64_t xoff;
    int64_t count;
};
template <int NV, int B>
void kernel_chan(const ChanSeg* segs, int nseg, const float* x, const int64_t* off, float* const* out) {
    V acc[B][NV];
#pragma GCC unroll 16
    for (int j = 0; j < B; ++j)
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) acc[j][v] = vzero();
    for (int s = 0; s < nseg; ++s) {
        const float* __restrict wp = segs[s].v;
        const float* __restrict xp[B];
#pragma GCC unroll 16
        for (int j = 0; j < B; ++j) xp[j] = x + (segs[s].xoff + off[j]);
        const int64_t n = segs[s].count;
        for (int64_t i = 0; i < n; ++i) {
            V w[NV];
#pragma GCC unroll 16
            for (int v = 0; v < NV; ++v) w[v] = vload(wp + i * (NV * VL) + v * VL);
#pragma GCC unroll 16
            for (int j = 0; j < B; ++j) {
                const V b = vbcast(xp[j] + i);
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

// bwd_filter: one reduction segment: `count` positions.
struct Seg {
    const float* v;
    const float* b;
    int64_t count;
};
// Step i of a segment is one position: NV dy vectors at v + i*vstep and B
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
// vectors at w[t] and the inputs NV vectors at x + (xoff[t] + off[j]) (no broadcast: channel c of
// the output only reads channel c).
template <int NV, int B>
void kernel_dw(const float* x, const int64_t* xoff, const float* const* w, int ntaps, const int64_t* off,
               float* const* out) {
    V acc[B][NV];
#pragma GCC unroll 16
    for (int j = 0; j < B; ++j)
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) acc[j][v] = vzero();
    for (int t = 0; t < ntaps; ++t) {
        V wv[NV];
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) wv[v] = vload(w[t] + v * VL);
#pragma GCC unroll 16
        for (int j = 0; j < B; ++j) {
            const float* xp = x + (xoff[t] + off[j]);
#pragma GCC unroll 16
            for (int v = 0; v < NV; ++v) acc[j][v] = vfma(vload(xp + v * VL), wv[v], acc[j][v]);
        }
    }
#pragma GCC unroll 16
    for (int j = 0; j < B; ++j)
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) vstore(out[j] + v * VL, acc[j][v]);
}
using DwFn = void (*)(const float*, const int64_t*, const float* const*, int, const int64_t*, float* const*);
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

using ChanFn = void (*)(const ChanSeg*, int, const float*, const int64_t*, float* const*);
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

// Packed weights of fwd / bwd_data, per (group, block): [tap][red][nv_b*VL], each tap's rows
// followed by kTapPad unused floats (with red * nv_b * VL a power of two, the taps' regions would
// otherwise share cache sets, and the repack's stores to them evict each other).
constexpr int64_t kTapPad = 16;
struct WPack {
    Blocking bl;
    int64_t red = 1, ks = 1;
    int64_t tap_floats(int64_t b) const { return red * bl.nv_of(b) * VL + kTapPad; }
    int64_t group_floats() const { return ks * (red * bl.nvec * VL + bl.blocks * kTapPad); }
    int64_t offset(int64_t g, int64_t b) const {
        return g * group_floats() + ks * (red * b * bl.nv * VL + b * kTapPad);
    }
};

// ---- fwd / bwd_data plan ----------------------------------------------------------------
// Both directions are written as: for every written position, a sum over taps of the read
// tensor (an f32 channels-last view, unpadded) at (read0 + q * in_step) times packed weights:
//   fwd:      written y at o = q, read x at q*s + r*d - pb                  (one phase)
//   bwd_data: written dx at i = phi + q*s, read dy at q + (phi + pb - r*d)/s for the taps r with
//             r*d = phi + pb (mod s)                                          (s phases)
// Per dim, the q range of a phase is split into segments with a constant set of in-range taps
// (the border positions read fewer taps): a position's class is its segment in every dim, and
// any B positions of one class form a block. No tap of the padding is multiplied.
struct QSeg {
    int64_t end = 0;        // q in [previous end, end)
    std::vector<int> taps;  // indices into DimPhase::taps read by these q
};
struct DimPhase {
    int64_t first = 0, count = 0;                   // written coordinate first + q*out_step, q < count
    std::vector<std::pair<int64_t, int64_t>> taps;  // (kernel index, read index at q = 0)
    std::vector<QSeg> segs;
};
struct DimPlan {
    int64_t out_step = 1, in_step = 1;
    std::vector<DimPhase> phases;
};
struct DataPlan {
    std::array<DimPlan, 3> dim;
    bool copy = true;                       // false: the read tensor is used in place
    std::array<int64_t, 3> rdims{}, wdims{};  // read / written tensor spatial dims
    int64_t read_ch = 1, write_ch = 1, red = 1, och = 1;
    int64_t cstride = 1;     // channel stride of the read view (read_ch, or rounded up to VL for depthwise)
    bool depthwise = false;  // C/g = K/g = 1: vectorised over channels instead
    std::size_t read_floats(int64_t n) const {
        return static_cast<std::size_t>(n * rdims[0] * rdims[1] * rdims[2] * cstride);
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
    dp.copy = !(is_f32_cl(p) && dp.cstride == dp.read_ch);
    for (std::size_t d = 0; d < 3; ++d) {
        DimPlan& dm = dp.dim[d];
        const int64_t s = c.st[d], dl = c.dil[d], pb = c.pb[d], kn = c.ker[d], R = dp.rdims[d];
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
        // Tap (r, a) is in range for a + q*in_step in [0, R): q in [lo, hi) below.
        const int64_t is = dm.in_step;
        auto lo_of = [&](int64_t a) { return a >= 0 ? int64_t{0} : (-a + is - 1) / is; };
        auto hi_of = [&](int64_t a) { return a > R - 1 ? int64_t{0} : (R - 1 - a) / is + 1; };
        for (DimPhase& ph : dm.phases) {
            std::vector<int64_t> cuts{0, ph.count};
            for (auto [r, a] : ph.taps)
                for (int64_t q : {lo_of(a), hi_of(a)}) cuts.push_back(std::clamp<int64_t>(q, 0, ph.count));
            std::sort(cuts.begin(), cuts.end());
            cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
            for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
                QSeg sg;
                sg.end = cuts[i + 1];
                for (std::size_t t = 0; t < ph.taps.size(); ++t)
                    if (cuts[i] >= lo_of(ph.taps[t].second) && cuts[i] < hi_of(ph.taps[t].second))
                        sg.taps.push_back(static_cast<int>(t));
                if (!ph.segs.empty() && ph.segs.back().taps == sg.taps) ph.segs.back().end = sg.end;
                else ph.segs.push_back(std::move(sg));
            }
        }
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
        const WPack wp{bl, dp.red, c.ks()};
        s.wpack = dp.depthwise ? round_up(4u * static_cast<std::size_t>(c.ks() * dp.cstride))
                               : round_up(4u * static_cast<std::size_t>(wp.group_floats() * p.groups));
        // The channels-last copy of the read tensor (x for fwd, dy for bwd_data).
        if (dp.copy) (p.direction == Direction::fwd ? s.xconv : s.yconv) = round_up(4u * dp.read_floats(p.n));
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

    // f32 channels-last view of x (or dy) with channel stride cs >= its channels (the lanes
    // past them zero): the user's buffer when it already is one. f32 channels-first data is
    // transposed per image ([channel][position] -> [position][channel]) in tiles.
    const float* channels_last(bool is_x, float* buf, int64_t cs) const {
        const T* src = static_cast<const T*>(is_x ? t_.x.data : t_.y.data);
        const int64_t ch = is_x ? p_.c : p_.k;
        if constexpr (std::is_same_v<T, float>)
            if (p_.layout == Layout::nhwc && cs == ch) return src;
        const std::array<int64_t, 3>& dims = is_x ? c_.in : c_.out;
        const Strides st = is_x ? x_strides(p_) : y_strides(p_);
        const int64_t sp = dims[0] * dims[1] * dims[2];
        if constexpr (std::is_same_v<T, float>)
            if (p_.layout == Layout::nchw) {
                // Channels-first: image n is a [ch][sp] matrix (canonical positions in memory order),
                // transposed kTile channels at a time (kTile sequential read streams), stored
                // non-temporally (each line of the copy is written once, whole: no fetch first).
                const int64_t tiles = (ch + kTile - 1) / kTile;
#pragma omp parallel for schedule(static)
                for (int64_t it = 0; it < p_.n * tiles; ++it) {
                    const int64_t n = it / tiles, c0 = it % tiles * kTile;
                    float* dp = buf + n * sp * cs;
                    const int64_t rows = std::min<int64_t>(kTile, ch - c0);
                    transpose<true>(src + st.at(n, c0, 0), st.channel, rows, sp, dp + c0, cs);
                    if (cs > ch && c0 + kTile >= ch)
                        for (int64_t j = 0; j < sp; ++j) std::fill(dp + j * cs + ch, dp + (j + 1) * cs, 0.0f);
                    _mm_sfence();  // the non-temporal stores before the loop's barrier
                }
                return buf;
            }
        const int64_t rows = p_.n * dims[0] * dims[1];
#pragma omp parallel for schedule(static)
        for (int64_t row = 0; row < rows; ++row) {
            const int64_t n = row / (dims[0] * dims[1]), d = row / dims[1] % dims[0], h = row % dims[1];
            for (int64_t w = 0; w < dims[2]; ++w) {
                const auto sl = slots(c_, d, h, w);
                const T* sp_ = src + st.at(n, 0, sl[0], sl[1], sl[2]);
                float* dp = buf + (row * dims[2] + w) * cs;
                for (int64_t k = 0; k < ch; ++k) dp[k] = E::load(sp_[k * st.channel]);
                std::fill(dp + ch, dp + cs, 0.0f);
            }
        }
        return buf;
    }

    // Packed weights of fwd / bwd_data: [group][block] of WPack (blocks of a group contiguous,
    // zero lanes past the group's written channels); depthwise: [tap][channel].
    void pack_weights(const DataPlan& dp, bool fwd, const WPack& wp) {
        const Blocking& bl = wp.bl;
        const int64_t kpg = p_.k_per_group(), red = dp.red, och = dp.och, ks = c_.ks();
        const T* w = static_cast<const T*>(t_.w.data);
        const Strides wst = w_strides(p_);
        const std::vector<int64_t> tap_off = tap_offsets(wst);
        if (dp.depthwise) {
            const int64_t cs = dp.cstride;
#pragma omp parallel for schedule(static)
            for (int64_t tap = 0; tap < ks; ++tap)
                for (int64_t c = 0; c < cs; ++c)
                    wpack_[tap * cs + c] =
                        c < p_.c ? E::load(w[wst.at(c, 0, 0, 0, 0) + tap_off[static_cast<std::size_t>(tap)]]) : 0.0f;
            return;
        }
        // fwd: filter k's weights of its group (red * ks values) are contiguous; element m of them
        // goes to (tap, c) = col[m] of the packed block.
        std::vector<std::array<int64_t, 2>> col(fwd ? static_cast<std::size_t>(red * ks) : 0);
        for (int64_t c = 0; c < (fwd ? red : 0); ++c)
            for (int64_t tap = 0; tap < ks; ++tap)
                col[static_cast<std::size_t>(wst.at(0, c, 0, 0, 0) + tap_off[static_cast<std::size_t>(tap)])] = {tap,
                                                                                                                 c};
#pragma omp parallel for collapse(2) schedule(static)
        for (int64_t g = 0; g < p_.groups; ++g)
            for (int64_t b = 0; b < bl.blocks; ++b) {
                const int64_t nvl = bl.nv_of(b) * VL;
                float* dst = wpack_ + wp.offset(g, b);
                const int64_t tstride = wp.tap_floats(b);
                const int64_t o0 = b * bl.nv * VL, ovalid = std::min<int64_t>(nvl, och - o0);  // written channels
                if (ovalid < nvl) std::fill(dst, dst + ks * tstride, 0.0f);
                if constexpr (std::is_same_v<T, float>)
                    if (fwd) {
                        // Tiles of kTile filters x kTile of their weights, transposed, in bands of
                        // kBand weights: the band's packed rows are written whole while in L1,
                        // non-temporally (the packed weights are larger than L2 when it matters).
                        constexpr int64_t kBand = 4 * kTile;
                        const float* wr = w + wst.at(g * kpg + o0, 0, 0, 0, 0);
                        for (int64_t mb = 0; mb < red * ks; mb += kBand)
                            for (int64_t l0 = 0; l0 < ovalid; l0 += kTile) {
                                // The next band of these rows, ahead of use (the rows are too many
                                // streams for the hardware prefetchers).
                                if (mb + kBand < red * ks)
                                    for (int64_t l = l0; l < std::min(l0 + kTile, ovalid); ++l)
                                        for (int64_t m = mb + kBand; m < std::min(mb + 2 * kBand, red * ks); m += 16)
                                            __builtin_prefetch(wr + l * wst.outer + m);
                                for (int64_t m0 = mb; m0 < std::min(mb + kBand, red * ks); m0 += kTile)
                                    transpose_tile<true>(
                                        wr + l0 * wst.outer + m0, wst.outer,
                                        static_cast<int>(std::min<int64_t>(kTile, ovalid - l0)),
                                        static_cast<int>(std::min<int64_t>(kTile, red * ks - m0)), [&](int j) {
                                            const auto [tap, c] = col[static_cast<std::size_t>(m0 + j)];
                                            return dst + tap * tstride + c * nvl + l0;
                                        });
                            }
                        _mm_sfence();  // the non-temporal stores before the loop's barrier
                        continue;
                    }
                // Tiles of VL written channels (fwd: VL rows of the weight tensor, read a few
                // consecutive elements each while their lines stay in cache) x one reduction
                // channel x every tap: each store run fills whole lines of dst.
                const int64_t lstep = fwd ? VL : std::max<int64_t>(ovalid, 1);
                for (int64_t lb = 0; lb < ovalid; lb += lstep)
                    for (int64_t i = 0; i < red; ++i)
                        for (int64_t tap = 0; tap < ks; ++tap) {
                            const int64_t toff = tap_off[static_cast<std::size_t>(tap)];
                            float* d = dst + tap * tstride + i * nvl;
                            for (int64_t l = lb; l < std::min(lb + lstep, ovalid); ++l) {
                                const int64_t k = fwd ? g * kpg + o0 + l : g * kpg + i, cc = fwd ? i : o0 + l;
                                d[l] = E::load(w[wst.at(k, cc, 0, 0, 0) + toff]);
                            }
                        }
            }
    }

    // fwd and bwd_data: blocked kernels over the plan's phases. Work items are (channel block,
    // chunk of positions of one phase combination); a chunk's positions are sorted into their
    // classes (the in-range taps), blocks of B positions of one class go to the kernel, whose
    // outputs land in the written tensor (f32 channels-last, whole block) or in a staging tile of
    // the chunk ([position][channel]), stored afterwards (transposed in tiles where positions
    // are consecutive in memory: channels-first f32).
    void run_fwd_or_bwd_data(bool fwd) {
        const DataPlan dp = data_plan(p_, c_);
        const bool dw = dp.depthwise;
        const int64_t red = dp.red, och = dp.och, cs = dp.cstride, out_ch = dp.write_ch, ks = c_.ks();
        const Blocking bl = blocking(och);
        const WPack wp{bl, red, ks};
        pack_weights(dp, fwd, wp);
        const float* src = dp.copy ? channels_last(fwd, fwd ? xconv_ : yconv_, cs)
                                   : static_cast<const float*>(fwd ? t_.x.data : t_.y.data);
        T* dst = static_cast<T*>(fwd ? t_.y.data : t_.x.data);
        const Strides dst_st = fwd ? y_strides(p_) : x_strides(p_);
        const bool f32_cl = is_f32_cl(p_);
        const int64_t R0 = dp.rdims[0], R1 = dp.rdims[1], R2 = dp.rdims[2];

        // Channel blocks: general: (group, block of bl.nv vectors of its written channels);
        // depthwise: kDwNV vectors of channels.
        const int64_t dw_vec = cs / VL;
        const int64_t nblocks = dw ? (dw_vec + kDwNV - 1) / kDwNV : p_.groups * bl.blocks;
        const int bmax = dw ? kDwB : kMaxB[bl.nv];

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
        // Work items: (channel block, chunk of positions). Two loop orders, chosen by the
        // estimated traffic beyond L2:
        //  - blocks innermost: a chunk's read window (~64 KiB) stays in cache while every block
        //    of the weights passes over it: the weights are re-read once per chunk;
        //  - positions innermost: one block's weights stay in L2 while the whole read tensor
        //    streams past: the read tensor is re-read once per block (and per phase), and each
        //    output cache line is fetched and written back once per block.
        // Chunks: about 64 KiB of the read tensor's positions with blocks innermost, else about
        // kLongChunk positions (the chunk only bounds the staging tile then); whole rows (q2 runs)
        // where rows are shorter, and at least bmax rows, so that the classes of the row borders
        // fill blocks.
        struct Chunk {
            int64_t combo, begin, end;
        };
        std::vector<Chunk> chunks;
        int64_t chunk = 1;  // the largest
        auto make_chunks = [&](int64_t target) {
            chunks.clear();
            for (std::size_t ci = 0; ci < combos.size(); ++ci) {
                const int64_t row = combos[ci].ph[2]->count, nrows = combos[ci].positions / row;
                const int64_t len =
                    row >= target ? target : std::max(target / row, std::min<int64_t>(bmax, nrows)) * row;
                chunk = std::max(chunk, len);
                for (int64_t b0 = 0; b0 < combos[ci].positions; b0 += len)
                    chunks.push_back({static_cast<int64_t>(ci), b0, std::min(b0 + len, combos[ci].positions)});
            }
            return static_cast<int64_t>(chunks.size());
        };
        const int64_t nchunks0 = make_chunks(std::clamp<int64_t>(65536 / (4 * cs) / bmax * bmax, bmax, 1024));
        const double weight_bytes = 4.0 * static_cast<double>(dw ? ks * cs : wp.group_floats() * p_.groups);
        const double read_bytes = 4.0 * static_cast<double>(dp.read_floats(p_.n));
        const double write_bytes = 4.0 * static_cast<double>(p_.n * dp.wdims[0] * dp.wdims[1] * dp.wdims[2] * out_ch);
        const bool blocks_inner =
            static_cast<double>(nchunks0) * weight_bytes <=
            static_cast<double>(nblocks) * (static_cast<double>(combos.size()) * read_bytes + 2 * write_bytes);
        constexpr int64_t kLongChunk = 512;
        const int64_t nchunks = blocks_inner ? nchunks0 : make_chunks(kLongChunk / bmax * bmax);
        // Chunks in the order of their first written position: the phases of bwd_data that
        // write (and read) the same rows run one after another, while those rows are in cache.
        {
            auto key = [&](const Chunk& ck) {
                const Combo& co = combos[static_cast<std::size_t>(ck.combo)];
                int64_t r = ck.begin, o[3];
                for (int d = 2; d >= 0; --d) {
                    const DimPhase& f = *co.ph[static_cast<std::size_t>(d)];
                    o[d] = f.first + r % f.count * dp.dim[static_cast<std::size_t>(d)].out_step;
                    r /= f.count;
                }
                return ((r * dp.wdims[0] + o[0]) * dp.wdims[1] + o[1]) * dp.wdims[2] + o[2];
            };
            std::stable_sort(chunks.begin(), chunks.end(),
                             [&](const Chunk& a, const Chunk& b) { return key(a) < key(b); });
        }
        const int64_t items = nchunks * nblocks;

#pragma omp parallel
        {
            const std::size_t cu = static_cast<std::size_t>(chunk);
            std::vector<float> stage(cu * kMaxNV * VL);
            std::vector<int64_t> base(cu), doff(cu), order(cu);
            std::vector<int> cls(cu);
            std::vector<int64_t> first, next;
            std::vector<ChanSeg> segs;
            std::vector<int64_t> xoffs;
            std::vector<const float*> wptrs;
            int64_t off[kMaxBAll];
            float* outp[kMaxBAll];
#pragma omp for schedule(static)
            for (int64_t it = 0; it < items; ++it) {
                const int64_t blk = blocks_inner ? it % nblocks : it / nchunks;
                const Chunk& ck = chunks[static_cast<std::size_t>(blocks_inner ? it / nblocks : it % nchunks)];
                const Combo& co = combos[static_cast<std::size_t>(ck.combo)];
                const DimPhase &f0 = *co.ph[0], &f1 = *co.ph[1], &f2 = *co.ph[2];
                // The block: its vectors, first written channel (in the written tensor), valid lanes.
                const int64_t g = dw ? 0 : blk / bl.blocks, b = dw ? blk : blk % bl.blocks;
                const int nv = static_cast<int>(dw ? std::min<int64_t>(kDwNV, dw_vec - b * kDwNV) : bl.nv_of(b));
                const int64_t nvl = nv * VL, wc0 = dw ? b * kDwNV * VL : b * bl.nv * VL;
                const int64_t valid = std::min<int64_t>(nvl, (dw ? p_.c : och) - wc0);
                const int64_t wch0 = dw ? wc0 : g * och + wc0;
                const bool direct = f32_cl && valid == nvl;
                const float* wblk = wpack_ + wp.offset(g, b);
                const int64_t tstride = wp.tap_floats(b);

                // Positions of the chunk: read offset, written offset, class (segment per dim);
                // counters advanced one by one (no divisions per position).
                const int64_t np = ck.end - ck.begin;
                const std::size_t S1 = f1.segs.size(), S2 = f2.segs.size(), ncls = f0.segs.size() * S1 * S2;
                int64_t cn, q0, q1, q2;
                {
                    int64_t r = ck.begin;
                    q2 = r % f2.count, r /= f2.count;
                    q1 = r % f1.count, r /= f1.count;
                    q0 = r % f0.count, cn = r / f0.count;
                }
                auto seg_of = [](const DimPhase& f, int64_t q) {
                    std::size_t k = 0;
                    while (f.segs[k].end <= q) ++k;
                    return k;
                };
                std::size_t k0 = seg_of(f0, q0), k1 = seg_of(f1, q1), k2 = seg_of(f2, q2);
                first.assign(ncls + 1, 0);
                for (int64_t p = 0; p < np; ++p) {
                    const std::size_t u = static_cast<std::size_t>(p);
                    base[u] = (((cn * R0 + q0 * dp.dim[0].in_step) * R1 + q1 * dp.dim[1].in_step) * R2 +
                               q2 * dp.dim[2].in_step) *
                              cs;
                    const auto sl = slots(c_, f0.first + q0 * dp.dim[0].out_step, f1.first + q1 * dp.dim[1].out_step,
                                          f2.first + q2 * dp.dim[2].out_step);
                    doff[u] = dst_st.at(cn, wch0, sl[0], sl[1], sl[2]);
                    cls[u] = static_cast<int>((k0 * S1 + k1) * S2 + k2);
                    ++first[static_cast<std::size_t>(cls[u]) + 1];
                    if (++q2 == f2.segs[k2].end) ++k2;
                    if (k2 == S2) {
                        q2 = 0, k2 = 0;
                        if (++q1 == f1.segs[k1].end) ++k1;
                        if (k1 == S1) {
                            q1 = 0, k1 = 0;
                            if (++q0 == f0.segs[k0].end) ++k0;
                            if (k0 == f0.segs.size()) q0 = 0, k0 = 0, ++cn;
                        }
                    }
                }
                // Counting sort by class (stable: each class in position order).
                for (std::size_t c = 0; c < ncls; ++c) first[c + 1] += first[c];
                next.assign(first.begin(), first.end() - 1);
                for (int64_t p = 0; p < np; ++p) {
                    int64_t& slot = next[static_cast<std::size_t>(cls[static_cast<std::size_t>(p)])];
                    order[static_cast<std::size_t>(slot++)] = p;
                }
                for (std::size_t c = 0; c < ncls; ++c) {
                    if (first[c] == first[c + 1]) continue;
                    // The class's taps (in kernel order) and their read offsets.
                    segs.clear();
                    xoffs.clear();
                    wptrs.clear();
                    for (int t0 : f0.segs[c / (S1 * S2)].taps)
                        for (int t1 : f1.segs[c / S2 % S1].taps)
                            for (int t2 : f2.segs[c % S2].taps) {
                                const auto [r0, a0] = f0.taps[static_cast<std::size_t>(t0)];
                                const auto [r1, a1] = f1.taps[static_cast<std::size_t>(t1)];
                                const auto [r2, a2] = f2.taps[static_cast<std::size_t>(t2)];
                                const int64_t tap = (r0 * c_.ker[1] + r1) * c_.ker[2] + r2;
                                const int64_t toff = ((a0 * R1 + a1) * R2 + a2) * cs;
                                if (dw) {
                                    xoffs.push_back(toff + wch0);
                                    wptrs.push_back(wpack_ + tap * cs + wch0);
                                } else {
                                    segs.push_back({wblk + tap * tstride, toff + g * red, red});
                                }
                            }
                    for (int64_t q = first[c]; q < first[c + 1]; q += bmax) {
                        const int bn = static_cast<int>(std::min<int64_t>(bmax, first[c + 1] - q));
                        for (int j = 0; j < bn; ++j) {
                            const std::size_t u = static_cast<std::size_t>(order[static_cast<std::size_t>(q + j)]);
                            off[j] = base[u];
                            outp[j] = direct ? reinterpret_cast<float*>(dst + doff[u]) : stage.data() + u * nvl;
                        }
                        if (dw)
                            kDw[static_cast<std::size_t>(nv)][static_cast<std::size_t>(bn)](
                                src, xoffs.data(), wptrs.data(), static_cast<int>(xoffs.size()), off, outp);
                        else
                            kChan[static_cast<std::size_t>(nv)][static_cast<std::size_t>(bn)](
                                segs.data(), static_cast<int>(segs.size()), src, off, outp);
                    }
                }
                if (!direct) store_stage(stage.data(), np, nvl, valid, doff.data(), dst, dst_st.channel);
            }
        }
    }

    // Stores a chunk's staging tile (np positions x nvl floats, the first `valid` channels) at
    // the written offsets doff (channel stride cst): transposed in tiles along runs of positions
    // consecutive in memory when the written tensor is f32 channels-first, else one by one.
    void store_stage(const float* stage, int64_t np, int64_t nvl, int64_t valid, const int64_t* doff, T* dst,
                     int64_t cst) const {
        for (int64_t p = 0; p < np;) {
            int64_t len = 1;
            if constexpr (std::is_same_v<T, float>) {
                if (cst != 1)
                    while (p + len < np && doff[p + len] == doff[p] + len) ++len;
                if (len >= 4) {
                    transpose(stage + p * nvl, nvl, len, valid, dst + doff[p], cst);
                    p += len;
                    continue;
                }
            }
            for (int64_t i = p; i < p + len; ++i)
                for (int64_t l = 0; l < valid; ++l) dst[doff[i] + l * cst] = E::store(stage[i * nvl + l]);
            p += len;
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
        const float* x = channels_last(true, xconv_, p_.c);
        const float* dy = channels_last(false, yconv_, p_.k);
        T* dw = static_cast<T*>(t_.w.data);
        const Strides wst = w_strides(p_);
        const int64_t ks = c_.ks(), cbmax = sh.cbmax, cblocks = sh.cblocks, items = sh.items;
        const int64_t slot = sh.slot_floats;
        const int64_t in_sp = c_.in_sp(), out_sp = c_.out_sp();
        const std::vector<int64_t> tap_off = tap_offsets(wst);
        bool taps_contiguous = true;
        for (int64_t tap = 0; tap < ks; ++tap)
            taps_contiguous = taps_contiguous && tap_off[static_cast<std::size_t>(tap)] == tap;
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
        // Chunks of whole output rows (n, od, oh). Each chunk reloads and stores every item's
        // partial sums. Small chunks (at least 64 positions): the chunk's x and dy rows stay in
        // cache while all items pass over them, x is read from memory once. Large chunks (as
        // many positions as keep one K block's dy rows in L2, about 256 KiB) read x once per K
        // block instead (the items of one K block run one after another), and the partial sums
        // once: taken when those are far beyond L2 (over 4 MiB) and the re-reads of x cost at
        // most a quarter of the small chunks' partial-sum traffic (loads and stores). Measured on
        // the ResNet-50 layers (docs/benchmarks.md): the 512-channel layers at AVX-512 gain, the
        // 256-channel ones and the narrower K blocks of AVX2 (4x the re-reads) lose.
        const int64_t rows = p_.n * c_.out[0] * c_.out[1];
        auto rows_for = [&](int64_t positions) {
            return std::max<int64_t>(1, (positions + c_.out[2] - 1) / c_.out[2]);
        };
        const double accum_bytes = 4.0 * static_cast<double>(items * slot);
        const double x_bytes = 4.0 * static_cast<double>(p_.n * in_sp * p_.c);
        const double small_chunks = static_cast<double>((rows + rows_for(64) - 1) / rows_for(64));
        const double x_rereads = static_cast<double>(p_.groups * bl.blocks) * x_bytes;
        const bool large = accum_bytes > 4.0 * 1024 * 1024 && x_rereads <= 0.25 * small_chunks * 2 * accum_bytes;
        const int64_t rows_per_chunk = rows_for(large ? std::max<int64_t>(64, 262144 / (4 * bl.nv * VL)) : 64);
        float* acc = accum_;
#pragma omp parallel
        {
            const int64_t nt = omp_get_num_threads(), tid = omp_get_thread_num();
            const int64_t it0 = items * tid / nt, it1 = items * (tid + 1) / nt;
            std::vector<Seg> segs;
            // Per (kd, kh): the chunk's rows whose input row is in range, as (dy offset, x offset)
            // of their first position (ow = 0, iw = 0, channel 0).
            const int64_t kdh = c_.ker[0] * c_.ker[1];
            std::vector<std::vector<std::array<int64_t, 2>>> rowtab(static_cast<std::size_t>(kdh));
            for (int64_t r0 = 0; r0 < rows; r0 += rows_per_chunk) {
                const int64_t r1 = std::min(rows, r0 + rows_per_chunk);
                for (int64_t t = 0; t < kdh; ++t) {
                    auto& tab = rowtab[static_cast<std::size_t>(t)];
                    tab.clear();
                    for (int64_t row = r0; row < r1; ++row) {
                        const int64_t n = row / (c_.out[0] * c_.out[1]), od = row / c_.out[1] % c_.out[0],
                                      oh = row % c_.out[1];
                        const int64_t id = od * c_.st[0] - c_.pb[0] + t / c_.ker[1] * c_.dil[0];
                        const int64_t ih = oh * c_.st[1] - c_.pb[1] + t % c_.ker[1] * c_.dil[1];
                        if (id < 0 || id >= c_.in[0] || ih < 0 || ih >= c_.in[1]) continue;
                        tab.push_back({(n * out_sp + (od * c_.out[1] + oh) * c_.out[2]) * p_.k,
                                       (n * in_sp + (id * c_.in[1] + ih) * c_.in[2]) * p_.c});
                    }
                }
                for (int64_t it = it0; it < it1; ++it) {
                    const int64_t tap = it % ks, cb = it / ks % cblocks, b = it / ks / cblocks % bl.blocks,
                                  g = it / ks / cblocks / bl.blocks;
                    const int64_t r2k = tap % c_.ker[2];
                    const int nv = static_cast<int>(bl.nv_of(b));
                    const int64_t nvl = nv * VL;
                    const int64_t k0 = b * bl.nv * VL, kvalid = std::min<int64_t>(nvl, kpg - k0);
                    const int64_t c0 = cb * cbmax;
                    const int cn = static_cast<int>(std::min<int64_t>(cbmax, cpg - c0));
                    const auto [olo, ohi] = ow_range[static_cast<std::size_t>(r2k)];
                    segs.clear();
                    if (ohi > olo) {
                        const float* dyb = dy + olo * p_.k + g * kpg + k0;
                        const float* xb = x + (olo * c_.st[2] - c_.pb[2] + r2k * c_.dil[2]) * p_.c + g * cpg + c0;
                        for (const auto& [dyo, xo] : rowtab[static_cast<std::size_t>(tap / c_.ker[2])])
                            segs.push_back({dyb + dyo, xb + xo, ohi - olo});
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
                if constexpr (std::is_same_v<T, float>) {
                    // Transposed in tiles of kTile filters: per tap, the C block's channels when
                    // they are contiguous in dw (channels-last), else per channel the taps when
                    // those are (channels-first, ks <= kTile).
                    if (wst.channel == 1) {
                        for (int64_t tap = 0; tap < ks; ++tap)
                            for (int64_t l0 = 0; l0 < kvalid; l0 += kTile)
                                transpose_tile(a + tap * slot + l0, nvl, static_cast<int>(cn),
                                               static_cast<int>(std::min<int64_t>(kTile, kvalid - l0)), [&](int jj) {
                                                   return dw + wst.at(g * kpg + k0 + l0 + jj, c0, 0, 0, 0) +
                                                          tap_off[static_cast<std::size_t>(tap)];
                                               });
                        continue;
                    }
                    if (taps_contiguous && ks <= kTile) {
                        for (int64_t j = 0; j < cn; ++j)
                            for (int64_t l0 = 0; l0 < kvalid; l0 += kTile)
                                transpose_tile(a + j * nvl + l0, slot, static_cast<int>(ks),
                                               static_cast<int>(std::min<int64_t>(kTile, kvalid - l0)), [&](int jj) {
                                                   return dw + wst.at(g * kpg + k0 + l0 + jj, c0 + j, 0, 0, 0);
                                               });
                        continue;
                    }
                }
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
