// cpu.fft — convolution by tiled FFTs (overlap-save) with a complex GEMM per frequency.
//
// Method: Mathieu, Henaff & LeCun, "Fast Training of Convolutional Networks through FFTs" (2014)
// and Vasilache et al., "Fast Convolutional Nets With fbfft" (2015): transform inputs and filters,
// multiply-accumulate over input channels per frequency (one complex GEMM per frequency: rows =
// (image, tile), reduction = channels), transform back. Large images are cut into tiles of T
// points per dimension (overlap-save, as cuDNN's FFT_TILING does), so the filter spectrum is
// T-sized rather than image-sized and the GEMM rows grow with batch * tiles.
//
// Every direction is a sum of circular cross-correlations on the tile grid:
//   fwd        y  = corr(x tile, w)               Y_f = X_f * conj(W_f)^T    (reduce over C/g)
//   bwd_data   dx = corr(dy tile, flipped w)       DX_f = DY_f * conj(Wflip_f) (reduce over K/g)
//   bwd_filter dw = sum over (n, tile) of corr(dy tile, x tile), read at the taps
//                                                  DW_f = DY_f^H * X_f        (reduce over rows)
// Per dimension, with effective kernel Ke = (k-1)*dil + 1, a tile computes Lo = T - Ke + 1
// consecutive outputs from T consecutive (padded) inputs; the circular wrap only touches the
// T - Lo discarded positions. Stride s is handled exactly by computing the stride-1 result and
// keeping every s-th output (fwd), or by reading dy upsampled with zeros (bwd_data, bwd_filter):
// correct for every stride, but s^d times the work, so the tuner will rarely pick it there.
//
// Applies to: every valid problem with f32/f16/bf16 storage — 1-D/2-D/3-D, any stride, dilation,
// padding (asymmetric, negative end padding), groups, both layouts. Not f64 data (see below).
// Tile sizes T_d are chosen per problem by a cost model (GEMM + transform flops) among sizes
// 2^a 3^b 5^c (the last spatial dimension even, for the real-input transform).
//
// Workspace (bytes), with F = T_0 ... T_{h-1} * (T_h/2 + 1) half-spectrum points (h = last
// spatial dim), R = rows per chunk (images x tiles processed together, chosen so that the two
// row spectra below take about 32 MiB, at least 16 rows when there are that many):
//   16 * F * (K * C/g)             filter spectrum (fwd, bwd_data) or dw spectrum (bwd_filter)
// + 16 * F * R * (C + K)           spectra of one chunk of input and output rows
// Each thread also allocates inside run() a scratch of 16 * 2 * F * max(C, K) bytes.
//
// Numerics: inputs are widened to f64 and all transforms and products run in f64; the result
// is rounded once to the storage type. FFT rounding is normwise: it spreads over every output
// of a tile in proportion to the tile's norms, not to each element's own sum |a*b|, so an f32
// FFT cannot meet a per-element bound at border or small outputs. In f64 its size is 2^-29 of
// the f32 one, which makes the per-element bound below hold for any data whose dynamic range
// within one tile is below ~2^20. error_bound() derives:
//   |out - exact| <= (u_out + u_f32 [f16/bf16: double rounding]) * sum|a*b|
//                    + 2 Q sqrt(T) (sqrt(2)(2J+2) + 3 e_F + 2) u_64 * S
// with S = sum_j ||a_j||_2 ||b_j||_2 over the J correlated pairs of the element's tile, e_F the
// transform's relative error constant, and the assumption S <= Q * sum|a*b| with Q = 2^20.
// Outputs that no tap reaches (all-padding borders, rows skipped by negative end padding or by
// stride/dilation) are exactly 0 and are written as 0, not as FFT roundoff.
// Deterministic: the row and frequency loops own their outputs; the bwd_filter reduction over
// row chunks runs in a fixed order; Eigen's GEMM runs single-threaded inside those loops.
#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <vector>

#include "convtune/numeric.hpp"
#include "convtune/tensor.hpp"
#include "cpu/level.hpp"
#include "cpu/elem.hpp"
#include "cpu/fft_transform.hpp"

