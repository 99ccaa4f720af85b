// cpu.winograd_f2x3 and cpu.winograd_f4x3 — Winograd minimal filtering, F(2x2,3x3) and
// F(4x4,3x3), after Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks" (CVPR 2016,
// arXiv:1509.09308).
//
// Computes: the forward convolution y = x * w, and the backward-data convolution dx, which for a
// stride-1 3x3 kernel is itself a forward convolution: of dy with the filter rotated by 180
// degrees and with input and output channels swapped (per group), with begin padding 2 - pad_begin
// and end padding 2 - pad_end. Either way the work is one "internal" forward convolution:
//   out[n,k,o] = sum_{c in group(k), r, s} in[n,c,o_h - pt + r, o_w - pl + s] * f[k,c,r,s]
// with pt, pl possibly negative (backward data with pad_begin > 2).
// Each m x m output tile (m = 2 or 4) needs an alpha x alpha input tile (alpha = m + 2):
//   Y = A^T [ sum_c (G f_c G^T) (.) (B^T d_c B) ] A      ((.) = element-wise product)
// so the convolution becomes alpha^2 independent GEMMs (K/g x C/g) x (C/g x tiles), one per
// transform-domain position xi, between a transformed filter U and a transformed input V.
//
// Applies to: 2-D, 3x3 kernel, stride 1, dilation 1, any padding (asymmetric, negative end
// padding, padding larger than the kernel), any sizes (partial tiles at the border are computed
// whole and clipped), groups (one GEMM per group), both layouts, f32/f16/bf16 storage with f32
// transform-domain arithmetic, directions fwd and bwd_data. Not bwd_filter (a F(3x3, tile)
// algorithm with the reduction over tiles would be needed; not implemented).
// Output elements whose receptive field lies wholly in the padding are exact zeros and are
// written as such, outside the tiling.
//
// Structure. Input and output layouts and storage types are absorbed at the edges: the input
// transform first copies the rows a run of tiles needs into a small zero-padded slab
// [alpha][cols][kVW channels] (transposing channels-first data, converting f16/bf16), the output
// transform writes vectors of kVW output channels (transposed into pixel rows for channels
// first). Two schedules (Plan::fused), tiles numbered (image, tile row, tile column):
//   fused (one transform-domain slice of all filters, Kp x Cp floats, fits 64 KiB): all filters
//     are transformed once into a shared U; each thread then takes sub-blocks of B tiles through
//     input transform, the alpha^2 GEMMs and output transform inside its own cache.
//   streamed (larger C x K): all threads input-transform a super-block of B tiles into a shared
//     V; then work items (panel of kMR output channels, range of tiles) transform their filters
//     in blocks of CB channels and accumulate the GEMMs block by block, then transform back.
// Every output element is computed by exactly one work item in a fixed order, so the result is
// bitwise independent of the thread count and the schedule.
//
// Workspace (floats; alpha2 = alpha^2, Cp = C/g rounded up to kVW, Kp = K/g rounded up to kMR,
// P = omp_get_max_threads() when workspace_size is asked; each part rounded up to 64 bytes):
//   fused:    alpha2 * (Kp*Cp  +  P * (Cp*B + B*Kp))       shared U; per thread V and M
//   streamed: alpha2 * (Cp*B   +  P * (CB*kMR + B*kMR))    shared V; per thread U block and M
// with B and CB from make_plan (cache budgets). For the internal problem of backward data, C
// and K swap roles. A workspace with room for fewer per-thread parts runs on fewer threads.
//
// Numerics: see docs/algorithms-winograd.md. The bound returned by error_bound() is
//   gamma_n * R_h * R_w  (+ the output rounding for f16/bf16),   gamma_n = n u / (1 - n u),
// where n = C/g + (rounding depth of the three transforms: 10 for F(2,3), 16 for F(4,3)) and
// R_h, R_w are the growth factors of the transforms along each spatial dimension (sum over the
// transform domain of |A^T| |G| |B^T|, relative to the direct sum of |a*b|), evaluated for the
// actual tiling so that border tiles reading padding are accounted for. Interior values: R = 8/3
// for F(2,3) and 22/3 for F(4,3) with its points (0, +-1/2, +-2); the common points (0, +-1, +-2)
// would give 16.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "convtune/numeric.hpp"
#include "convtune/tensor.hpp"
#include "cpu/level.hpp"
#include "cpu/elem.hpp"
#include "cpu/winograd_kernels.hpp"

