// Inner kernels of cpu.winograd_f2x3 / cpu.winograd_f4x3: the SIMD vector type, the tile
// transforms of F(2x2,3x3) and F(4x4,3x3) and the transform-domain GEMM micro-kernel.
//
// Everything here works on vectors of kVW floats (GCC vector extensions): 16 lanes where the
// compiler targets AVX-512, 8 with AVX/AVX2, 4 otherwise (SSE2). One source serves every width:
// it is compiled once per instruction-set level (cpu/level.hpp), each copy at its level's width.
//
// The transforms are written as short sums whose rounding depth (the number of roundings on any
// path from an input to a result) is what docs/algorithms-winograd.md counts in the error bound:
// change an expression here and the constants in winograd.cpp (kDepth*) must follow.
#pragma once

#include <cstdint>
#include <utility>

#include "cpu/level.hpp"

namespace convtune::cpu::CONVTUNE_ISA_NS::wino {

#if defined(CONVTUNE_WINOGRAD_VW)  // to exercise another width's code path (testing only)
inline constexpr int kVW = CONVTUNE_WINOGRAD_VW;
#elif defined(__AVX512F__)
inline constexpr int kVW = 16;
#elif defined(__AVX__)
inline constexpr int kVW = 8;
#else
inline constexpr int kVW = 4;
#endif

typedef float vf __attribute__((vector_size(kVW * sizeof(float))));
// Same vector, any alignment: for loads and stores at arbitrary float addresses.
typedef float vf_u __attribute__((vector_size(kVW * sizeof(float)), aligned(alignof(float)), may_alias));

// The transforms are small and called in hot loops: GCC's heuristics leave some of them as calls
// (vectors then travel through memory), so they are forced inline.
#define CONVTUNE_WINO_INLINE inline __attribute__((always_inline))

CONVTUNE_WINO_INLINE vf load(const float* p) { return *reinterpret_cast<const vf_u*>(p); }
CONVTUNE_WINO_INLINE void store(float* p, vf v) { *reinterpret_cast<vf_u*>(p) = v; }
// Broadcast. (Not `vf{} + s`: 0 + s is not an identity for s = -0, so that form costs an add.)
template <std::size_t... I> inline vf splat_(float s, std::index_sequence<I...>) { return vf{((void)I, s)...}; }
inline vf splat(float s) { return splat_(s, std::make_index_sequence<kVW>{}); }

// Register blocking of the micro-kernel: MR output channels (two vectors) by NR tiles.
// 2*NR accumulators + 2 filter vectors + 1 broadcast fit the register file: 15 of 16 (AVX2,
// SSE), 27 of 32 (AVX-512).
inline constexpr int kMR = 2 * kVW;
inline constexpr int kNR = kVW == 16 ? 12 : 6;

// M[t][0..MR) (+)= sum_c U[c][0..MR) * V[c][t] for t < NT (NT <= NR); row t of M at M + t * ldm.
// U: packed filter panel, MR floats per reduction index c (c = 0 .. cv_count*kVW).
// V: packed input chunk, [cv][t][lane]: V[c][t] sits at (c / kVW) * NR * kVW + t * kVW + c % kVW.
// ACC: continue the sums already in M (a reduction split into blocks of c gives bitwise the same
// result as one pass). The sum over c is sequential, one FMA per term: rounding depth = C.
template <bool ACC, int NT = kNR>
inline void gemm_kernel(int64_t cv_count, const float* __restrict U, const float* __restrict V, float* __restrict M,
                        int64_t ldm) {
    vf a0[NT], a1[NT];
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
        a0[t] = ACC ? load(M + t * ldm) : vf{};
        a1[t] = ACC ? load(M + t * ldm + kVW) : vf{};
    }
    for (int64_t cv = 0; cv < cv_count; ++cv) {
        const float* u = U + cv * kVW * kMR;
        const float* v = V + cv * kNR * kVW;
#pragma GCC unroll 16
        for (int l = 0; l < kVW; ++l) {
            const vf u0 = load(u + l * kMR), u1 = load(u + l * kMR + kVW);
#pragma GCC unroll 16
            for (int t = 0; t < NT; ++t) {
                const vf b = splat(v[t * kVW + l]);
                a0[t] += u0 * b;
                a1[t] += u1 * b;
            }
        }
    }
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
        store(M + t * ldm, a0[t]);
        store(M + t * ldm + kVW, a1[t]);
    }
}

// The same for the first `tiles` (1..NR) columns of a chunk: the last chunk of a block is
// usually partial, and its empty columns would cost as much as full ones (and are not read).
template <bool ACC, int NT = kNR>
inline void gemm_kernel_n(int tiles, int64_t cv_count, const float* U, const float* V, float* M, int64_t ldm) {
    if constexpr (NT > 1) {
        if (tiles < NT) return gemm_kernel_n<ACC, NT - 1>(tiles, cv_count, U, V, M, ldm);
    }
    gemm_kernel<ACC, NT>(cv_count, U, V, M, ldm);
}

