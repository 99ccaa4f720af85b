// cpu.im2col_gemm and cpu.im2col_gemm.tf32 — convolution as matrix multiplication over an
// explicit column matrix (Chellapilla et al. 2006, "High performance convolutional neural
// networks for document processing"; Caffe's im2col/col2im; Jia 2014).
//
// Computes all three directions of every valid problem (1-D/2-D/3-D, groups, stride, dilation,
// asymmetric and negative end padding, both layouts) with f32/f16/bf16 storage. Per image n and
// group g, with R = C/g * kernel_spatial rows of the column matrix and P output pixels:
//   fwd        Y[n,g]  (K/g x P)   = W[g] (K/g x R) * col(X[n,g]) (R x P)
//   bwd_data   dX[n,g]             = col2im( W[g]^T (R x K/g) * dY[n,g] (K/g x P) )
//   bwd_filter dW[g]   (K/g x R)   = sum_n dY[n,g] (K/g x P) * col(X[n,g])^T (P x R)
// Channels-first tensors give the column matrix as R rows (c, kernel tap) of P pixels, so a
// stride-1 row is a contiguous copy of an input row; channels-last tensors give it transposed,
// P rows of (kernel tap, c) that are contiguous runs of C/g channels. In both layouts the weights
// are already the row-major K/g x R matrix the GEMM needs, and the output tile is a strided block
// of the output tensor, so only the column matrix is ever materialised (Eigen::Map over raw
// memory, Eigen's blocked GEMM).
//
// Tiling and parallelism: the column matrix is never built for a whole batch. Output pixels of all
// images, flattened as (n, pixel), are cut into tiles: equal parts of one image, or whole small
// images put together (so that the weights, which Eigen repacks for every GEMM call, are
// amortised over enough pixels). A tile holds about kTileFloats / rows pixels (a column tile of
// half an L2) but no fewer than 128 (256 for bwd_data). The work is cut into jobs whose outputs are
// disjoint:
//   fwd        (pixel tile, g), plus blocks of filters when there are fewer than kMinJobs tiles:
//              then all threads build each column tile together in one shared buffer and share
//              out its filter blocks, instead of every block rebuilding the same tile
//   bwd_data   (group of images, g, block of input channels): the job walks the pixel tiles of its
//              images in order and scatters (col2im) only into its own images and channels, so no
//              two jobs touch one element
//   bwd_filter (g, block of input channels, block of filters): the job owns its block of dW and
//              sums over the pixel tiles of all images in order
// Blocks are added only when there are fewer than kMinJobs jobs without them, and are never
// thinner than kMinGemmDim filters or column-matrix rows. The cut is a function of the problem
// alone and every output element is produced by one job in a fixed order, so the result is
// bitwise identical run to run AND for any thread count. Jobs are spread over OpenMP threads;
// each thread calls Eigen single-threaded (its OpenMP nthreads ICV is set to 1 inside the region,
// and Eigen never nests inside an active team) so there is no oversubscription.
//
// No-copy path: a 1x1 kernel with stride 1 and no padding (pointwise) has col(X) = X: fwd and
// bwd_filter read the input tensor directly (f32 without TF32 rounding; channels-first only for
// tiles inside one image), and bwd_data writes the GEMM result straight into dX (col2im is the
// identity).
//
// Workspace (bytes) = 64 (alignment) + 4 * (Wpack + Shared + slots * slot), where
//   Wpack  = K * C/g * kernel_spatial f32 copy of the weights, needed when they must be converted
//            (f16/bf16), rounded (tf32) or, for channels-last bwd_data split into channel blocks,
//            reordered to (group, channel block, k, tap, c); 0 otherwise.
//   Shared = R*T, the shared column tile of fwd with filter blocks (0 otherwise, or no-copy).
//   slots  = min(omp_get_max_threads(), jobs): one scratch area per thread; run() uses as many
//            threads as the workspace it is given has slots for.
//   slot   = fwd:        R*T (column tile; 0 when shared or no-copy) + Kb*T (f32 output tile, for
//                        f16/bf16 or channels-first tiles of several images)
//            bwd_data:   Cb*k*T (column tile, 0 on the no-copy path) + K/g*T (dY tile in f32, unless
//                        f32 without TF32 read in place) + Cb*in_spatial*Ti (f32 accumulator of the
//                        job's dX block, f16/bf16 only)
//            bwd_filter: Cb*k*T (column tile, 0 on the no-copy path) + Kb*T (dY tile in f32, unless
//                        f32 without TF32 read in place) + Kb*Cb*k (f32 accumulator of the dW block)
//   with k = kernel_spatial, T the most pixels in a tile, Ti the images in a tile, Cb/Kb the
//   channel/filter block sizes, each term rounded up to 16 floats.
//
// Numerics: f16/bf16 values are widened to f32 exactly while building columns and packing
// weights; products are accumulated in f32 and each f16/bf16 output is rounded once to its
// storage type (an f32 output is stored as accumulated).
// Every output element is a sum of L products evaluated as some summation tree in f32 (Eigen's
// blocked kernel, plus col2im's additions for bwd_data, plus the pixel-tile accumulation of
// bwd_filter); any tree of L leaves has depth <= L, so |error| <= gamma_L * sum|a*b| with
// gamma_L = L*u/(1-L*u), u = 2^-24. L = C/g*k (fwd), K/g*taps (bwd_data, taps = the most kernel
// taps that reach one input element: prod ceil(k_i / (s_i / gcd(s_i, d_i)))), N*out_spatial
// (bwd_filter). cpu.im2col_gemm.tf32 rounds both GEMM operands to TF32 (10-bit mantissa,
// u_t = 2^-11) first, adding (1+u_t)^2 - 1 <= 2*u_t + u_t^2 relative perturbation per product.
// error_bound() = b + u_o*(1+b), b = gamma_L (plus the TF32 terms), u_o = 0 for f32 and the
// storage unit roundoff for f16/bf16. The derivation is in docs/algorithms-im2col_gemm.md.
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "convtune/numeric.hpp"
#include "convtune/tensor.hpp"
#include "cpu/level.hpp"
#include "cpu/elem.hpp"