namespace convtune::cpu::CONVTUNE_ISA_NS {

namespace {

using namespace wino;

constexpr int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }
constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Cache budgets (bytes). The transform-domain working set of one thread should stay in L2; the
// transformed input shared by all threads in the streamed schedule should stay in L3.
constexpr int64_t kL2Budget = 448 << 10;
constexpr int64_t kSharedVBudget = int64_t{8} << 20;
// One transform-domain slice of all filters (K/g x C/g floats) up to this size: fused schedule.
constexpr int64_t kFusedFilterSlice = 64 << 10;
// Channels per block of transformed filters in the streamed schedule (U block <= 128 KiB).
constexpr int64_t kFilterBlockBytes = 128 << 10;
// Tiles per input segment: bounds the slab on the stack (alpha x (16 m + 2) x kVW floats).
constexpr int64_t kSegTiles = 16;

// The internal forward problem and its blocking.
struct Plan {
    int m = 4, alpha = 6;
    DataType dtype = DataType::f32;
    Layout layout = Layout::nchw;
    bool bwd = false;
    int64_t N = 1, G = 1, Cg = 1, Kg = 1;  // per-group input / output channels of the internal problem
    int64_t H = 1, W = 1, OH = 1, OW = 1;
    int64_t pt = 0, pl = 0;                              // begin padding (may be negative)
    int64_t oh_lo = 0, oh_hi = 0, ow_lo = 0, ow_hi = 0;  // outputs whose field meets the input
    int64_t TH = 0, TW = 0, NT = 0;                      // tiles per column, per row, per group
    int64_t Cp = 0, Kp = 0;                              // channels padded to kVW / kMR
    Strides is, os, fs;                                  // internal input / output, original filter
    // Schedule. fused: all transformed filters shared, each thread runs sub-blocks of B tiles
    // through input transform, GEMMs and output transform. streamed: super-blocks of B tiles
    // transformed by all threads, then (filter panel, tiles) items with blocks of CB channels.
    bool fused = true;
    int64_t B = 0, CB = 0;
    // Workspace parts in floats: shared, and per thread (first and second buffer).
    int64_t shared = 0, t1 = 0, t2 = 0;
};

// Range of outputs [lo, hi) along one dim whose 3-tap window at o - pad meets [0, in).
void field_range(int64_t in, int64_t out, int64_t pad, int64_t& lo, int64_t& hi) {
    lo = std::max<int64_t>(0, pad - 2);
    hi = std::min<int64_t>(out, pad + in);
    if (hi < lo) hi = lo;
}

Plan make_plan(const ConvProblem& p, int m) {
    Plan P;
    P.m = m;
    P.alpha = m + 2;
    P.dtype = p.dtype;
    P.layout = p.layout;
    P.bwd = p.direction == Direction::bwd_data;
    P.N = p.n;
    P.G = p.groups;
    if (!P.bwd) {
        P.Cg = p.c_per_group();
        P.Kg = p.k_per_group();
        P.H = p.in[0];
        P.W = p.in[1];
        P.OH = p.out(0);
        P.OW = p.out(1);
        P.pt = p.pad_begin[0];
        P.pl = p.pad_begin[1];
        P.is = x_strides(p);
        P.os = y_strides(p);
    } else {
        P.Cg = p.k_per_group();
        P.Kg = p.c_per_group();
        P.H = p.out(0);
        P.W = p.out(1);
        P.OH = p.in[0];
        P.OW = p.in[1];
        P.pt = 2 - p.pad_begin[0];
        P.pl = 2 - p.pad_begin[1];
        P.is = y_strides(p);
        P.os = x_strides(p);
    }
    P.fs = w_strides(p);
    field_range(P.H, P.OH, P.pt, P.oh_lo, P.oh_hi);
    field_range(P.W, P.OW, P.pl, P.ow_lo, P.ow_hi);
    P.TH = ceil_div(P.oh_hi - P.oh_lo, m);
    P.TW = ceil_div(P.ow_hi - P.ow_lo, m);
    P.NT = P.N * P.TH * P.TW;
    P.Cp = round_up(P.Cg, kVW);
    P.Kp = round_up(P.Kg, kMR);
    const int64_t a2 = int64_t{P.alpha} * P.alpha, f = sizeof(float);
    const int64_t all_tiles = round_up(std::max<int64_t>(P.NT, 1), kNR);
#ifdef CONVTUNE_WINOGRAD_FORCE_STREAMED  // to exercise the streamed schedule on small problems (testing only)
    P.fused = false;
#else
    P.fused = P.Cp * P.Kp * f <= kFusedFilterSlice;
#endif
    if (P.fused) {
        // Per thread: V (a2 x Cp x B) and M (a2 x B x Kp) of one sub-block within the L2 budget.
        const int64_t b = kL2Budget / (a2 * f * (P.Cp + P.Kp)) / kNR * kNR;
        P.B = std::min({all_tiles, std::clamp<int64_t>(b, kNR, 20 * kNR)});
        P.shared = round_up(a2 * P.Kp * P.Cp, 16);
        P.t1 = round_up(a2 * P.Cp * P.B, 16);
        P.t2 = round_up(a2 * P.B * P.Kp, 16);
    } else {
        // Shared V of a super-block within the L3 budget; per thread M (a2 x B x kMR) in L2.
        const int64_t by_v = kSharedVBudget / (a2 * f * P.Cp), by_m = kL2Budget / (a2 * f * kMR);
        P.B = std::min(all_tiles, std::max<int64_t>(kNR, std::min(by_v, by_m) / kNR * kNR));
        P.CB = std::min(P.Cp, std::max<int64_t>(kVW, kFilterBlockBytes / (a2 * f * kMR) / kVW * kVW));
        P.shared = round_up(a2 * P.Cp * P.B, 16);
        P.t1 = round_up(a2 * P.CB * kMR, 16);
        P.t2 = round_up(a2 * P.B * kMR, 16);
    }
    return P;
}

// The transform tables, read off the kernels themselves (applied to unit vectors) so that the
// error bound can never disagree with the code: |B^T|, |G| (with its row factors), |A^T|.
struct Tables {
    int m = 0, alpha = 0;
    std::vector<double> bt, g, at;  // alpha x alpha, alpha x 3, m x alpha (absolute values)
};

template <int m>
Tables make_tables() {
    constexpr int A = Wino<m>::alpha;
    Tables T;
    T.m = m;
    T.alpha = A;
    T.bt.assign(A * A, 0);
    T.g.assign(A * 3, 0);
    T.at.assign(m * A, 0);
    for (int p = 0; p < A; ++p) {
        vf d[A] = {}, v[A];
        d[p] = splat(1);
        Wino<m>::bt(d, v);
        for (int i = 0; i < A; ++i) T.bt[i * A + p] = std::fabs(v[i][0]);
    }
    for (int k = 0; k < 3; ++k) {
        vf w[3] = {}, u[A];
        w[k] = splat(1);
        Wino<m>::g(w, u);
        for (int i = 0; i < A; ++i) T.g[i * 3 + k] = std::fabs(u[i][0] * Wino<m>::g_scale[i]);
    }
    for (int x = 0; x < A; ++x) {
        vf mm[A] = {}, y[m];
        mm[x] = splat(1);
        Wino<m>::at(mm, y);
        for (int i = 0; i < m; ++i) T.at[i * A + x] = std::fabs(y[i][0]);
    }
    return T;
}

const Tables& tables(int m) {
    static const Tables t2 = make_tables<2>(), t4 = make_tables<4>();
    return m == 2 ? t2 : t4;
}

// Growth factor along one spatial dim: max over the outputs of the tiling of
//   sum_xi |A^T(e,xi)| * rowsum|G|(xi) * sum_{p valid} |B^T(xi,p)|  /  #valid taps of e,
// the ratio between the magnitude the rounding errors are proportional to and the direct
// sum |a*b|, for inputs and filter values of equal magnitude (zero in the padding).
double growth_1d(const Tables& T, int64_t in, int64_t pad, int64_t lo, int64_t hi) {
    const int m = T.m, A = T.alpha;
    double worst = 0;
    for (int64_t o0 = lo; o0 < hi; o0 += m) {
        std::array<bool, 8> valid{};
        for (int p = 0; p < A; ++p) {
            const int64_t i = o0 - pad + p;
            valid[static_cast<std::size_t>(p)] = i >= 0 && i < in;
        }
        for (int e = 0; e < m && o0 + e < hi; ++e) {
            int taps = 0;
            for (int k = 0; k < 3; ++k) taps += valid[static_cast<std::size_t>(e + k)];
            double w = 0;
            for (int x = 0; x < A; ++x) {
                double gs = 0, bs = 0;
                for (int k = 0; k < 3; ++k) gs += T.g[x * 3 + k];
                for (int p = 0; p < A; ++p)
                    if (valid[static_cast<std::size_t>(p)]) bs += T.bt[x * A + p];
                w += T.at[e * A + x] * gs * bs;
            }
            if (taps > 0) worst = std::max(worst, w / taps);
        }
    }
    return worst;
}

// Fewest taps of the 3 in the window of an output in [lo, hi) along one dim that read the input.
int64_t fewest_taps_1d(int64_t in, int64_t pad, int64_t lo, int64_t hi) {
    int64_t fewest = 3;
    for (int64_t o = lo; o < hi; ++o) {
        int64_t taps = 0;
        for (int64_t k = 0; k < 3; ++k) taps += (o - pad + k >= 0 && o - pad + k < in) ? 1 : 0;
        fewest = std::min(fewest, taps);
    }
    return fewest;
}

// The fewest products any output the tiling computes is the exact sum of: channels per group of
// the internal problem times the taps of its window that read the input (outputs whose window
// reads none are written as exact zeros, outside the tiling).
int64_t fewest_products(const Plan& P) {
    return P.Cg * fewest_taps_1d(P.H, P.pt, P.oh_lo, P.oh_hi) * fewest_taps_1d(P.W, P.pl, P.ow_lo, P.ow_hi);
}

// Outputs whose sum has fewer products than this are refused (docs/algorithms-winograd.md,
// "Outputs of few products"): the error of a Winograd output is proportional to the magnitudes of
// the whole tile (W), while the per-element check divides by the output's own sum|a*b| (S); the
// bound takes W / S = R_h R_w, which holds for a sum of many comparable terms but not for one of
// a few, where S alone can be arbitrarily small (issue 35: depthwise backward data with pad 0, a
// corner output dx = dy * w, measured 22x and 711x over the bound for L = 1, 3x for L = 2).
constexpr int64_t kMinProducts = 8;

// Rounding depth of the whole pipeline besides the GEMM: both passes of each transform, plus
// (F(4,3)) the rounded row factor of G and its multiplication.
template <int m> constexpr int transform_depth() {
    using Wm = Wino<m>;
    const int scale = m == 4 ? 2 : 0;
    return 2 * Wm::depth_b + 2 * Wm::depth_g + scale + 2 * Wm::depth_a;
}

// ---------------------------------------------------------------------------------------------

template <class E, int m>
class Runner {
    using T = typename E::T;
    static constexpr int A = m + 2, A2 = A * A;

public:
    Runner(const Plan& P, const ConvTensors& t, float* ws, int threads) : P_(P), ws_(ws), threads_(threads) {
        if (!P.bwd) {
            in_ = static_cast<const T*>(t.x.data);
            out_ = static_cast<T*>(t.y.data);
        } else {
            in_ = static_cast<const T*>(t.y.data);
            out_ = static_cast<T*>(t.x.data);
        }
        w_ = static_cast<const T*>(t.w.data);
        for (int i = 0; i < A; ++i)
            for (int j = 0; j < A; ++j)
                scale_[i * A + j] = static_cast<float>(Wino<m>::g_scale[i] * Wino<m>::g_scale[j]);
    }