namespace convtune::cpu::CONVTUNE_ISA_NS {

namespace {

using cpu::dispatch_dtype;
using fft::cd;

// Assumed bound on S / sum|a*b| within one tile (see the header comment and the docs).
constexpr double kDynamicRange = 0x1p20;
constexpr int64_t kRowChunkBytes = int64_t{32} << 20;
constexpr int64_t kMaxTile = 8192;
constexpr double kMaxWorkspace = 4.0 * (1ull << 30);

// The tiled-correlation geometry of one problem.
struct Geometry {
    int sd = 1, h = 0;
    std::array<int64_t, 3> T{1, 1, 1}, Ke{1, 1, 1}, Lo{1, 1, 1}, tiles{1, 1, 1};
    std::array<int64_t, 3> O{1, 1, 1};      // length of the tiled (stride-1) output range
    std::array<int64_t, 3> P{0, 0, 0};      // offset: segment position m of tile t reads signal t*Lo + m - P
    std::array<int64_t, 3> U{1, 1, 1};      // the signal is the source upsampled by U (zeros between)
    std::array<int64_t, 3> Lread{1, 1, 1};  // signal positions >= Lread are never read by a kept output
    int64_t M = 1, outer = 1, F = 1, Tsz = 1, ntiles = 1, rows = 1, chunk = 1;
    int64_t ca = 1, cb = 1;  // channels of the row operands (A: transformed input, B: the other)
    double cost = 0;
    double workspace = 0;
};

double fft_cost(int64_t tsz) {
    const double t = static_cast<double>(tsz);
    return t * (2.5 * std::log2(std::max(2.0, t)) + 2.0);
}

// Fills everything but T from p, then evaluates the tile sizes `T`.
void finish(const ConvProblem& p, Geometry& g) {
    const int h = g.h;
    g.M = g.T[static_cast<std::size_t>(h)] / 2;
    g.outer = 1;
    for (int d = 0; d < h; ++d) g.outer *= g.T[static_cast<std::size_t>(d)];
    g.F = g.outer * (g.M + 1);
    g.Tsz = g.outer * g.T[static_cast<std::size_t>(h)];
    g.ntiles = 1;
    for (int d = 0; d < g.sd; ++d) {
        const auto u = static_cast<std::size_t>(d);
        g.Lo[u] = g.T[u] - g.Ke[u] + 1;
        g.tiles[u] = (g.O[u] + g.Lo[u] - 1) / g.Lo[u];
        g.ntiles *= g.tiles[u];
    }
    g.rows = p.n * g.ntiles;
    const double row_bytes = 16.0 * static_cast<double>(g.F) * static_cast<double>(g.ca + g.cb);
    int64_t chunk = static_cast<int64_t>(static_cast<double>(kRowChunkBytes) / row_bytes);
    chunk = std::max<int64_t>(chunk, std::min<int64_t>(g.rows, 16));
    g.chunk = std::clamp<int64_t>(chunk, 1, g.rows);
    const double F = static_cast<double>(g.F), rows = static_cast<double>(g.rows);
    const double kc = static_cast<double>(p.k) * static_cast<double>(p.c_per_group());
    g.workspace = 16.0 * F * kc + row_bytes * static_cast<double>(g.chunk);
    // GEMM: 8 real flops per complex multiply-add; reduction over C/g (fwd), K/g (bwd_data), rows (bwd_filter).
    const double gemm = 8.0 * rows * F * kc;
    const double transforms = (rows * static_cast<double>(g.ca + g.cb) + kc) * fft_cost(g.Tsz);
    g.cost = gemm + 2.0 * transforms;
}

// Tile sizes worth trying in one dimension: the smallest smooth size for each tile count.
std::vector<int64_t> tile_candidates(int64_t O, int64_t Ke, bool even) {
    std::vector<int64_t> r;
    const int64_t tmax =
        std::min(fft::good_size(O + Ke - 1, even), fft::good_size(std::max<int64_t>(Ke, kMaxTile), even));
    int64_t last_tiles = std::numeric_limits<int64_t>::max();
    for (int64_t T = fft::good_size(std::max<int64_t>(Ke, even ? 2 : 1), even);; T = fft::good_size(T + 1, even)) {
        const int64_t lo = T - Ke + 1, tiles = (O + lo - 1) / lo;
        if (tiles < last_tiles) {
            r.push_back(T);
            last_tiles = tiles;
        }
        if (T >= tmax) break;
    }
    if (r.size() > 24) {  // keep the 24 with the least padding waste (tiles * T / O)
        std::vector<std::pair<double, int64_t>> s;
        for (int64_t T : r) s.push_back({static_cast<double>((O + T - Ke) / (T - Ke + 1) * T), T});
        std::sort(s.begin(), s.end());
        r.clear();
        for (std::size_t i = 0; i < 24; ++i) r.push_back(s[i].second);
    }
    return r;
}

// The geometry for p, or nullopt-like (rows == 0) with `why` set.
Geometry plan(const ConvProblem& p, std::string* why) {
    Geometry g;
    g.sd = p.spatial_dims;
    g.h = p.spatial_dims - 1;
    for (int d = 0; d < g.sd; ++d) {
        const auto u = static_cast<std::size_t>(d);
        const int64_t ke = p.effective_kernel(d), s = p.stride[u], out1 = (p.out(d) - 1) * s + 1;
        g.Ke[u] = ke;
        switch (p.direction) {
            case Direction::fwd:
            case Direction::bwd_filter:
                g.O[u] = out1;
                g.P[u] = p.pad_begin[u];
                g.U[u] = 1;
                g.Lread[u] = std::min(p.in[u], out1 + ke - 1 - g.P[u]);
                break;
            case Direction::bwd_data:
                g.O[u] = p.in[u];
                g.P[u] = ke - 1 - p.pad_begin[u];
                g.U[u] = s;
                g.Lread[u] = std::min(out1, p.in[u] + ke - 1 - g.P[u]);
                break;
        }
    }
    g.ca = p.direction == Direction::bwd_data ? p.k : p.c;
    g.cb = p.direction == Direction::bwd_data ? p.c : p.k;
    std::array<std::vector<int64_t>, 3> cand;
    for (int d = 0; d < 3; ++d) {
        const auto u = static_cast<std::size_t>(d);
        if (d >= g.sd) cand[u] = {1};
        else cand[u] = tile_candidates(g.O[u], g.Ke[u], d == g.h);
        if (cand[u].empty() || cand[u].front() > kMaxTile) {
            if (why)
                *why = "effective kernel " + std::to_string(g.Ke[u]) + " needs a tile above " +
                       std::to_string(kMaxTile) + " points";
            g.rows = 0;
            return g;
        }
    }
    Geometry best;
    best.rows = 0;
    for (int64_t t0 : cand[0])
        for (int64_t t1 : cand[1])
            for (int64_t t2 : cand[2]) {
                Geometry c = g;
                c.T = {t0, t1, t2};
                finish(p, c);
                if (c.workspace > kMaxWorkspace) continue;
                if (best.rows == 0 || c.cost < best.cost) best = c;
            }
    if (best.rows == 0 && why) *why = "every tiling needs more than 4 GiB of workspace";
    return best;
}

// Per-dimension "is any tap reaching this output" masks, indexed by the written tensor's coordinates.
std::array<std::vector<char>, 3> live_masks(const ConvProblem& p) {
    std::array<std::vector<char>, 3> live;
    for (int d = 0; d < 3; ++d) {
        const auto u = static_cast<std::size_t>(d);
        const int64_t s = p.stride[u], dl = p.dilation[u], pb = p.pad_begin[u], in = p.in[u], out = p.out(d),
                      kn = p.kernel[u];
        const int64_t len = p.direction == Direction::fwd ? out : p.direction == Direction::bwd_data ? in : kn;
        live[u].assign(static_cast<std::size_t>(len), 0);
        if (d >= p.spatial_dims) {
            live[u].assign(1, 1);
            continue;
        }
        for (int64_t o = 0; o < out; ++o)
            for (int64_t r = 0; r < kn; ++r) {
                const int64_t i = o * s - pb + r * dl;
                if (i < 0 || i >= in) continue;
                const int64_t at = p.direction == Direction::fwd ? o : p.direction == Direction::bwd_data ? i : r;
                live[u][static_cast<std::size_t>(at)] = 1;
            }
    }
    return live;
}

// Per-thread buffers for the transform of one row: the packed real signal (outer*M*ch) and the
// Stockham line scratch (at most F*ch).
struct Scratch {
    std::vector<cd> packed, line;
    Scratch(const Geometry& g, int64_t ch)
        : packed(static_cast<std::size_t>(g.outer * g.M * ch)), line(static_cast<std::size_t>(g.F * ch)) {}
};

struct Plans {
    std::array<fft::Plan1D, 3> fwd, inv;  // per spatial dim; the last one is the half-length (M) plan
    explicit Plans(const Geometry& g) {
        for (int d = 0; d < g.sd; ++d) {
            const auto u = static_cast<std::size_t>(d);
            const int64_t n = d == g.h ? g.M : g.T[u];
            fwd[u] = fft::Plan1D(n, -1);
            inv[u] = fft::Plan1D(n, +1);
        }
    }
};

// Forward real-to-half-spectrum transform of the packed signal in s.packed into spec (F*ch).
void forward_row(const Geometry& g, const Plans& pl, Scratch& s, int64_t ch, cd* spec) {
    const auto hu = static_cast<std::size_t>(g.h);
    pl.fwd[hu].run(s.packed.data(), s.line.data(), ch, g.outer, g.M * ch);
    fft::pack_post(s.packed.data(), spec, g.M, ch, g.outer);
    // Dimensions h-1 .. 0: element = everything inside the dimension.
    int64_t inner = (g.M + 1) * ch;
    for (int d = g.h - 1; d >= 0; --d) {
        const auto u = static_cast<std::size_t>(d);
        int64_t lines = 1;
        for (int e = 0; e < d; ++e) lines *= g.T[static_cast<std::size_t>(e)];
        pl.fwd[u].run(spec, s.line.data(), inner, lines, g.T[u] * inner);
        inner *= g.T[u];
    }
}

// Inverse of forward_row: spec (destroyed) to the packed real signal in s.packed, times Tsz.
void inverse_row(const Geometry& g, const Plans& pl, Scratch& s, int64_t ch, cd* spec) {
    int64_t inner = (g.M + 1) * ch;
    std::array<int64_t, 3> inner_of{};
    for (int d = g.h - 1; d >= 0; --d) {
        inner_of[static_cast<std::size_t>(d)] = inner;
        inner *= g.T[static_cast<std::size_t>(d)];
    }
    for (int d = 0; d < g.h; ++d) {
        const auto u = static_cast<std::size_t>(d);
        int64_t lines = 1;
        for (int e = 0; e < d; ++e) lines *= g.T[static_cast<std::size_t>(e)];
        pl.inv[u].run(spec, s.line.data(), inner_of[u], lines, g.T[u] * inner_of[u]);
    }
    fft::unpack_pre(spec, s.packed.data(), g.M, ch, g.outer);
    pl.inv[static_cast<std::size_t>(g.h)].run(s.packed.data(), s.line.data(), ch, g.outer, g.M * ch);
}

// Offset (in doubles) of spatial position (m0, m1, m2) of channel c in the packed buffer.
inline int64_t packed_at(const Geometry& g, const std::array<int64_t, 3>& m, int64_t ch, int64_t c) {
    int64_t o = 0;
    for (int d = 0; d < g.h; ++d) o = o * g.T[static_cast<std::size_t>(d)] + m[static_cast<std::size_t>(d)];
    const int64_t mh = m[static_cast<std::size_t>(g.h)];
    return ((o * g.M + (mh >> 1)) * ch + c) * 2 + (mh & 1);
}

// Decomposes a row index into (n, tile index per dim).
inline void row_coords(const Geometry& g, int64_t row, int64_t& n, std::array<int64_t, 3>& t) {
    int64_t r = row;
    for (int d = 2; d >= 0; --d) {
        const auto u = static_cast<std::size_t>(d);
        t[u] = r % g.tiles[u];
        r /= g.tiles[u];
    }
    n = r;
}

template <class E>
class Runner {
public:
    using T = typename E::T;
    Runner(const ConvProblem& p, const ConvTensors& t, const Geometry& g, void* ws)
        : p_(p), t_(t), g_(g), pl_(g), live_(live_masks(p)), xs_(x_strides(p)), ws_(w_strides(p)), ys_(y_strides(p)) {
        cd* base = static_cast<cd*>(ws);
        filt_ = base;
        a_ = filt_ + g.F * p.k * p.c_per_group();
        b_ = a_ + g.chunk * g.F * g.ca;
    }