namespace convtune::cpu::CONVTUNE_ISA_NS {

namespace {

using cpu::dispatch_dtype;

// Fewest jobs a problem is cut into when batch x groups x tiles alone give fewer (fixed, not the
// thread count, so that results do not depend on the thread count).
constexpr int64_t kMinJobs = 16;
// Blocks of filters or of column-matrix rows are cut no smaller than this: a thinner GEMM runs
// far below Eigen's speed, which costs more than idle threads.
constexpr int64_t kMinGemmDim = 64;
// Floats of one column tile: 256 KiB, half of a 512 KiB L2 (Eigen repacks the tile in blocks).
constexpr int64_t kTileFloats = 64 * 1024;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t m) { return ceil_div(a, m) * m; }

// ---------------------------------------------------------------------------------------------
// Geometry with the spatial dims right-aligned in 3 slots (slot 2 is always the innermost), so
// that 1-D and 2-D problems use the same loops as 3-D ones.
struct Geo {
    int64_t n = 1, C = 1, K = 1, G = 1, cpg = 1, kpg = 1;
    int64_t in[3]{1, 1, 1}, out[3]{1, 1, 1}, ker[3]{1, 1, 1}, st[3]{1, 1, 1}, dl[3]{1, 1, 1}, pb[3]{0, 0, 0};
    int64_t I = 1, P = 1, RS = 1;
    bool cl = false;  // channels-last
};

Geo make_geo(const ConvProblem& p) {
    Geo g;
    g.n = p.n;
    g.C = p.c;
    g.K = p.k;
    g.G = p.groups;
    g.cpg = p.c_per_group();
    g.kpg = p.k_per_group();
    const int shift = 3 - p.spatial_dims;
    for (int i = 0; i < p.spatial_dims; ++i) {
        const auto u = static_cast<std::size_t>(i);
        const int d = i + shift;
        g.in[d] = p.in[u];
        g.out[d] = p.out(i);
        g.ker[d] = p.kernel[u];
        g.st[d] = p.stride[u];
        g.dl[d] = p.dilation[u];
        g.pb[d] = p.pad_begin[u];
    }
    g.I = g.in[0] * g.in[1] * g.in[2];
    g.P = g.out[0] * g.out[1] * g.out[2];
    g.RS = g.ker[0] * g.ker[1] * g.ker[2];
    g.cl = p.layout == Layout::nhwc;
    return g;
}

// One kernel tap: input offset i = o*s + off per dim, and the output range [lo, hi) whose tap
// lands inside the input.
struct Tap {
    int64_t off[3], lo[3], hi[3];
};

std::vector<Tap> make_taps(const Geo& g) {
    std::vector<Tap> taps(static_cast<std::size_t>(g.RS));
    std::size_t t = 0;
    for (int64_t r0 = 0; r0 < g.ker[0]; ++r0)
        for (int64_t r1 = 0; r1 < g.ker[1]; ++r1)
            for (int64_t r2 = 0; r2 < g.ker[2]; ++r2, ++t) {
                const int64_t rr[3] = {r0, r1, r2};
                for (int d = 0; d < 3; ++d) {
                    const int64_t off = rr[d] * g.dl[d] - g.pb[d];
                    taps[t].off[d] = off;
                    taps[t].lo[d] = off >= 0 ? 0 : ceil_div(-off, g.st[d]);
                    const int64_t last = g.in[d] - 1 - off;  // o*s <= last
                    taps[t].hi[d] = last < 0 ? 0 : std::min(g.out[d], last / g.st[d] + 1);
                    taps[t].lo[d] = std::min(taps[t].lo[d], taps[t].hi[d]);
                }
            }
    return taps;
}

// Visits the pixels [q0, q0+len) of the output grids of all images, flattened as (n, o0, o1, o2),
// as runs along the innermost dim: f(j, n, o0, o1, o2, run) for the pixels j..j+run-1 of the
// tile, which are (n, o0, o1, o2..o2+run-1).
template <class F>
void for_each_run(const Geo& g, int64_t q0, int64_t len, F&& f) {
    int64_t n = q0 / g.P;
    const int64_t p = q0 % g.P;
    int64_t o2 = p % g.out[2];
    const int64_t q = p / g.out[2];
    int64_t o1 = q % g.out[1], o0 = q / g.out[1];
    for (int64_t j = 0; j < len;) {
        const int64_t run = std::min(len - j, g.out[2] - o2);
        f(j, n, o0, o1, o2, run);
        j += run;
        o2 = 0;
        if (++o1 == g.out[1]) {
            o1 = 0;
            if (++o0 == g.out[0]) {
                o0 = 0;
                ++n;
            }
        }
    }
}

inline bool outside(const Tap& tp, int64_t o0, int64_t o1) {
    return o0 < tp.lo[0] || o0 >= tp.hi[0] || o1 < tp.lo[1] || o1 >= tp.hi[1];
}
inline int64_t in_row(const Geo& g, const Tap& tp, int64_t o0, int64_t o1) {
    return ((o0 * g.st[0] + tp.off[0]) * g.in[1] + (o1 * g.st[1] + tp.off[1])) * g.in[2];
}

// ---------------------------------------------------------------------------------------------
// Column building (im2col) and scattering back (col2im) for the tile of pixels [q0, q0+len).
// `xc` points at channel c0 of image 0 (images are g.C * g.I elements apart in both layouts);
// `cvt` widens a stored value to f32 (and rounds it to TF32 for the .tf32 variant).

// Channels-first: rows (c, tap) of `len` pixels, row stride len.
template <class T, class Cvt>
void im2col_cf(const Geo& g, const Tap* taps, const T* xc, int64_t nc, int64_t q0, int64_t len, float* col, Cvt cvt) {
    const int64_t s2 = g.st[2];
    for (int64_t c = 0; c < nc; ++c) {
        for (int64_t r = 0; r < g.RS; ++r) {
            const Tap& tp = taps[r];
            float* row = col + (c * g.RS + r) * len;
            for_each_run(g, q0, len, [&](int64_t j, int64_t n, int64_t o0, int64_t o1, int64_t o2, int64_t run) {
                float* d = row + j - o2;  // d[o] is output pixel o2 = o of this run
                if (outside(tp, o0, o1)) {
                    std::fill(d + o2, d + o2 + run, 0.0f);
                    return;
                }
                const T* src = xc + (n * g.C + c) * g.I + in_row(g, tp, o0, o1) + tp.off[2];
                const int64_t a = std::clamp(tp.lo[2], o2, o2 + run), b = std::clamp(tp.hi[2], a, o2 + run);
                std::fill(d + o2, d + a, 0.0f);
                if (s2 == 1) {
                    for (int64_t o = a; o < b; ++o) d[o] = cvt(src[o]);
                } else {
                    for (int64_t o = a; o < b; ++o) d[o] = cvt(src[o * s2]);
                }
                std::fill(d + b, d + o2 + run, 0.0f);
            });
        }
    }
}

// Channels-first col2im: adds rows (c, tap) of `len` pixels onto acc, whose image n (n >= n_base)
// starts at acc + (n - n_base) * acc_img with channel stride g.I.
void col2im_cf(const Geo& g, const Tap* taps, const float* col, int64_t nc, int64_t q0, int64_t len, float* acc,
               int64_t acc_img, int64_t n_base) {
    const int64_t s2 = g.st[2];
    for (int64_t c = 0; c < nc; ++c) {
        for (int64_t r = 0; r < g.RS; ++r) {
            const Tap& tp = taps[r];
            const float* row = col + (c * g.RS + r) * len;
            for_each_run(g, q0, len, [&](int64_t j, int64_t n, int64_t o0, int64_t o1, int64_t o2, int64_t run) {
                if (outside(tp, o0, o1)) return;
                float* dst = acc + (n - n_base) * acc_img + c * g.I + in_row(g, tp, o0, o1) + tp.off[2];
                const int64_t a = std::clamp(tp.lo[2], o2, o2 + run), b = std::clamp(tp.hi[2], a, o2 + run);
                const float* s = row + j - o2;
                if (s2 == 1) {
                    for (int64_t o = a; o < b; ++o) dst[o] += s[o];
                } else {
                    for (int64_t o = a; o < b; ++o) dst[o * s2] += s[o];
                }
            });
        }
    }
}

// Channels-last: rows of `len` pixels, each (tap, c) with nc channels per tap; the input's pixel
// stride is g.C.
template <class T, class Cvt>
void im2col_cl(const Geo& g, const Tap* taps, const T* xc, int64_t nc, int64_t q0, int64_t len, float* col, Cvt cvt) {
    const int64_t rowlen = g.RS * nc;
    for_each_run(g, q0, len, [&](int64_t j, int64_t n, int64_t o0, int64_t o1, int64_t o2, int64_t run) {
        const T* xn = xc + n * g.I * g.C;
        for (int64_t o = o2; o < o2 + run; ++o) {
            float* d = col + (j + o - o2) * rowlen;
            for (int64_t r = 0; r < g.RS; ++r, d += nc) {
                const Tap& tp = taps[r];
                if (outside(tp, o0, o1) || o < tp.lo[2] || o >= tp.hi[2]) {
                    std::fill(d, d + nc, 0.0f);
                    continue;
                }
                const T* src = xn + (in_row(g, tp, o0, o1) + o * g.st[2] + tp.off[2]) * g.C;
                for (int64_t c = 0; c < nc; ++c) d[c] = cvt(src[c]);
            }
        }
    });
}

// Channels-last col2im: adds rows of `len` pixels of (tap, c) onto acc, whose image n starts at
// acc + (n - n_base) * acc_img with pixel stride ps and channel stride 1.
void col2im_cl(const Geo& g, const Tap* taps, const float* col, int64_t nc, int64_t q0, int64_t len, float* acc,
               int64_t ps, int64_t acc_img, int64_t n_base) {
    const int64_t rowlen = g.RS * nc;
    for_each_run(g, q0, len, [&](int64_t j, int64_t n, int64_t o0, int64_t o1, int64_t o2, int64_t run) {
        float* an = acc + (n - n_base) * acc_img;
        for (int64_t o = o2; o < o2 + run; ++o) {
            const float* s = col + (j + o - o2) * rowlen;
            for (int64_t r = 0; r < g.RS; ++r, s += nc) {
                const Tap& tp = taps[r];
                if (outside(tp, o0, o1) || o < tp.lo[2] || o >= tp.hi[2]) continue;
                float* dst = an + (in_row(g, tp, o0, o1) + o * g.st[2] + tp.off[2]) * ps;
                for (int64_t c = 0; c < nc; ++c) dst[c] += s[c];
            }
        }
    });
}

// rows x cols block copy with conversion.
template <class S, class D, class Cvt>
void copy2d(const S* src, int64_t sld, int64_t rows, int64_t cols, D* dst, int64_t dld, Cvt cvt) {
    for (int64_t i = 0; i < rows; ++i) {
        const S* s = src + i * sld;
        D* d = dst + i * dld;
        for (int64_t j = 0; j < cols; ++j) d[j] = cvt(s[j]);
    }
}

// ---------------------------------------------------------------------------------------------
// GEMM on raw row-major buffers through Eigen maps (no copies beyond Eigen's own packing).
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Ld = Eigen::OuterStride<>;
using MapM = Eigen::Map<RowMat, Eigen::Unaligned, Ld>;
using MapC = Eigen::Map<const RowMat, Eigen::Unaligned, Ld>;

MapM mat(float* p, int64_t rows, int64_t cols, int64_t ld) { return MapM(p, rows, cols, Ld(ld)); }
MapC mat(const float* p, int64_t rows, int64_t cols, int64_t ld) { return MapC(p, rows, cols, Ld(ld)); }

// ---------------------------------------------------------------------------------------------
// The plan: how a problem is cut into tiles, blocks and jobs, and the scratch each thread needs.
struct Range {
    int64_t size = 1, count = 1;  // block size (the last block may be shorter) and block count
    int64_t begin(int64_t b) const { return b * size; }
    int64_t len(int64_t b, int64_t total) const { return std::min(size, total - b * size); }
};

// `want` blocks of `total`, each at least `min_size` long (when total allows), sized in multiples
// of 8 when that keeps the count.
Range split(int64_t total, int64_t want, int64_t min_size) {
    want = std::clamp<int64_t>(want, 1, std::max<int64_t>(1, total / std::max<int64_t>(1, min_size)));
    Range r;
    r.size = ceil_div(total, want);
    if (r.size >= 8 && ceil_div(total, round_up(r.size, 8)) == want) r.size = round_up(r.size, 8);
    r.count = ceil_div(total, r.size);
    return r;
}

// Pixel tiles over the flattened (image, output pixel) axis. A tile is either part of one image
// (imgs == 1: the image is cut into in_img.count equal tiles) or whole images (imgs > 1: groups
// of imgs images, the last group maybe smaller); tiles never hold part of an image and more.
struct Tiling {
    int64_t N = 1, P = 1;
    int64_t imgs = 1;
    Range in_img{1, 1};  // set by make_tiling
    struct Tile {
        int64_t n0, nimg, q0, len;  // first image, images, first flattened pixel, pixels
    };
    int64_t groups() const { return ceil_div(N, imgs); }
    int64_t per_group() const { return in_img.count; }
    int64_t count() const { return groups() * per_group(); }
    int64_t max_len() const { return imgs > 1 ? imgs * P : in_img.size; }
    Tile tile(int64_t t) const {
        const int64_t grp = t / in_img.count, i = t % in_img.count;
        const int64_t n0 = grp * imgs, nimg = std::min(imgs, N - n0);
        return {n0, nimg, n0 * P + in_img.begin(i), nimg == 1 ? in_img.len(i, P) : nimg * P};
    }
};

// Calls f(n, p0, len, off) for each image of a tile: pixels [p0, p0+len) of image n are the
// tile's columns [off, off+len).
template <class F>
void for_each_image(const Tiling::Tile& t, int64_t P, F&& f) {
    if (t.nimg == 1) {
        f(t.n0, t.q0 - t.n0 * P, t.len, int64_t{0});
        return;
    }
    for (int64_t i = 0; i < t.nimg; ++i) f(t.n0 + i, int64_t{0}, P, i * P);
}

// Tiles of about kTileFloats / rows pixels, but no fewer than min_tile: each GEMM call repacks the
// weights, which must be amortised over enough pixels. Small images are put together into one
// tile when `span` allows (where a tile of several images costs no extra copy, or saves more).
Tiling make_tiling(int64_t N, int64_t P, int64_t rows, int64_t min_tile, bool span) {
    Tiling t;
    t.N = N;
    t.P = P;
    const int64_t want = std::max<int64_t>(min_tile, kTileFloats / std::max<int64_t>(1, rows));
    if (want >= P) {
        t.in_img = {P, 1};
        if (!span) return t;  // one image per tile
        t.imgs = std::clamp<int64_t>(want / P, 1, N);
        t.imgs = ceil_div(N, ceil_div(N, t.imgs));  // equal groups
    } else {
        t.in_img.size = ceil_div(P, ceil_div(P, want));  // equal tiles
        t.in_img.count = ceil_div(P, t.in_img.size);
    }
    return t;
}

struct Plan {
    Geo g;
    Direction dir = Direction::fwd;
    bool pointwise = false;   // 1x1, stride 1, no padding: col(X) = X
    bool direct_in = false;   // f32 without TF32: GEMM operands may be read straight from the tensors
    bool direct_out = false;  // f32 output: written (or accumulated) in place
    bool pack_w = false;      // weights copied to the f32 pack
    bool pw_direct = false;   // pointwise and the tensor itself serves as the column matrix
    Tiling tiles;
    Range kblk, cblk;  // filter blocks (within a group), channel blocks (within a group)
    int64_t jobs = 1;
    // fwd with filter blocks: the threads build each column tile together into one shared buffer,
    // then share out its filter blocks (instead of every block rebuilding the same tile).
    bool coop = false;
    int64_t col_parts = 1;  // pieces a shared column tile is built in
    // Slot layout (floats, each a multiple of 16).
    int64_t col_f = 0, buf_f = 0, acc_f = 0;
    int64_t slot_floats() const { return col_f + buf_f + acc_f; }
    int64_t wpack_floats = 0, shared_f = 0;
};

bool is_pointwise(const ConvProblem& p) {
    for (int i = 0; i < p.spatial_dims; ++i) {
        const auto u = static_cast<std::size_t>(i);
        if (p.kernel[u] != 1 || p.stride[u] != 1 || p.pad_begin[u] != 0 || p.pad_end[u] != 0) return false;
    }
    return true;
}

// Blocks wanted to reach kMinJobs jobs from `jobs0` unblocked ones.
int64_t blocks_wanted(int64_t jobs0) { return jobs0 >= kMinJobs ? 1 : ceil_div(kMinJobs, jobs0); }

Plan make_plan(const ConvProblem& p, bool tf32) {
    Plan pl;
    pl.g = make_geo(p);
    const Geo& g = pl.g;
    pl.dir = p.direction;
    pl.pointwise = is_pointwise(p);
    pl.direct_in = p.dtype == DataType::f32 && !tf32;
    pl.direct_out = p.dtype == DataType::f32;
    auto r16 = [](int64_t f) { return round_up(f, 16); };
    const int64_t min_c = ceil_div(kMinGemmDim, g.RS);  // channels per block: >= kMinGemmDim rows
    switch (p.direction) {
        case Direction::fwd: {
            const int64_t R = g.cpg * g.RS;
            pl.tiles = make_tiling(g.n, g.P, R, 128, true);
            const bool spans = pl.tiles.imgs > 1;
            const int64_t jobs0 = g.G * pl.tiles.count();
            pl.kblk = split(g.kpg, blocks_wanted(jobs0), kMinGemmDim);
            pl.jobs = jobs0 * pl.kblk.count;
            // Channels-first tiles of several images are not one strided matrix of x or y.
            pl.pw_direct = pl.pointwise && pl.direct_in && (g.cl || !spans);
            pl.coop = pl.kblk.count > 1;
            if (pl.coop) pl.jobs = pl.kblk.count;  // at a time: the blocks of one column tile
            pl.col_parts = std::min<int64_t>(kMinJobs, g.cl ? pl.tiles.in_img.size : g.cpg);
            const int64_t col = pl.pw_direct ? 0 : r16(R * pl.tiles.max_len());
            (pl.coop ? pl.shared_f : pl.col_f) = col;
            pl.buf_f = (!pl.direct_out || (!g.cl && spans)) ? r16(pl.kblk.size * pl.tiles.max_len()) : 0;
            pl.pack_w = !pl.direct_in;
            break;
        }
        case Direction::bwd_data: {
            // Jobs own (group, channel block, group of images); the images per tile depend on the
            // block size, so settle the blocks for per-image jobs first, then for the real count.
            pl.cblk = split(g.cpg, blocks_wanted(g.G * g.n), min_c);
            pl.tiles = make_tiling(g.n, g.P, pl.cblk.size * g.RS, 256, true);
            if (pl.tiles.groups() < g.n) {
                pl.cblk = split(g.cpg, blocks_wanted(g.G * pl.tiles.groups()), min_c);
                pl.tiles = make_tiling(g.n, g.P, pl.cblk.size * g.RS, 256, true);
            }
            const bool spans = pl.tiles.imgs > 1;
            pl.jobs = g.G * pl.tiles.groups() * pl.cblk.count;
            pl.pw_direct = pl.pointwise && (g.cl || !spans);
            pl.col_f = pl.pw_direct ? 0 : r16(pl.cblk.size * g.RS * pl.tiles.max_len());
            pl.buf_f = (!pl.direct_in || (!g.cl && spans)) ? r16(g.kpg * pl.tiles.max_len()) : 0;
            pl.acc_f = pl.direct_out ? 0 : r16(pl.cblk.size * g.I * pl.tiles.imgs);
            // Channels-last blocks of channels are not contiguous in W (K, taps, C/g): reorder.
            pl.pack_w = !pl.direct_in || (g.cl && pl.cblk.count > 1);
            break;
        }
        case Direction::bwd_filter: {
            pl.cblk = split(g.cpg, blocks_wanted(g.G), min_c);
            const int64_t jobs0 = g.G * pl.cblk.count;
            pl.kblk = split(g.kpg, blocks_wanted(jobs0), kMinGemmDim);
            // Channels-first tiles of several images would need a copy of dY: not worth it here.
            pl.tiles = make_tiling(g.n, g.P, pl.cblk.size * g.RS, 128, g.cl);
            const bool spans = pl.tiles.imgs > 1;
            pl.jobs = jobs0 * pl.kblk.count;
            pl.pw_direct = pl.pointwise && pl.direct_in && (g.cl || !spans);
            pl.col_f = pl.pw_direct ? 0 : r16(pl.cblk.size * g.RS * pl.tiles.max_len());
            pl.buf_f = (!pl.direct_in || (!g.cl && spans)) ? r16(pl.kblk.size * pl.tiles.max_len()) : 0;
            pl.acc_f = r16(pl.kblk.size * pl.cblk.size * g.RS);
            break;
        }
    }
    if (pl.pack_w) pl.wpack_floats = r16(g.K * g.cpg * g.RS);
    return pl;
}

std::size_t workspace_bytes(const Plan& pl, int64_t slots) {
    return 64 + 4 * static_cast<std::size_t>(pl.wpack_floats + pl.shared_f + slots * pl.slot_floats());
}

// ---------------------------------------------------------------------------------------------
// The three directions. E is the storage element (elem.hpp); TF32 rounds both GEMM operands.
template <class E, bool TF32>
struct Kernels {
    using T = typename E::T;
    // Functors rather than function pointers so that the copy loops inline (and vectorise) them.
    struct Load {
        float operator()(T v) const {
            const float f = E::load(v);
            if constexpr (TF32) return round_tf32(f);
            return f;
        }
    };
    struct Store {
        T operator()(float v) const { return E::store(v); }
    };
    static constexpr Load cvt{};
    static constexpr Store store{};