    void run() {
#pragma omp parallel num_threads(threads_)
        {
            const int tid = omp_get_thread_num();
            float* b1 = ws_ + P_.shared + tid * (P_.t1 + P_.t2);
            float* b2 = b1 + P_.t1;
            zero_outside();
            if (P_.fused) fused(b1, b2);
            else streamed(b1, b2);
        }
    }

private:
    struct Seg {
        int64_t n, th, tw0, count, t;  // first tile (n, th, tw0), tiles, block index of the first
    };

    // Tile-row segments (at most kSegTiles tiles each) covering tiles [s0, s1) of a group.
    void segments(int64_t s0, int64_t s1, std::vector<Seg>& segs) const {
        segs.clear();
        int64_t t = s0;
        while (t < s1) {
            const int64_t row = t / P_.TW, tw = t % P_.TW;
            const int64_t cnt = std::min({P_.TW - tw, s1 - t, kSegTiles});
            segs.push_back({row / P_.TH, row % P_.TH, tw, cnt, t - s0});
            t += cnt;
        }
    }

    // Fused schedule. U[xi][panel][c][kMR] (shared) holds every transformed filter of the group;
    // a thread takes sub-blocks of P_.B tiles: V[xi][chunk][cv][tile][lane] and M[xi][tile][Kp]
    // in its own buffers, so the transform-domain data of a sub-block never leaves its L2.
    void fused(float* V, float* M) {
        float* U = ws_;
        const int64_t panels = P_.Kp / kMR, cvn = P_.Cp / kVW, subs = ceil_div(P_.NT, P_.B);
        std::vector<Seg> segs;
        for (int64_t g = 0; g < P_.G; ++g) {
#pragma omp for schedule(static)
            for (int64_t kp = 0; kp < panels; ++kp) filter_panel(g, kp, 0, P_.Cp, U + kp * P_.Cp * kMR, P_.Kp * P_.Cp);
            // (implicit barrier: U complete)
#pragma omp for schedule(static)
            for (int64_t sb = 0; sb < subs; ++sb) {
                const int64_t s0 = sb * P_.B, s1 = std::min(P_.NT, s0 + P_.B), nch = ceil_div(s1 - s0, kNR);
                const int64_t vxi = nch * P_.Cp * kNR;  // V distance between transform-domain positions
                segments(s0, s1, segs);
                for (const Seg& s : segs)
                    for (int64_t cv = 0; cv < cvn; ++cv) input_segment(g, s, cv, V, vxi);
                for (int xi = 0; xi < A2; ++xi)
                    for (int64_t ch = 0; ch < nch; ++ch) {
                        const int tiles = static_cast<int>(std::min<int64_t>(kNR, s1 - s0 - ch * kNR));
                        const float* v = V + xi * vxi + ch * P_.Cp * kNR;
                        float* mm = M + (xi * P_.B + ch * kNR) * P_.Kp;
                        for (int64_t kp = 0; kp < panels; ++kp)
                            gemm_kernel_n<false>(tiles, cvn, U + (xi * panels + kp) * P_.Cp * kMR, v, mm + kp * kMR,
                                                 P_.Kp);
                    }
                output(g, 0, P_.Kg, s0, s1, 0, M, P_.Kp, P_.B * P_.Kp);
            }
        }
    }