    void run() {
        if (p_.direction == Direction::bwd_filter) run_bwd_filter();
        else run_data();
    }

private:
    const ConvProblem& p_;
    const ConvTensors& t_;
    const Geometry& g_;
    Plans pl_;
    std::array<std::vector<char>, 3> live_;
    Strides xs_, ws_, ys_;
    cd *filt_ = nullptr, *a_ = nullptr, *b_ = nullptr;

    using RowMat = Eigen::Matrix<cd, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using CMap = Eigen::Map<const RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;
    using MMap = Eigen::Map<RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;

    // Per-dim source index (or -1) of each segment position of tile t for the A operand.
    std::array<std::vector<int64_t>, 3> a_index(const std::array<int64_t, 3>& t) const {
        std::array<std::vector<int64_t>, 3> ix;
        for (int d = 0; d < 3; ++d) {
            const auto u = static_cast<std::size_t>(d);
            ix[u].assign(static_cast<std::size_t>(g_.T[u]), -1);
            if (d >= g_.sd) {
                ix[u][0] = 0;
                continue;
            }
            for (int64_t m = 0; m < g_.T[u]; ++m) {
                const int64_t j = t[u] * g_.Lo[u] + m - g_.P[u];
                if (j >= 0 && j < g_.Lread[u] && j % g_.U[u] == 0) ix[u][static_cast<std::size_t>(m)] = j / g_.U[u];
            }
        }
        return ix;
    }
    // dy positions of the B operand of bwd_filter (m < Lo only).
    std::array<std::vector<int64_t>, 3> dy_index(const std::array<int64_t, 3>& t) const {
        std::array<std::vector<int64_t>, 3> ix;
        for (int d = 0; d < 3; ++d) {
            const auto u = static_cast<std::size_t>(d);
            ix[u].assign(static_cast<std::size_t>(g_.T[u]), -1);
            if (d >= g_.sd) {
                ix[u][0] = 0;
                continue;
            }
            const int64_t s = p_.stride[u];
            for (int64_t m = 0; m < g_.Lo[u]; ++m) {
                const int64_t o = t[u] * g_.Lo[u] + m;
                if (o < g_.O[u] && o % s == 0) ix[u][static_cast<std::size_t>(m)] = o / s;
            }
        }
        return ix;
    }