    const Plan& pl;
    const Geo& g;
    const Tap* taps;
    const float* wf;  // weights as f32 (the tensor itself or the pack); fwd and bwd_data

    // Weights to f32 (converted/rounded). Channels-last bwd_data with channel blocks reorders to
    // (g, channel block, k, tap, c) so that each block is a row-major K/g x (taps * Cb) matrix.
    static void pack_weights(const Plan& pl, const T* w, float* pack) {
        const Geo& g = pl.g;
        const bool reorder = g.cl && pl.dir == Direction::bwd_data && pl.cblk.count > 1;
        const int64_t R = g.cpg * g.RS;
#pragma omp for schedule(static)
        for (int64_t k = 0; k < g.K; ++k) {
            const T* src = w + k * R;
            if (!reorder) {
                for (int64_t i = 0; i < R; ++i) pack[k * R + i] = cvt(src[i]);
                continue;
            }
            const int64_t grp = k / g.kpg, kk = k - grp * g.kpg;
            for (int64_t b = 0; b < pl.cblk.count; ++b) {
                const int64_t c0 = pl.cblk.begin(b), nc = pl.cblk.len(b, g.cpg);
                float* dst = pack + grp * g.kpg * R + c0 * g.kpg * g.RS + kk * g.RS * nc;
                for (int64_t r = 0; r < g.RS; ++r)
                    for (int64_t c = 0; c < nc; ++c) dst[r * nc + c] = cvt(src[r * g.cpg + c0 + c]);
            }
        }
    }