    // Streamed schedule (large C/g x K/g). Per super-block of P_.B tiles: all threads transform
    // the input into the shared V; then items (panel of kMR filters, range of chunks): for each
    // block of P_.CB channels, transform those filters into U (per thread, L2) and accumulate
    // the alpha^2 GEMMs into M[xi][tile][kMR] (per thread); finally the output transform.
    void streamed(float* U, float* M) {
        float* V = ws_;
        const int64_t panels = P_.Kp / kMR, cvn = P_.Cp / kVW;
        std::vector<Seg> segs;
        for (int64_t g = 0; g < P_.G; ++g)
            for (int64_t s0 = 0; s0 < P_.NT; s0 += P_.B) {
                const int64_t s1 = std::min(P_.NT, s0 + P_.B), nch = ceil_div(s1 - s0, kNR);
                const int64_t vxi = nch * P_.Cp * kNR;
                segments(s0, s1, segs);
                const int64_t items_a = static_cast<int64_t>(segs.size()) * cvn;
#pragma omp for schedule(static)
                for (int64_t it = 0; it < items_a; ++it)
                    input_segment(g, segs[static_cast<std::size_t>(it / cvn)], it % cvn, V, vxi);
                // (implicit barrier: V complete.) Split the tiles only as far as the threads
                // need work: every split repeats the filter transform of its panel.
                const int64_t subs = std::clamp<int64_t>(ceil_div(2 * int64_t{threads_}, panels), 1, nch);
                const int64_t sub_ch = ceil_div(nch, subs);
#pragma omp for schedule(static)
                for (int64_t it = 0; it < panels * subs; ++it) {
                    const int64_t kp = it / subs, c0 = (it % subs) * sub_ch, c1 = std::min(nch, c0 + sub_ch);
                    if (c0 >= c1) continue;
                    for (int64_t cb = 0; cb < P_.Cp; cb += P_.CB) {
                        const int64_t cbn = std::min(P_.CB, P_.Cp - cb);
                        filter_panel(g, kp, cb, cb + cbn, U, cbn * kMR);
                        for (int xi = 0; xi < A2; ++xi)
                            for (int64_t ch = c0; ch < c1; ++ch) {
                                const int tiles = static_cast<int>(std::min<int64_t>(kNR, s1 - s0 - ch * kNR));
                                const float* v = V + xi * vxi + ch * P_.Cp * kNR + cb * kNR;
                                float* mm = M + (xi * P_.B + (ch - c0) * kNR) * kMR;
                                if (cb == 0) gemm_kernel_n<false>(tiles, cbn / kVW, U + xi * cbn * kMR, v, mm, kMR);
                                else gemm_kernel_n<true>(tiles, cbn / kVW, U + xi * cbn * kMR, v, mm, kMR);
                            }
                    }
                    output(g, kp * kMR, std::min(P_.Kg, (kp + 1) * kMR), s0 + c0 * kNR, std::min(s1, s0 + c1 * kNR), 0,
                           M, kMR, P_.B * kMR);
                }
                // (implicit barrier: V may be overwritten)
            }
    }