    // Loads the real tile of channels [0, ch) of tensor `src` (strides st, batch n) into s.packed.
    void gather(Scratch& s, const T* src, const Strides& st, int64_t n, int64_t ch,
                const std::array<std::vector<int64_t>, 3>& ix) const {
        std::fill(s.packed.begin(), s.packed.end(), cd{});
        double* pk = reinterpret_cast<double*>(s.packed.data());
        std::array<int64_t, 3> m{};
        for (m[0] = 0; m[0] < g_.T[0]; ++m[0]) {
            const int64_t i0 = ix[0][static_cast<std::size_t>(m[0])];
            if (i0 < 0) continue;
            for (m[1] = 0; m[1] < g_.T[1]; ++m[1]) {
                const int64_t i1 = ix[1][static_cast<std::size_t>(m[1])];
                if (i1 < 0) continue;
                for (m[2] = 0; m[2] < g_.T[2]; ++m[2]) {
                    const int64_t i2 = ix[2][static_cast<std::size_t>(m[2])];
                    if (i2 < 0) continue;
                    const T* sp = src + st.at(n, 0, i0, i1, i2);
                    double* dp = pk + packed_at(g_, m, ch, 0);
                    for (int64_t c = 0; c < ch; ++c) dp[2 * c] = static_cast<double>(E::load(sp[c * st.channel]));
                }
            }
        }
    }