// In-register transpose of a kVW x kVW block held as kVW vectors (r[i][j] <- r[j][i]):
// log2(kVW) stages; the stage of distance d swaps the off-diagonal d x d sub-blocks of every
// 2d x 2d block. Used to move between a spatial row (contiguous in NCHW) and a channel vector.
typedef int vi __attribute__((vector_size(kVW * sizeof(int))));
template <int d, std::size_t... I> constexpr vi transpose_mask_lo(std::index_sequence<I...>) {
    return vi{(((int)I / d) % 2 == 0 ? (int)I : kVW + (int)I - d)...};
}
template <int d, std::size_t... I> constexpr vi transpose_mask_hi(std::index_sequence<I...>) {
    return vi{(((int)I / d) % 2 == 0 ? (int)I + d : kVW + (int)I)...};
}
template <int d> CONVTUNE_WINO_INLINE void transpose_stage(vf* r) {
    constexpr vi lo = transpose_mask_lo<d>(std::make_index_sequence<kVW>{});
    constexpr vi hi = transpose_mask_hi<d>(std::make_index_sequence<kVW>{});
#pragma GCC unroll 16
    for (int i = 0; i < kVW; ++i)
        if ((i & d) == 0) {
            const vf x = r[i], y = r[i + d];
            r[i] = __builtin_shuffle(x, y, lo);
            r[i + d] = __builtin_shuffle(x, y, hi);
        }
    if constexpr (d > 1) transpose_stage<d / 2>(r);
}
CONVTUNE_WINO_INLINE void transpose(vf* r) { transpose_stage<kVW / 2>(r); }

// ---------------------------------------------------------------------------------------------
// Tile transforms. Template parameter m is the output tile size (2 or 4); alpha = m + 2.
// 1-D transforms act on arrays of alpha (or 3, or m) vectors; the 2-D transform X^T d X is the
// 1-D transform applied along one axis and then along the other.

template <int m> struct Wino;

// F(2,3), points 0, 1, -1, inf (Lavin & Gray):
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
//   G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
//   A^T = [1 1 1 0; 0 1 -1 -1]
template <> struct Wino<2> {
    static constexpr int m = 2, alpha = 4;
    // Rounding depth per 1-D pass (see the header comment).
    static constexpr int depth_b = 1, depth_g = 2, depth_a = 2;
    // Per-row factors of G kept out of the integer part (all 1 here: 1/2 is applied exactly).
    static constexpr double g_scale[alpha] = {1, 1, 1, 1};
    static CONVTUNE_WINO_INLINE void bt(const vf* d, vf* v) {
        v[0] = d[0] - d[2];
        v[1] = d[1] + d[2];
        v[2] = d[2] - d[1];
        v[3] = d[1] - d[3];
    }
    static CONVTUNE_WINO_INLINE void g(const vf* w, vf* u) {
        const vf s = w[0] + w[2];
        u[0] = w[0];
        u[1] = (s + w[1]) * 0.5f;
        u[2] = (s - w[1]) * 0.5f;
        u[3] = w[2];
    }
    static CONVTUNE_WINO_INLINE void at(const vf* x, vf* y) {
        y[0] = x[0] + x[1] + x[2];
        y[1] = x[1] - x[2] - x[3];
    }
};