    // Writes the exact zeros of the outputs whose receptive field is all padding.
    void zero_outside() {
        if (P_.oh_lo == 0 && P_.oh_hi == P_.OH && P_.ow_lo == 0 && P_.ow_hi == P_.OW) return;
        const int64_t K = P_.Kg * P_.G;
#pragma omp for schedule(static)
        for (int64_t nk = 0; nk < P_.N * K; ++nk) {
            const int64_t n = nk / K, k = nk % K;
            for (int64_t oh = 0; oh < P_.OH; ++oh)
                for (int64_t ow = 0; ow < P_.OW; ++ow)
                    if (oh < P_.oh_lo || oh >= P_.oh_hi || ow < P_.ow_lo || ow >= P_.ow_hi)
                        out_[P_.os.at(n, k, oh, ow)] = E::store(0.0f);
        }
    }

    // Input slab of one segment and one channel vector (zero outside the input and beyond C/g),
    // then its tile transforms into V[xi][chunk][cv][tile][lane] (xi stride vxi).
    void input_segment(int64_t g, const Seg& s, int64_t cv, float* V, int64_t vxi) const {
        const int64_t cols = s.count * m + 2;
        alignas(64) float slab[A * (kSegTiles * m + 2) * kVW];
        const int64_t rs = cols * kVW;
        const int64_t ih0 = P_.oh_lo + s.th * m - P_.pt, iw0 = P_.ow_lo + s.tw0 * m - P_.pl;
        const int64_t c0 = g * P_.Cg + cv * kVW;
        const int64_t lanes = std::min<int64_t>(kVW, P_.Cg - cv * kVW);
        const int64_t b_lo = std::clamp<int64_t>(-iw0, 0, cols), b_hi = std::clamp<int64_t>(P_.W - iw0, b_lo, cols);
        const int64_t cs = P_.is.channel, ws = P_.is.spatial[1];
        for (int a = 0; a < A; ++a) {
            float* row = slab + a * rs;
            const int64_t ih = ih0 + a;
            if (ih < 0 || ih >= P_.H) {
                std::fill(row, row + rs, 0.0f);
                continue;
            }
            std::fill(row, row + b_lo * kVW, 0.0f);
            std::fill(row + b_hi * kVW, row + rs, 0.0f);
            const T* src = in_ + P_.is.at(s.n, c0, ih, iw0 + b_lo);
            if constexpr (std::is_same_v<T, float>) {
                if (lanes == kVW && cs == 1) {  // channels last: one vector per column
                    for (int64_t b = b_lo; b < b_hi; ++b) store(row + b * kVW, load(src + (b - b_lo) * ws));
                    continue;
                }
                if (lanes == kVW && ws == 1) {  // channels first: transpose kVW channels x kVW columns
                    int64_t b = b_lo;
                    for (; b + kVW <= b_hi; b += kVW) {
                        vf r[kVW];
                        for (int l = 0; l < kVW; ++l) r[l] = load(src + l * cs + (b - b_lo));
                        transpose(r);
                        for (int j = 0; j < kVW; ++j) store(row + (b + j) * kVW, r[j]);
                    }
                    for (; b < b_hi; ++b)
                        for (int l = 0; l < kVW; ++l) row[b * kVW + l] = src[l * cs + (b - b_lo)];
                    continue;
                }
            }
            for (int64_t b = b_lo; b < b_hi; ++b) {
                float* dst = row + b * kVW;
                const T* sp = src + (b - b_lo) * ws;
                int64_t l = 0;
                for (; l < lanes; ++l) dst[l] = E::load(sp[l * cs]);
                for (; l < kVW; ++l) dst[l] = 0.0f;
            }
        }
        for (int64_t j = 0; j < s.count; ++j) {
            const int64_t t = s.t + j;
            float* dst = V + (t / kNR) * P_.Cp * kNR + (cv * kNR + t % kNR) * kVW;
            input_tile<m>(slab + j * m * kVW, rs, dst, vxi);
        }
    }