    // Filter spectrum of fwd (taps at r*dil) or bwd_data (taps at (k-1-r)*dil): row k, channels C/g.
    void filter_spectrum() {
        const int64_t cpg = p_.c_per_group();
        const bool flip = p_.direction == Direction::bwd_data;
        const T* w = static_cast<const T*>(t_.w.data);
#pragma omp parallel
        {
            Scratch s(g_, cpg);
            double* pk = reinterpret_cast<double*>(s.packed.data());
#pragma omp for schedule(static)
            for (int64_t k = 0; k < p_.k; ++k) {
                std::fill(s.packed.begin(), s.packed.end(), cd{});
                std::array<int64_t, 3> r{}, m{};
                for (r[0] = 0; r[0] < p_.kernel[0]; ++r[0])
                    for (r[1] = 0; r[1] < p_.kernel[1]; ++r[1])
                        for (r[2] = 0; r[2] < p_.kernel[2]; ++r[2]) {
                            for (int d = 0; d < 3; ++d) {
                                const auto u = static_cast<std::size_t>(d);
                                m[u] = (flip ? p_.kernel[u] - 1 - r[u] : r[u]) * p_.dilation[u];
                            }
                            double* dp = pk + packed_at(g_, m, cpg, 0);
                            for (int64_t c = 0; c < cpg; ++c)
                                dp[2 * c] = static_cast<double>(E::load(w[ws_.at(k, c, r[0], r[1], r[2])]));
                        }
                forward_row(g_, pl_, s, cpg, filt_ + k * g_.F * cpg);
            }
        }
    }