// F(4,3), points 0, 1/2, -1/2, 2, -2, inf. Against the common 0, +-1, +-2 this keeps the same
// sparsity (same operation count) and exactly representable constants in B^T and A^T, and cuts
// the error growth factor of the worst output from 16 to 7.33 per dimension (see the docs):
//   B^T = [1   0    -17/4  0     1  0;
//          0  -2    -4     1/2   1  0;
//          0   2    -4    -1/2   1  0;
//          0  -1/2  -1/4   2     1  0;
//          0   1/2  -1/4  -2     1  0;
//          0   1     0    -17/4  0  1]
//   G   = diag(1, -2/15, -2/15, 1/30, 1/30, 1) * [1 0 0; 4 2 1; 4 -2 1; 1 2 4; 1 -2 4; 0 0 1]
//   A^T = [1 1    1    1  1  0;
//          0 1/2 -1/2  2 -2  0;
//          0 1/4  1/4  4  4  0;
//          0 1/8 -1/8  8 -8  1]
// The 1/15 and 1/30 factors are not binary fractions: the filter transform applies the integer
// matrix in both dimensions and then one rounded factor s_i*s_j per transform-domain element.
template <> struct Wino<4> {
    static constexpr int m = 4, alpha = 6;
    static constexpr int depth_b = 2, depth_g = 2, depth_a = 3;
    static constexpr double g_scale[alpha] = {1, -2.0 / 15, -2.0 / 15, 1.0 / 30, 1.0 / 30, 1};
    static CONVTUNE_WINO_INLINE void bt(const vf* d, vf* v) {
        const vf t0 = d[4] - 4.0f * d[2];
        const vf t1 = 0.5f * d[3] - 2.0f * d[1];
        const vf t2 = d[4] - 0.25f * d[2];
        const vf t3 = 2.0f * d[3] - 0.5f * d[1];
        v[0] = (d[0] + d[4]) - 4.25f * d[2];
        v[1] = t0 + t1;
        v[2] = t0 - t1;
        v[3] = t2 + t3;
        v[4] = t2 - t3;
        v[5] = (d[1] + d[5]) - 4.25f * d[3];
    }
    static CONVTUNE_WINO_INLINE void g(const vf* w, vf* u) {  // the integer part of G
        const vf p = 4.0f * w[0] + w[2];
        const vf q = w[0] + 4.0f * w[2];
        const vf h = 2.0f * w[1];
        u[0] = w[0];
        u[1] = p + h;
        u[2] = p - h;
        u[3] = q + h;
        u[4] = q - h;
        u[5] = w[2];
    }
    static CONVTUNE_WINO_INLINE void at(const vf* x, vf* y) {
        const vf a = x[1] + x[2], b = x[1] - x[2], c = x[3] + x[4], d = x[3] - x[4];
        y[0] = (a + c) + x[0];
        y[1] = 0.5f * b + 2.0f * d;
        y[2] = 0.25f * a + 4.0f * c;
        y[3] = 0.125f * b + (8.0f * d + x[5]);
    }
};

// 2-D input transform of one tile: d(a, b) = src[a * row_stride + b * kVW] (a vector of kVW
// channels), result element (i, j) stored at dst[(i * alpha + j) * xi_stride].
template <int m>
CONVTUNE_WINO_INLINE void input_tile(const float* src, int64_t row_stride, float* dst, int64_t xi_stride) {
    constexpr int A = Wino<m>::alpha;
    vf t[A][A];  // t[i][b]: transform along a, column b
    for (int b = 0; b < A; ++b) {
        vf col[A], r[A];
        for (int a = 0; a < A; ++a) col[a] = load(src + a * row_stride + b * kVW);
        Wino<m>::bt(col, r);
        for (int i = 0; i < A; ++i) t[i][b] = r[i];
    }
    for (int i = 0; i < A; ++i) {
        vf r[A];
        Wino<m>::bt(t[i], r);
        for (int j = 0; j < A; ++j) store(dst + (i * A + j) * xi_stride, r[j]);
    }
}

// 2-D filter transform of one 3x3 filter per lane: g(r, s) = src[(r * 3 + s) * kVW]; element
// (i, j) = scale[i * alpha + j] * (G' g G'^T)(i, j) stored at dst[(i * alpha + j) * xi_stride].
template <int m>
CONVTUNE_WINO_INLINE void filter_tile(const float* src, const float* scale, float* dst, int64_t xi_stride) {
    constexpr int A = Wino<m>::alpha;
    vf t[A][3];
    for (int s = 0; s < 3; ++s) {
        vf col[3], r[A];
        for (int q = 0; q < 3; ++q) col[q] = load(src + (q * 3 + s) * kVW);
        Wino<m>::g(col, r);
        for (int i = 0; i < A; ++i) t[i][s] = r[i];
    }
    for (int i = 0; i < A; ++i) {
        vf r[A];
        Wino<m>::g(t[i], r);
        for (int j = 0; j < A; ++j) store(dst + (i * A + j) * xi_stride, r[j] * scale[i * A + j]);
    }
}

// 2-D output transform: x(i, j) = src[(i * alpha + j) * xi_stride]; y(a, b) -> out[a * m + b].
template <int m>
CONVTUNE_WINO_INLINE void output_tile(const float* src, int64_t xi_stride, vf* out) {
    constexpr int A = Wino<m>::alpha;
    vf t[m][A];
    for (int j = 0; j < A; ++j) {
        vf col[A], r[m];
        for (int i = 0; i < A; ++i) col[i] = load(src + (i * A + j) * xi_stride);
        Wino<m>::at(col, r);
        for (int a = 0; a < m; ++a) t[a][j] = r[a];
    }
    for (int a = 0; a < m; ++a) {
        vf r[m];
        Wino<m>::at(t[a], r);
        for (int b = 0; b < m; ++b) out[a * m + b] = r[b];
    }
}

}  // namespace convtune::cpu::CONVTUNE_ISA_NS::wino