    // Transformed filters of panel kp (kMR internal output channels), channels [c0, c1):
    // U[xi][c - c0][kMR] with xi stride uxi. Internal filter f[k, c, r, s] of group g is
    // w[g*K/g + k, c, r, s] (fwd) or, for backward data, w[g*K/g + c, k, 2 - r, 2 - s]
    // (dx channel k <- dy channel c, rotated by 180 degrees). Padding channels get zeros.
    void filter_panel(int64_t g, int64_t kp, int64_t c0, int64_t c1, float* U, int64_t uxi) const {
        alignas(64) float src[9 * kVW];
        const Strides& fs = P_.fs;
        const int64_t kstride = P_.bwd ? fs.channel : fs.outer, cstride = P_.bwd ? fs.outer : fs.channel;
        const T* base = w_ + (P_.bwd ? g * P_.Cg * fs.outer : g * P_.Kg * fs.outer);
        int64_t tap[9];
        for (int r = 0; r < 3; ++r)
            for (int q = 0; q < 3; ++q)
                tap[r * 3 + q] =
                    P_.bwd ? (2 - r) * fs.spatial[0] + (2 - q) * fs.spatial[1] : r * fs.spatial[0] + q * fs.spatial[1];
        // Channels-first filters keep the 9 taps of one (k, c) contiguous: load 8 of them per
        // output channel as one vector and transpose (taps x channels), the 9th one by one.
        const bool contiguous_taps = fs.spatial[1] == 1 && fs.spatial[0] == 3;
        for (int64_t c = c0; c < c1; ++c)
            for (int kv = 0; kv < kMR / kVW; ++kv) {
                float* dst = U + (c - c0) * kMR + kv * kVW;
                const int64_t k0 = kp * kMR + kv * kVW;
                const int64_t lanes = c < P_.Cg ? std::clamp<int64_t>(P_.Kg - k0, 0, kVW) : 0;
                if (lanes == 0) {
                    for (int xi = 0; xi < A2; ++xi) store(dst + xi * uxi, vf{});
                    continue;
                }
                const T* wp = base + k0 * kstride + c * cstride;
                bool done = false;
                if constexpr (std::is_same_v<T, float> && kVW >= 8) {
                    if (contiguous_taps && lanes == kVW) {
                        vf r[kVW];
                        for (int l = 0; l < kVW; ++l) {
                            r[l] = vf{};
                            std::memcpy(&r[l], wp + l * kstride, 8 * sizeof(float));  // taps 0..7
                        }
                        transpose(r);  // r[i] = memory tap i of every lane (i < 8)
                        for (int i = 0; i < 8; ++i) store(src + (P_.bwd ? 8 - i : i) * kVW, r[i]);
                        float* last = src + (P_.bwd ? 0 : 8) * kVW;
                        for (int l = 0; l < kVW; ++l) last[l] = wp[l * kstride + 8];
                        done = true;
                    }
                }
                if (!done) {
                    for (int64_t l = 0; l < kVW; ++l) {
                        if (l >= lanes) {
                            for (int i = 0; i < 9; ++i) src[i * kVW + l] = 0.0f;
                            continue;
                        }
                        for (int i = 0; i < 9; ++i) src[i * kVW + l] = E::load(wp[l * kstride + tap[i]]);
                    }
                }
                filter_tile<m>(src, scale_, dst, uxi);
            }
    }