    void run_data() {
        const bool fwd = p_.direction == Direction::fwd;
        const int64_t ca = g_.ca, cb = g_.cb, cpg = p_.c_per_group(), kpg = p_.k_per_group(), F = g_.F;
        const T* src = static_cast<const T*>(fwd ? t_.x.data : t_.y.data);
        const Strides& sst = fwd ? xs_ : ys_;
        T* dst = static_cast<T*>(fwd ? t_.y.data : t_.x.data);
        const Strides& dst_st = fwd ? ys_ : xs_;
        filter_spectrum();
        const double scale = 1.0 / static_cast<double>(g_.Tsz);
        for (int64_t r0 = 0; r0 < g_.rows; r0 += g_.chunk) {
            const int64_t nr = std::min(g_.chunk, g_.rows - r0);
#pragma omp parallel
            {
                Scratch s(g_, ca);
#pragma omp for schedule(static)
                for (int64_t i = 0; i < nr; ++i) {
                    int64_t n;
                    std::array<int64_t, 3> t;
                    row_coords(g_, r0 + i, n, t);
                    gather(s, src, sst, n, ca, a_index(t));
                    forward_row(g_, pl_, s, ca, a_ + i * F * ca);
                }
            }
            // One GEMM per (frequency, group).
#pragma omp parallel for collapse(2) schedule(static)
            for (int64_t f = 0; f < F; ++f)
                for (int64_t gr = 0; gr < p_.groups; ++gr) {
                    if (fwd) {
                        CMap X(a_ + f * ca + gr * cpg, nr, cpg, Eigen::OuterStride<>(F * ca));
                        CMap W(filt_ + (gr * kpg * F + f) * cpg, kpg, cpg, Eigen::OuterStride<>(F * cpg));
                        MMap Y(b_ + f * cb + gr * kpg, nr, kpg, Eigen::OuterStride<>(F * cb));
                        Y.noalias() = X * W.adjoint();
                    } else {
                        CMap DY(a_ + f * ca + gr * kpg, nr, kpg, Eigen::OuterStride<>(F * ca));
                        CMap W(filt_ + (gr * kpg * F + f) * cpg, kpg, cpg, Eigen::OuterStride<>(F * cpg));
                        MMap DX(b_ + f * cb + gr * cpg, nr, cpg, Eigen::OuterStride<>(F * cb));
                        DX.noalias() = DY * W.conjugate();
                    }
                }
#pragma omp parallel
            {
                Scratch s(g_, cb);
                const double* pk = reinterpret_cast<const double*>(s.packed.data());
#pragma omp for schedule(static)
                for (int64_t i = 0; i < nr; ++i) {
                    int64_t n;
                    std::array<int64_t, 3> t;
                    row_coords(g_, r0 + i, n, t);
                    inverse_row(g_, pl_, s, cb, b_ + i * F * cb);
                    // Kept outputs of this tile: m < Lo, o' = t*Lo + m < O, and (fwd) o' % stride == 0.
                    std::array<int64_t, 3> m{}, o{};
                    auto pos = [&](int d, int64_t mm, int64_t& out) {
                        const auto u = static_cast<std::size_t>(d);
                        if (d >= g_.sd) return out = 0, mm == 0;
                        const int64_t op = t[u] * g_.Lo[u] + mm;
                        if (mm >= g_.Lo[u] || op >= g_.O[u]) return false;
                        const int64_t s2 = fwd ? p_.stride[u] : 1;
                        if (op % s2 != 0) return false;
                        out = op / s2;
                        return true;
                    };
                    for (m[0] = 0; m[0] < g_.T[0]; ++m[0]) {
                        if (!pos(0, m[0], o[0])) continue;
                        for (m[1] = 0; m[1] < g_.T[1]; ++m[1]) {
                            if (!pos(1, m[1], o[1])) continue;
                            for (m[2] = 0; m[2] < g_.T[2]; ++m[2]) {
                                if (!pos(2, m[2], o[2])) continue;
                                const bool alive = live_[0][static_cast<std::size_t>(o[0])] &&
                                                   live_[1][static_cast<std::size_t>(o[1])] &&
                                                   live_[2][static_cast<std::size_t>(o[2])];
                                T* dp = dst + dst_st.at(n, 0, o[0], o[1], o[2]);
                                const double* sp = pk + packed_at(g_, m, cb, 0);
                                for (int64_t c = 0; c < cb; ++c)
                                    dp[c * dst_st.channel] =
                                        E::store(alive ? static_cast<float>(sp[2 * c] * scale) : 0.0f);
                            }
                        }
                    }
                }
            }
        }
    }