    // The tile's rows [k0, k0+nk) of a channels-first tensor (N, channels, P) as a row-major
    // nk x len matrix: the tensor itself when the tile is inside one image and may be read
    // directly, else a (converted) copy in buf.
    const float* cf_tile(const T* t, int64_t channels, int64_t k0, int64_t nk, const Tiling::Tile& tile, bool direct,
                         float* buf, int64_t& ld) const {
        if (direct && tile.nimg == 1) {
            ld = g.P;
            return reinterpret_cast<const float*>(t) + (tile.n0 * channels + k0) * g.P + (tile.q0 - tile.n0 * g.P);
        }
        for_each_image(tile, g.P, [&](int64_t n, int64_t p0, int64_t len, int64_t off) {
            copy2d(t + (n * channels + k0) * g.P + p0, g.P, nk, len, buf + off, tile.len, cvt);
        });
        ld = tile.len;
        return buf;
    }

    // fwd: the column tile of (tile, group), or part `part` of `parts` of it (channels-first:
    // a range of channels; channels-last: a range of pixels), into col.
    void fwd_col(const T* x, const Tiling::Tile& tile, int64_t grp, float* col, int64_t part = 0,
                 int64_t parts = 1) const {
        const int64_t cglob = grp * g.cpg;
        if (!g.cl) {
            const Range r = split(g.cpg, parts, 1);
            if (part >= r.count) return;
            const int64_t c0 = r.begin(part), nc = r.len(part, g.cpg);
            im2col_cf(g, taps, x + (cglob + c0) * g.I, nc, tile.q0, tile.len, col + c0 * g.RS * tile.len, cvt);
        } else {
            const Range r = split(tile.len, parts, 1);
            if (part >= r.count) return;
            const int64_t j0 = r.begin(part);
            im2col_cl(g, taps, x + cglob, g.cpg, tile.q0 + j0, r.len(part, tile.len), col + j0 * g.cpg * g.RS, cvt);
        }
    }