    // Output transform of tiles [s0, s1) of the group (t0 = index of s0's tile in M), internal
    // output channels [k0, k1), M[xi][tile][ld] with xi stride mxi; written clipped to the output.
    void output(int64_t g, int64_t k0, int64_t k1, int64_t s0, int64_t s1, int64_t t0, const float* M, int64_t ld,
                int64_t mxi) const {
        alignas(64) float tmp[kVW * kVW];
        const Strides& os = P_.os;
        for (int64_t tile = s0; tile < s1; ++tile) {
            const int64_t row = tile / P_.TW, tw = tile % P_.TW, n = row / P_.TH, th = row % P_.TH;
            const int64_t oh0 = P_.oh_lo + th * m, ow0 = P_.ow_lo + tw * m;
            const int rows = static_cast<int>(std::min<int64_t>(m, P_.oh_hi - oh0));
            const int cols = static_cast<int>(std::min<int64_t>(m, P_.ow_hi - ow0));
            for (int64_t kv = k0; kv < k1; kv += kVW) {
                const int64_t lanes = std::min<int64_t>(kVW, k1 - kv);
                vf y[m * m];
                output_tile<m>(M + (tile - s0 + t0) * ld + (kv - k0), mxi, y);
                T* const dst0 = out_ + os.at(n, g * P_.Kg + kv, oh0, ow0);
                if constexpr (std::is_same_v<T, float>) {
                    if (lanes == kVW && os.channel == 1) {  // channels last: one vector per pixel
                        for (int a = 0; a < rows; ++a)
                            for (int b = 0; b < cols; ++b)
                                store(dst0 + a * os.spatial[0] + b * os.spatial[1], y[a * m + b]);
                        continue;
                    }
                    if (lanes == kVW && os.spatial[1] == 1) {
                        // Channels first: transpose groups of kVW output vectors (pixels in row-major
                        // order) so that each channel's pixels are contiguous, then copy tile rows.
                        constexpr int group_rows = std::min(kVW / m, m);  // tile rows per group
                        for (int q0 = 0; q0 < m * m; q0 += kVW) {
                            vf r[kVW];
                            for (int i = 0; i < kVW; ++i) r[i] = q0 + i < m * m ? y[q0 + i] : vf{};
                            transpose(r);
                            const int a0 = q0 / m;
                            float* d = dst0 + a0 * os.spatial[0];
                            if (rows == m && cols == m) {  // whole tile: fixed-size row copies
                                for (int l = 0; l < kVW; ++l, d += os.channel) {
                                    store(tmp, r[l]);
#pragma GCC unroll 4
                                    for (int j = 0; j < group_rows; ++j)
                                        std::memcpy(d + j * os.spatial[0], tmp + j * m, m * sizeof(float));
                                }
                                continue;
                            }
                            const int nr = std::min(group_rows, rows - a0);
                            for (int l = 0; l < kVW; ++l, d += os.channel) {
                                store(tmp, r[l]);
                                for (int j = 0; j < nr; ++j)
                                    std::memcpy(d + j * os.spatial[0], tmp + j * m,
                                                static_cast<std::size_t>(cols) * sizeof(float));
                            }
                        }
                        continue;
                    }
                }
                for (int a = 0; a < rows; ++a)
                    for (int b = 0; b < cols; ++b) {
                        T* d = dst0 + a * os.spatial[0] + b * os.spatial[1];
                        store(tmp, y[a * m + b]);
                        for (int64_t l = 0; l < lanes; ++l) d[l * os.channel] = E::store(tmp[l]);
                    }
            }
        }
    }