    void run_bwd_filter() {
        const int64_t ca = g_.ca, cb = g_.cb, cpg = p_.c_per_group(), kpg = p_.k_per_group(), F = g_.F;
        const T* x = static_cast<const T*>(t_.x.data);
        const T* dy = static_cast<const T*>(t_.y.data);
        for (int64_t r0 = 0; r0 < g_.rows; r0 += g_.chunk) {
            const int64_t nr = std::min(g_.chunk, g_.rows - r0);
#pragma omp parallel
            {
                Scratch s(g_, std::max(ca, cb));
#pragma omp for schedule(static)
                for (int64_t i = 0; i < nr; ++i) {
                    int64_t n;
                    std::array<int64_t, 3> t;
                    row_coords(g_, r0 + i, n, t);
                    gather(s, x, xs_, n, ca, a_index(t));
                    forward_row(g_, pl_, s, ca, a_ + i * F * ca);
                    gather(s, dy, ys_, n, cb, dy_index(t));
                    forward_row(g_, pl_, s, cb, b_ + i * F * cb);
                }
            }
            const bool first = r0 == 0;
#pragma omp parallel for collapse(2) schedule(static)
            for (int64_t f = 0; f < F; ++f)
                for (int64_t gr = 0; gr < p_.groups; ++gr) {
                    CMap X(a_ + f * ca + gr * cpg, nr, cpg, Eigen::OuterStride<>(F * ca));
                    CMap DY(b_ + f * cb + gr * kpg, nr, kpg, Eigen::OuterStride<>(F * cb));
                    MMap DW(filt_ + (gr * kpg * F + f) * cpg, kpg, cpg, Eigen::OuterStride<>(F * cpg));
                    if (first) DW.noalias() = DY.adjoint() * X;
                    else DW.noalias() += DY.adjoint() * X;
                }
        }
        T* dw = static_cast<T*>(t_.w.data);
        const double scale = 1.0 / static_cast<double>(g_.Tsz);
#pragma omp parallel
        {
            Scratch s(g_, cpg);
            const double* pk = reinterpret_cast<const double*>(s.packed.data());
#pragma omp for schedule(static)
            for (int64_t k = 0; k < p_.k; ++k) {
                inverse_row(g_, pl_, s, cpg, filt_ + k * F * cpg);
                std::array<int64_t, 3> r{}, m{};
                for (r[0] = 0; r[0] < p_.kernel[0]; ++r[0])
                    for (r[1] = 0; r[1] < p_.kernel[1]; ++r[1])
                        for (r[2] = 0; r[2] < p_.kernel[2]; ++r[2]) {
                            for (int d = 0; d < 3; ++d)
                                m[static_cast<std::size_t>(d)] =
                                    r[static_cast<std::size_t>(d)] * p_.dilation[static_cast<std::size_t>(d)];
                            const bool alive = live_[0][static_cast<std::size_t>(r[0])] &&
                                               live_[1][static_cast<std::size_t>(r[1])] &&
                                               live_[2][static_cast<std::size_t>(r[2])];
                            const double* sp = pk + packed_at(g_, m, cpg, 0);
                            for (int64_t c = 0; c < cpg; ++c)
                                dw[ws_.at(k, c, r[0], r[1], r[2])] =
                                    E::store(alive ? static_cast<float>(sp[2 * c] * scale) : 0.0f);
                        }
            }
        }
    }
};

class Fft final : public CpuAlgorithm {
public:
    Fft() : CpuAlgorithm("cpu.fft", Note::fft, CpuFamily::fft) {}