    // fwd: where the column tile of (tile, group) lives: the input itself on the no-copy path,
    // else col (built by fwd_col).
    const float* fwd_colp(const T* x, const Tiling::Tile& tile, int64_t grp, const float* col, int64_t& ldc) const {
        const int64_t cglob = grp * g.cpg;
        if (!pl.pw_direct) {
            ldc = g.cl ? g.cpg * g.RS : tile.len;
            return col;
        }
        if (!g.cl) return cf_tile(x, g.C, cglob, g.cpg, tile, true, nullptr, ldc);
        ldc = g.C;  // x is the (N*P) x C matrix
        return reinterpret_cast<const float*>(x) + tile.q0 * g.C + cglob;
    }

    // fwd: output rows of filter block kb of (tile, group) from its column tile.
    void fwd_gemm(const Tiling::Tile& tile, int64_t grp, int64_t kb, const float* colp, int64_t ldc, T* y,
                  float* obuf) const {
        const int64_t len = tile.len;
        const int64_t k0 = pl.kblk.begin(kb), nk = pl.kblk.len(kb, g.kpg);
        const int64_t R = g.cpg * g.RS, kglob = grp * g.kpg + k0;
        const auto Wb = mat(wf + kglob * R, nk, R, R);
        if (!g.cl) {
            if (pl.direct_out && tile.nimg == 1) {
                float* yt = reinterpret_cast<float*>(y) + (tile.n0 * g.K + kglob) * g.P + (tile.q0 - tile.n0 * g.P);
                mat(yt, nk, len, g.P).noalias() = Wb * mat(colp, R, len, ldc);
            } else {
                mat(obuf, nk, len, len).noalias() = Wb * mat(colp, R, len, ldc);
                for_each_image(tile, g.P, [&](int64_t n, int64_t p0, int64_t l, int64_t off) {
                    copy2d(obuf + off, len, nk, l, y + (n * g.K + kglob) * g.P + p0, g.P, store);
                });
            }
        } else if (pl.direct_out) {  // y is the (N*P) x K matrix
            float* yt = reinterpret_cast<float*>(y) + tile.q0 * g.K + kglob;
            mat(yt, len, nk, g.K).noalias() = mat(colp, len, R, ldc) * Wb.transpose();
        } else {
            mat(obuf, len, nk, nk).noalias() = mat(colp, len, R, ldc) * Wb.transpose();
            copy2d(obuf, nk, len, nk, y + tile.q0 * g.K + kglob, g.K, store);
        }
    }