    const Plan& P_;
    float* ws_;
    int threads_;
    const T* in_ = nullptr;
    const T* w_ = nullptr;
    T* out_ = nullptr;
    float scale_[A2];
};

template <int m>
class Winograd final : public CpuAlgorithm {
    static_assert(m == 2 || m == 4, "the cost model knows F(2x2,3x3) and F(4x4,3x3)");

public:
    explicit Winograd(std::string id)
        : CpuAlgorithm(std::move(id), Note::winograd, m == 2 ? CpuFamily::winograd_f2x3 : CpuFamily::winograd_f4x3) {}

    Support supports(const ConvProblem& p) const override {
        if (auto e = p.check()) return Support::no("invalid problem: " + *e);
        if (p.spatial_dims != 2) return Support::no("Winograd F(mxm,3x3) here is 2-D only");
        if (p.kernel[0] != 3 || p.kernel[1] != 3) return Support::no("needs a 3x3 kernel");
        if (p.stride[0] != 1 || p.stride[1] != 1) return Support::no("needs stride 1");
        if (p.dilation[0] != 1 || p.dilation[1] != 1) return Support::no("needs dilation 1");
        if (p.direction == Direction::bwd_filter)
            return Support::no(
                "backward filter is not implemented (it needs an F(3x3, tile) algorithm reducing over tiles)");
        if (p.dtype == DataType::f64)
            return Support::no("f64 storage is not supported (transforms are computed in f32)");
        if (const int64_t l = fewest_products(make_plan(p, m)); l < kMinProducts)
            return Support::no(
                "an output is the sum of only " + std::to_string(l) + " products (fewer than " +
                std::to_string(kMinProducts) +
                ": e.g. depthwise, or a corner in the padding); the error bound assumes many comparable terms per "
                "output and does not hold there");
        return Support::yes();
    }

    std::size_t workspace_size(const ConvProblem& p) const override {
        const Plan P = make_plan(p, m);
        return static_cast<std::size_t>(P.shared + omp_get_max_threads() * (P.t1 + P.t2)) * sizeof(float);
    }

    Status run(const ConvProblem& p, const ConvTensors& t, Workspace ws) const override {
        if (const Support s = supports(p); !s) return Status::unsupported(s.reason);
        const Plan P = make_plan(p, m);
        const int64_t avail = static_cast<int64_t>(ws.bytes / sizeof(float)) - P.shared;
        if (ws.data == nullptr || avail < P.t1 + P.t2)
            return Status::failure("workspace too small: " + std::to_string(ws.bytes) + " bytes, need at least " +
                                   std::to_string((P.shared + P.t1 + P.t2) * 4));
        const int threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), avail / (P.t1 + P.t2)));
        cpu::dispatch_dtype(p.dtype, [&](auto e) {
            using E = decltype(e);
            if constexpr (!std::is_same_v<typename E::T, double>) {
                Runner<E, m> r(P, t, static_cast<float*>(ws.data), threads);
                r.run();
            }
        });
        return Status::success();
    }

    double error_bound(const ConvProblem& p) const override {
        const Plan P = make_plan(p, m);
        const Tables& T = tables(m);
        const double rh = growth_1d(T, P.H, P.pt, P.oh_lo, P.oh_hi);
        const double rw = growth_1d(T, P.W, P.pl, P.ow_lo, P.ow_hi);
        const double u = unit_roundoff(DataType::f32);
        const double n = static_cast<double>(P.Cg + transform_depth<m>());
        const double gamma = n * u / (1 - n * u);
        const double b = gamma * std::max(rh, 1.0) * std::max(rw, 1.0);
        if (p.dtype == DataType::f32) return b;
        const double uo = unit_roundoff(p.dtype);
        return b * (1 + uo) + uo;
    }
};

}  // namespace

const Algorithm& cpu_winograd_f2x3() {
    static const Winograd<2> a("cpu.winograd_f2x3");
    return a;
}

const Algorithm& cpu_winograd_f4x3() {
    static const Winograd<4> a("cpu.winograd_f4x3");
    return a;
}

}  // namespace convtune::cpu::CONVTUNE_ISA_NS