    Support supports(const ConvProblem& p) const override {
        if (auto e = p.check()) return Support::no("invalid problem: " + *e);
        if (p.dtype == DataType::f64)
            return Support::no(
                "f64 data: the transforms run in f64, so their rounding is not small against the f64 result's; use "
                "cpu.direct");
        std::string why;
        if (plan(p, &why).rows == 0) return Support::no(why);
        return Support::yes();
    }

    std::size_t workspace_size(const ConvProblem& p) const override {
        const Geometry g = plan(p, nullptr);
        return g.rows == 0 ? 0 : static_cast<std::size_t>(g.workspace);
    }

    Status run(const ConvProblem& p, const ConvTensors& t, Workspace ws) const override {
        std::string why;
        const Geometry g = plan(p, &why);
        if (g.rows == 0) return Status::unsupported(why);
        if (p.dtype == DataType::f64) return Status::unsupported("f64 data");
        if (ws.bytes < static_cast<std::size_t>(g.workspace) || ws.data == nullptr)
            return Status::failure("workspace smaller than workspace_size()");
        dispatch_dtype(p.dtype, [&](auto e) {
            using E = decltype(e);
            if constexpr (!std::is_same_v<typename E::T, double>) Runner<E>(p, t, g, ws.data).run();
        });
        return Status::success();
    }

    double error_bound(const ConvProblem& p) const override {
        const Geometry g = plan(p, nullptr);
        if (g.rows == 0) return 0;
        const double u64 = unit_roundoff(DataType::f64), u32 = unit_roundoff(DataType::f32),
                     uo = unit_roundoff(p.dtype);
        double ef = fft::kPackErrorSum + fft::Plan1D::stage_error_sum(g.M);
        for (int d = 0; d < g.h; ++d) ef += fft::Plan1D::stage_error_sum(g.T[static_cast<std::size_t>(d)]);
        const double J = p.direction == Direction::fwd        ? static_cast<double>(p.c_per_group())
                         : p.direction == Direction::bwd_data ? static_cast<double>(p.k_per_group())
                                                              : static_cast<double>(g.rows);
        const double dot = std::sqrt(2.0) * (2.0 * J + 2.0);
        const double transform =
            2.0 * kDynamicRange * std::sqrt(static_cast<double>(g.Tsz)) * (dot + 3.0 * ef + 2.0) * u64;
        const double rounding = uo + (p.dtype == DataType::f32 ? 0.0 : u32 * (1 + uo));
        return rounding + transform * (1 + uo);
    }
};

}  // namespace

const Algorithm& cpu_fft() {
    static const Fft a;
    return a;
}

}  // namespace convtune::cpu::CONVTUNE_ISA_NS