    // fwd job (pixel tile, group) when filters are not split: column tile in the slot, one GEMM.
    void fwd(int64_t job, const T* x, T* y, float* slot) const {
        const int64_t grp = job % g.G;
        const Tiling::Tile tile = pl.tiles.tile(job / g.G);
        if (!pl.pw_direct) fwd_col(x, tile, grp, slot);
        int64_t ldc;
        const float* colp = fwd_colp(x, tile, grp, slot, ldc);
        fwd_gemm(tile, grp, 0, colp, ldc, y, slot + pl.col_f);
    }

    // bwd_data job (group of images, group, channel block): dX of those images and channels, over
    // their pixel tiles in order.
    void bwd_data(int64_t job, const T* y, T* x, float* slot) const {
        const int64_t cb = job % pl.cblk.count, q = job / pl.cblk.count;
        const int64_t grp = q % g.G, ig = q / g.G;
        const int64_t c0 = pl.cblk.begin(cb), nc = pl.cblk.len(cb, g.cpg);
        const int64_t n0 = ig * pl.tiles.imgs, nimg = std::min(pl.tiles.imgs, g.n - n0);
        const int64_t R = g.cpg * g.RS;  // row length of a filter in W
        const int64_t cglob = grp * g.cpg + c0, kglob = grp * g.kpg;
        float* dcol = slot;
        float* dybuf = slot + pl.col_f;
        float* accbuf = slot + pl.col_f + pl.buf_f;
        // Accumulator of image n0: dX itself (f32) or the slot's f32 block. Channels-first:
        // channel stride I, pixel stride 1; channels-last: channel stride 1, pixel stride ps.
        float* acc;
        int64_t ps, acc_img;
        if (pl.direct_out) {
            acc = reinterpret_cast<float*>(x) + (g.cl ? n0 * g.I * g.C + cglob : (n0 * g.C + cglob) * g.I);
            ps = g.cl ? g.C : 1;
            acc_img = g.C * g.I;
        } else {
            acc = accbuf;
            ps = g.cl ? nc : 1;
            acc_img = nc * g.I;
        }
        if (!pl.pw_direct)
            for (int64_t i = 0; i < nimg; ++i) {
                float* a = acc + i * acc_img;
                if (g.cl)
                    for (int64_t pix = 0; pix < g.I; ++pix) std::fill(a + pix * ps, a + pix * ps + nc, 0.0f);
                else
                    for (int64_t c = 0; c < nc; ++c) std::fill(a + c * g.I, a + (c + 1) * g.I, 0.0f);
            }
        // The weights of this block as a row-major K/g x rows matrix with leading dimension ldw.
        const int64_t rows = nc * g.RS;
        const float* wblk;
        int64_t ldw;
        if (!g.cl) {
            wblk = wf + kglob * R + c0 * g.RS;  // columns (c, tap) of the channels of the block
            ldw = R;
        } else if (pl.cblk.count > 1) {
            wblk = wf + kglob * R + c0 * g.kpg * g.RS;  // reordered pack
            ldw = g.RS * nc;
        } else {
            wblk = wf + kglob * R;
            ldw = R;
        }
        const auto Wb = mat(wblk, g.kpg, rows, ldw);
        for (int64_t t = ig * pl.tiles.per_group(); t < (ig + 1) * pl.tiles.per_group(); ++t) {
            const Tiling::Tile tile = pl.tiles.tile(t);
            const int64_t len = tile.len;
            if (!g.cl) {
                int64_t ldy;
                const float* dy = cf_tile(y, g.K, kglob, g.kpg, tile, pl.direct_in, dybuf, ldy);
                if (pl.pw_direct) {  // col2im is the identity: write the block of dX directly
                    mat(acc + (tile.q0 - n0 * g.P), nc, len, g.I).noalias() = Wb.transpose() * mat(dy, g.kpg, len, ldy);
                } else {
                    mat(dcol, rows, len, len).noalias() = Wb.transpose() * mat(dy, g.kpg, len, ldy);
                    col2im_cf(g, taps, dcol, nc, tile.q0, len, acc, acc_img, n0);
                }
            } else {
                const T* yt = y + tile.q0 * g.K + kglob;  // dY is the (N*P) x K matrix
                const float* dy;
                int64_t ldy;
                if (pl.direct_in) {
                    dy = reinterpret_cast<const float*>(yt);
                    ldy = g.K;
                } else {
                    copy2d(yt, g.K, len, g.kpg, dybuf, g.kpg, cvt);
                    dy = dybuf;
                    ldy = g.kpg;
                }
                if (pl.pw_direct) {  // pointwise: input pixel = output pixel, P = I
                    mat(acc + (tile.q0 - n0 * g.P) * ps, len, nc, ps).noalias() = mat(dy, len, g.kpg, ldy) * Wb;
                } else {
                    mat(dcol, len, rows, rows).noalias() = mat(dy, len, g.kpg, ldy) * Wb;
                    col2im_cl(g, taps, dcol, nc, tile.q0, len, acc, ps, acc_img, n0);
                }
            }
        }
        if (!pl.direct_out)  // round once into dX
            for (int64_t i = 0; i < nimg; ++i) {
                const float* a = acc + i * acc_img;
                if (g.cl)
                    copy2d(a, nc, g.I, nc, x + (n0 + i) * g.I * g.C + cglob, g.C, store);
                else
                    copy2d(a, g.I, nc, g.I, x + ((n0 + i) * g.C + cglob) * g.I, g.I, store);
            }
    }

    // bwd_filter job (group, channel block, filter block): dW block summed over the pixel tiles of
    // all images in order.
    void bwd_filter(int64_t job, const T* x, const T* y, T* w, float* slot) const {
        const int64_t kb = job % pl.kblk.count, q = job / pl.kblk.count;
        const int64_t cb = q % pl.cblk.count, grp = q / pl.cblk.count;
        const int64_t c0 = pl.cblk.begin(cb), nc = pl.cblk.len(cb, g.cpg);
        const int64_t k0 = pl.kblk.begin(kb), nk = pl.kblk.len(kb, g.kpg);
        const int64_t rows = nc * g.RS;
        float* col = slot;
        float* dybuf = slot + pl.col_f;
        float* acc = slot + pl.col_f + pl.buf_f;  // nk x rows, row-major; columns (c, tap) or (tap, c)
        std::fill(acc, acc + nk * rows, 0.0f);
        const int64_t cglob = grp * g.cpg + c0, kglob = grp * g.kpg + k0;
        auto A = mat(acc, nk, rows, rows);
        for (int64_t t = 0; t < pl.tiles.count(); ++t) {
            const Tiling::Tile tile = pl.tiles.tile(t);
            const int64_t len = tile.len;
            if (!g.cl) {
                int64_t ldy, ldc;
                const float* dy = cf_tile(y, g.K, kglob, nk, tile, pl.direct_in, dybuf, ldy);
                const float* colp;
                if (pl.pw_direct) {
                    colp = cf_tile(x, g.C, cglob, nc, tile, true, nullptr, ldc);
                } else {
                    im2col_cf(g, taps, x + cglob * g.I, nc, tile.q0, len, col, cvt);
                    colp = col;
                    ldc = len;
                }
                A.noalias() += mat(dy, nk, len, ldy) * mat(colp, rows, len, ldc).transpose();
            } else {
                const T* yt = y + tile.q0 * g.K + kglob;
                const float* dy;
                int64_t ldy;
                if (pl.direct_in) {
                    dy = reinterpret_cast<const float*>(yt);
                    ldy = g.K;
                } else {
                    copy2d(yt, g.K, len, nk, dybuf, nk, cvt);
                    dy = dybuf;
                    ldy = nk;
                }
                const float* colp;
                int64_t ldc;
                if (pl.pw_direct) {
                    colp = reinterpret_cast<const float*>(x) + tile.q0 * g.C + cglob;
                    ldc = g.C;
                } else {
                    im2col_cl(g, taps, x + cglob, nc, tile.q0, len, col, cvt);
                    colp = col;
                    ldc = rows;
                }
                A.noalias() += mat(dy, len, nk, ldy).transpose() * mat(colp, len, rows, ldc);
            }
        }
        // Round once into dW.
        const int64_t R = g.cpg * g.RS;
        for (int64_t k = 0; k < nk; ++k) {
            T* wk = w + (kglob + k) * R;
            const float* a = acc + k * rows;
            if (!g.cl) {
                for (int64_t i = 0; i < rows; ++i) wk[c0 * g.RS + i] = store(a[i]);
            } else {
                for (int64_t r = 0; r < g.RS; ++r)
                    for (int64_t c = 0; c < nc; ++c) wk[r * g.cpg + c0 + c] = store(a[r * nc + c]);
            }
        }
    }
};

template <class E, bool TF32>
Status run_impl(const Plan& pl, const ConvTensors& t, Workspace ws) {
    using T = typename E::T;
    using K = Kernels<E, TF32>;
    const std::size_t fixed = workspace_bytes(pl, 0);
    const std::size_t slot_bytes = 4 * static_cast<std::size_t>(pl.slot_floats());
    if (ws.bytes < fixed + slot_bytes || (fixed + slot_bytes > 64 && ws.data == nullptr))
        return Status::failure("workspace of " + std::to_string(ws.bytes) + " bytes is smaller than the " +
                               std::to_string(fixed + slot_bytes) + " one thread needs");
    const int64_t slots = slot_bytes == 0 ? pl.jobs : static_cast<int64_t>((ws.bytes - fixed) / slot_bytes);
    const int nthreads =
        static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({omp_get_max_threads(), slots, pl.jobs})));

    auto base = reinterpret_cast<std::uintptr_t>(ws.data);
    float* wsf = reinterpret_cast<float*>((base + 63) & ~std::uintptr_t{63});
    float* pack = wsf;
    float* shared = pack + pl.wpack_floats;
    float* slots0 = shared + pl.shared_f;
    const std::vector<Tap> taps = make_taps(pl.g);

    const T* w_in = static_cast<const T*>(t.w.data);
    const float* wf = pl.pack_w ? pack : reinterpret_cast<const float*>(w_in);
    const K k{pl, pl.g, taps.data(), wf};
#pragma omp parallel num_threads(nthreads)
    {
        // Eigen must not open its own team inside this one (it would when this team has one
        // thread): nested regions of this thread get one thread.
        omp_set_num_threads(1);
        if (pl.pack_w) K::pack_weights(pl, w_in, pack);  // omp for: ends with a barrier
        float* slot = slots0 + omp_get_thread_num() * pl.slot_floats();
        const T* x = static_cast<const T*>(t.x.data);
        if (pl.coop) {
            // All threads walk the (tile, group) pairs together; the barriers at the end of each
            // omp for keep the shared column tile intact until every block has used it.
            for (int64_t q = 0; q < pl.tiles.count() * pl.g.G; ++q) {
                const int64_t grp = q % pl.g.G;
                const Tiling::Tile tile = pl.tiles.tile(q / pl.g.G);
                if (!pl.pw_direct) {
#pragma omp for schedule(static)
                    for (int64_t part = 0; part < pl.col_parts; ++part)
                        k.fwd_col(x, tile, grp, shared, part, pl.col_parts);
                }
                int64_t ldc;
                const float* colp = k.fwd_colp(x, tile, grp, shared, ldc);
#pragma omp for schedule(dynamic, 1)
                for (int64_t kb = 0; kb < pl.kblk.count; ++kb)
                    k.fwd_gemm(tile, grp, kb, colp, ldc, static_cast<T*>(t.y.data), slot);
            }
        } else {
#pragma omp for schedule(dynamic, 1)
            for (int64_t job = 0; job < pl.jobs; ++job) {
                switch (pl.dir) {
                    case Direction::fwd: k.fwd(job, x, static_cast<T*>(t.y.data), slot); break;
                    case Direction::bwd_data:
                        k.bwd_data(job, static_cast<const T*>(t.y.data), static_cast<T*>(t.x.data), slot);
                        break;
                    case Direction::bwd_filter:
                        k.bwd_filter(job, x, static_cast<const T*>(t.y.data), static_cast<T*>(t.w.data), slot);
                        break;
                }
            }
        }
    }
    return Status::success();
}

// The most kernel taps that reach one input element in bwd_data: along dim i the taps r with
// r*d = const (mod s) are r = r0 (mod s/gcd(s,d)).
int64_t bwd_data_taps(const ConvProblem& p) {
    int64_t taps = 1;
    for (int i = 0; i < p.spatial_dims; ++i) {
        const auto u = static_cast<std::size_t>(i);
        const int64_t period = p.stride[u] / std::gcd(p.stride[u], p.dilation[u]);
        taps *= ceil_div(p.kernel[u], period);
    }
    return taps;
}

class Im2colGemm final : public CpuAlgorithm {
public:
    Im2colGemm(std::string id, bool tf32)
        : CpuAlgorithm(std::move(id), tf32 ? Notes(Note::tensor_core) : Notes{},
                       tf32 ? CpuFamily::gemm_tf32 : CpuFamily::gemm),
          tf32_(tf32) {}

    Support supports(const ConvProblem& p) const override {
        if (auto e = p.check()) return Support::no("invalid problem: " + *e);
        if (tf32_ && p.dtype != DataType::f32)
            return Support::no("TF32 rounding applies to f32 problems only (dtype is " +
                               std::string(to_string(p.dtype)) + ")");
        if (p.dtype == DataType::f64) return Support::no("f64 data is not supported: the GEMM accumulates in f32");
        return Support::yes();
    }

    std::size_t workspace_size(const ConvProblem& p) const override {
        const Plan pl = make_plan(p, tf32_);
        return workspace_bytes(pl, std::max<int64_t>(1, std::min<int64_t>(omp_get_max_threads(), pl.jobs)));
    }

    Status run(const ConvProblem& p, const ConvTensors& t, Workspace ws) const override {
        if (const Support s = supports(p); !s) return Status::unsupported(s.reason);
        const Plan pl = make_plan(p, tf32_);
        return dispatch_dtype(p.dtype, [&](auto e) -> Status {
            using E = decltype(e);
            if constexpr (std::is_same_v<E, cpu::Elem<DataType::f64>>) {
                return Status::unsupported("f64");
            } else if (tf32_) {
                if constexpr (std::is_same_v<E, cpu::Elem<DataType::f32>>) return run_impl<E, true>(pl, t, ws);
                return Status::unsupported("tf32 needs f32");
            } else {
                return run_impl<E, false>(pl, t, ws);
            }
        });
    }

    // gamma_L (any summation tree of L products in f32) with TF32 input rounding when enabled,
    // plus one rounding to the storage type. See docs/algorithms-im2col_gemm.md.
    double error_bound(const ConvProblem& p) const override {
        int64_t L = 0;
        switch (p.direction) {
            case Direction::fwd: L = p.c_per_group() * p.kernel_spatial(); break;
            case Direction::bwd_data: L = p.k_per_group() * bwd_data_taps(p); break;
            case Direction::bwd_filter: L = p.n * p.out_spatial(); break;
        }
        const double lu = static_cast<double>(L) * unit_roundoff(DataType::f32);
        if (lu >= 1) return std::numeric_limits<double>::infinity();  // gamma_L undefined: no guarantee
        double b = lu / (1 - lu);
        if (tf32_) {
            const double ut = 0x1p-11;
            b = b * (1 + ut) * (1 + ut) + 2 * ut + ut * ut;
        }
        // An f32 result is stored as accumulated; f16/bf16 are rounded once more.
        const double uo = p.dtype == DataType::f32 ? 0.0 : unit_roundoff(p.dtype);
        return b + uo * (1 + b);
    }

private:
    bool tf32_;
};

}  // namespace

const Algorithm& cpu_im2col_gemm() {
    static const Im2colGemm a("cpu.im2col_gemm", false);
    return a;
}

const Algorithm& cpu_im2col_gemm_tf32() {
    static const Im2colGemm a("cpu.im2col_gemm.tf32", true);
    return a;
}

}  // namespace convtune::cpu::CONVTUNE_ISA_NS
