#include "onednn/onednn_defects.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace convtune::onednn {

namespace {

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }
bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// Input position read by output o through tap t along dim i.
int64_t position(const ConvProblem& p, int i, int64_t o, int64_t t) {
    const auto u = static_cast<std::size_t>(i);
    return o * p.stride[u] - p.pad_begin[u] + t * p.dilation[u];
}
bool inside(const ConvProblem& p, int i, int64_t pos) { return pos >= 0 && pos < p.in[static_cast<std::size_t>(i)]; }

bool any_dim(const ConvProblem& p, bool (*pred)(const ConvProblem&, int)) {
    for (int i = 0; i < p.spatial_dims; ++i)
        if (pred(p, i)) return true;
    return false;
}

bool negative_end_padding(const ConvProblem& p) {
    for (int i = 0; i < p.spatial_dims; ++i)
        if (p.pad_end[static_cast<std::size_t>(i)] < 0) return true;
    return false;
}

bool strided(const ConvProblem& p) {
    for (int i = 0; i < p.spatial_dims; ++i)
        if (p.stride[static_cast<std::size_t>(i)] > 1) return true;
    return false;
}

// A real dilation along dim i: > 1 where the kernel has more than one tap (a 1-tap kernel reads
// the same input whatever its dilation).
bool dilated(const ConvProblem& p, int i) {
    const auto u = static_cast<std::size_t>(i);
    return p.dilation[u] > 1 && p.kernel[u] > 1;
}

std::string named(std::string_view impl, std::string_view what) {
    return "oneDNN 2.6's " + std::string(impl) + " " + std::string(what);
}

int64_t div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The row block (bd_block) oneDNN 2.6.3's brgemm_blocking() picks for an f32 or bf16 (not AMX)
// AVX-512 kernel of m rows and n columns when at most `cap` rows fit the L1 footprint limit;
// the same float arithmetic, so that ties break as there.
int64_t brgemm_row_block(int64_t m, int64_t n, bool bf16, int64_t cap) {
    const int64_t ldb = n / 16, ldb2 = ldb / 4, ldb2_tail = ldb % 4;
    const bool embd_bcst = !bf16 && ldb2_tail <= 1 && ldb2 == 0;
    const int64_t ld_block = ldb2 != 0 ? 4 : ldb2_tail;
    const int adj = ld_block == 0 ? 1 : static_cast<int>(ld_block);
    const int max_regs = 32 - (adj + 1);
    const int max_block = (embd_bcst ? 28 : max_regs) / adj;
    float best_eff = 0.f;
    int64_t best = 1;
    for (int b = std::min<int64_t>(max_block, cap); b >= 1; --b) {
        const float disb = static_cast<float>(m) / static_cast<float>((m + b - 1) / b * b);
        const float micro =
            (static_cast<float>(adj) * static_cast<float>(b)) / static_cast<float>((adj + b) * max_block);
        const float eff = disb * micro;
        if (eff > best_eff) {
            best = b;
            best_eff = eff;
        }
    }
    return best;
}

// The most rows of the width block [o0, o0 + m) whose last tap reads past the input's end:
// oneDNN's bottom virtual padding of that block (for its last tap, the largest).
int64_t bottom_vpad(const ConvProblem& p, int i, int64_t o0, int64_t m) {
    const auto u = static_cast<std::size_t>(i);
    const int64_t s = p.stride[u], last = o0 * s - p.pad_begin[u] + (p.kernel[u] - 1) * p.dilation[u];
    const int64_t past = last + (m - 1) * s + 1 - p.in[u];
    return past > 0 ? div_up(past, s) : 0;
}

}  // namespace

bool brgemm_vpad_misses_bottom_padding(const ConvProblem& p, bool bf16) {
    const int w = p.spatial_dims - 1;
    const auto u = static_cast<std::size_t>(w);
    const int64_t kw = p.kernel[u], s = p.stride[u], iw = p.in[u], ow = p.out(w);
    // exec_vpad is tried only where neither padding reaches a whole kernel (in strides); oneDNN
    // takes the end padding the outputs use, (ow - 1) * s + extent - iw - pad_begin.
    const int64_t extent = (kw - 1) * p.dilation[u] + 1, r_pad = (ow - 1) * s + extent - iw - p.pad_begin[u];
    auto pad_steps = [&](int64_t pad) { return pad > 0 ? div_up(pad, s) : 0; };
    if (pad_steps(p.pad_begin[u]) >= kw || pad_steps(r_pad) >= kw) return false;
    // Output-channel blocks oneDNN may take (16 to 64; fast_check_oc_block() admits 64 and 48
    // only for some channel counts) and its kernels' column counts: the block and the tail of
    // the channels per group.
    const int64_t oc = p.k_per_group(), rnd_oc = (oc + 15) / 16 * 16, elem_size = bf16 ? 2 : 4;
    int64_t input_size = 1, strides = 1;
    for (int i = 0; i < p.spatial_dims; ++i) {
        input_size *= p.in[static_cast<std::size_t>(i)];
        strides *= p.stride[static_cast<std::size_t>(i)];
    }
    std::vector<int64_t> columns;
    for (int64_t block = 16; block <= 64 && block <= rnd_oc; block += 16) {
        if (block == 64 && !(rnd_oc % 64 == 0 && rnd_oc * elem_size < 192 * 4)) continue;
        if (block == 48 && !(rnd_oc % 48 == 0 && rnd_oc * elem_size <= 384 * 4 && input_size > 81 * strides)) continue;
        if (oc >= block) columns.push_back(block);
        if (oc % block != 0) columns.push_back(oc % block);
    }
    // The row block is capped where its source rows (input-channel block x row block) exceed the
    // L1 data cache: with an input-channel block of at most the channels per group (rounded to
    // 16) and at least 32 KiB of L1 (every AVX-512 core), the cap is at least this.
    const int64_t min_cap = std::max<int64_t>(1, 32768 / (elem_size * ((p.c_per_group() + 15) / 16 * 16)));
    // Every width block oneDNN may take (ceil(ow / k) for k = 1..ow: its choice depends on the
    // thread count and the caches; exec_vpad needs the block's input span within the width),
    // every cap on the row block from min_cap up: the misses of any of them.
    int64_t previous = 0;
    for (int64_t k = 1; k <= ow; ++k) {
        const int64_t block = div_up(ow, k);
        if (block == previous) continue;
        previous = block;
        if ((block - 1) * s + 1 > iw) continue;
        const int64_t full = ow / block, tail = ow % block;
        // The last full block has the most bottom padding of the full blocks; then the tail.
        const std::pair<int64_t, int64_t> blocks[] = {{block, (full - 1) * block}, {tail, full * block}};
        for (auto [m, o0] : blocks) {
            if (m < 2) continue;
            const int64_t v = bottom_vpad(p, w, o0, m);
            if (v < 2) continue;  // one padded row always lies in the tail (M - B >= 1)
            for (int64_t n : columns)
                for (int64_t cap = std::min<int64_t>(min_cap, 30); cap <= 30; ++cap) {
                    const int64_t b = brgemm_row_block(m, n, bf16, cap);
                    if (b < m && m < 2 * b && v > m - b) return true;
                }
        }
    }
    return false;
}

bool has_output_wholly_in_padding(const ConvProblem& p, int i) {
    const auto u = static_cast<std::size_t>(i);
    for (int64_t o = 0; o < p.out(i); ++o) {
        bool reads_input = false;
        for (int64_t t = 0; t < p.kernel[u] && !reads_input; ++t) reads_input = inside(p, i, position(p, i, o, t));
        if (!reads_input) return true;
    }
    return false;
}

bool has_tap_reading_only_padding(const ConvProblem& p, int i) {
    const auto u = static_cast<std::size_t>(i);
    for (int64_t t = 0; t < p.kernel[u]; ++t) {
        bool reads_input = false;
        for (int64_t o = 0; o < p.out(i) && !reads_input; ++o) reads_input = inside(p, i, position(p, i, o, t));
        if (!reads_input) return true;
    }
    return false;
}

bool every_output_reads_padding(const ConvProblem& p, int i) {
    const auto u = static_cast<std::size_t>(i);
    for (int64_t o = 0; o < p.out(i); ++o) {
        bool pads = false;
        for (int64_t t = 0; t < p.kernel[u] && !pads; ++t) pads = !inside(p, i, position(p, i, o, t));
        if (!pads) return false;
    }
    return true;
}

int64_t fewest_products(const ConvProblem& p) {
    int64_t fewest = p.direction == Direction::fwd        ? p.c_per_group()
                     : p.direction == Direction::bwd_data ? p.k_per_group()
                                                          : p.n;
    for (int i = 0; i < p.spatial_dims; ++i) {
        const auto u = static_cast<std::size_t>(i);
        const int64_t out = p.out(i), ker = p.kernel[u], in = p.in[u];
        int64_t dim_fewest = INT64_MAX;
        if (p.direction == Direction::fwd) {  // taps of each output that read the input
            for (int64_t o = 0; o < out; ++o) {
                int64_t n = 0;
                for (int64_t t = 0; t < ker; ++t) n += inside(p, i, position(p, i, o, t)) ? 1 : 0;
                dim_fewest = std::min(dim_fewest, n);
            }
        } else if (p.direction == Direction::bwd_data) {  // (output, tap) pairs that read each input position
            std::vector<int64_t> n(static_cast<std::size_t>(in), 0);
            for (int64_t o = 0; o < out; ++o)
                for (int64_t t = 0; t < ker; ++t)
                    if (const int64_t x = position(p, i, o, t); inside(p, i, x)) ++n[static_cast<std::size_t>(x)];
            for (int64_t v : n) dim_fewest = std::min(dim_fewest, v);
        } else {  // outputs that each tap reads the input through
            for (int64_t t = 0; t < ker; ++t) {
                int64_t n = 0;
                for (int64_t o = 0; o < out; ++o) n += inside(p, i, position(p, i, o, t)) ? 1 : 0;
                dim_fewest = std::min(dim_fewest, n);
            }
        }
        fewest *= dim_fewest;
    }
    return fewest;
}

std::optional<std::string> known_defect(const ConvProblem& p, std::string_view impl, bool activations_channels_last) {
    const bool bf16 = p.dtype == DataType::bf16;

    // Not a defect of oneDNN but of the bound convtune checks its Winograd against (as for
    // cpu.winograd_*, docs/algorithms-winograd.md "Outputs of few products"): an output that is
    // the sum of a few products has an error proportional to the magnitudes of its whole tile,
    // unbounded relative to its own sum|a*b|. Found by tests/test_random_differential:
    // jit_wino_4x3 backward weights on in=2x2, pad 1, n=1 (corner taps: one product), 3.3e-3
    // against a bound of 2.1e-4 (C=96). Withheld where an output has fewer than 8 products.
    if (contains(impl, "wino") && fewest_products(p) < kFewestWinogradProducts)
        return named(impl, "(Winograd) on a problem where an output is the sum of fewer than " +
                               std::to_string(kFewestWinogradProducts) +
                               " products: its error bound does not hold there");

    // jit_1x1 backward weights, strided, channels-last source with fewer input channels than one
    // SIMD register holds: valgrind reports out-of-bounds reads and writes inside the kernel, and
    // results are wrong or the heap is corrupted, with one thread or more (reproduced, AVX2).
    if (p.direction == Direction::bwd_filter && starts_with(impl, "jit_1x1:")) {
        const int64_t simd = contains(impl, "avx512") ? 16 : 8;
        if (strided(p) && p.c_per_group() < simd && activations_channels_last)
            return named(
                impl,
                "backward-weights kernel reads and writes out of bounds for strided 1x1 convolutions on channels-last "
                "data with fewer than " +
                    std::to_string(simd) + " input channels per group");
    }

    // Winograd backward data with different begin and end padding: results off by more than the
    // magnitude of the exact sums (sweep problem "asymmetric pad", 13x13, pad 0 / pad_end 1).
    if (p.direction == Direction::bwd_data && contains(impl, "wino"))
        for (int i = 0; i < p.spatial_dims; ++i)
            if (p.pad_begin[static_cast<std::size_t>(i)] != p.pad_end[static_cast<std::size_t>(i)])
                return named(impl, "backward-data kernel returns wrong results when begin and end padding differ");

    // Issue 35. brgconv:avx512_core_amx_bf16 forward: SIGSEGV (7 of 186 problems) with stride > 1
    // where an output row lies wholly in the end padding, e.g. in=3x4, ker=1x3, stride=2x1,
    // pad_end=2x0 (reported from an AMX machine; not reproducible without AMX). Withheld wherever
    // some output's window lies wholly in the padding, begin or end, any stride: such outputs
    // need padding at least the kernel's extent, which ordinary layers never have.
    if (p.direction == Direction::fwd && starts_with(impl, "brgconv") && contains(impl, "amx") &&
        any_dim(p, has_output_wholly_in_padding))
        return named(impl, "forward kernel crashes (SIGSEGV) where an output's window lies wholly in the padding");

    // Issue 35. brgconv:avx512_core (f32) and brgconv:avx512_core_bf16 forward: wrong values,
    // garbage that changes from run to run (reproduced with oneDNN alone). Not a race: the brgemm
    // kernel reads source memory past the end of the width (brgemm_vpad_misses_bottom_padding).
    // Which width block oneDNN takes depends on the thread count (more blocks for more threads),
    // so a problem may fail with 2 threads and pass with 1, 3 or 4, or fail with 1 thread only
    // (e.g. c=32, k=64, in=7, ker=9, pad=4); any thread count is withheld. Needs an end padding
    // of 2 or more along the width: "same" 3-wide kernels (padding 1) are never affected.
    if (p.direction == Direction::fwd && starts_with(impl, "brgconv:") && !contains(impl, "amx") &&
        brgemm_vpad_misses_bottom_padding(p, bf16))
        return named(
            impl,
            "forward kernel reads past the end of the input width where an output block's bottom virtual padding "
            "exceeds its row tail (wrong values)");

    // Issue 35, found by tests/test_random_differential (seed 44, case 11945, first on an AMX host
    // through onednn.auto, then reproduced on an AVX-512 machine with avx512_bf16, 2 and 16
    // threads): brgconv:avx512_core_bf16 forward corrupts the heap ("double free or corruption",
    // SIGSEGV) on nwc n=2 c=99 k=192 g=3 in=10 ker=3 stride=3 dil=3 pad=3 pad_end=-2 (and -1; and the
    // same along the width of a 2-D problem, and in ncw). Neighbours pass: pad_end 0 or 1, dilation
    // 1 or 2, begin padding 2, input widths 13 and 30, g=1 or 2, the f32 brgconv. Withheld where a dim
    // has a negative end padding and a real dilation (> 1 with a kernel size > 1), which covers
    // every failing case seen and no ordinary layer (those have neither).
    if (p.direction == Direction::fwd && bf16 && starts_with(impl, "brgconv:") && !contains(impl, "amx") &&
        any_dim(
            p, [](const ConvProblem& q, int d) { return q.pad_end[static_cast<std::size_t>(d)] < 0 && dilated(q, d); }))
        return named(impl, "forward kernel corrupts the heap with a negative end padding along a dilated dim");

    // Issue 35. Backward weights of jit:avx512_core_amx_bf16 (8 of 464) and
    // jit_bf16:avx512_core_bf16 (5 of 425; reproduced here): garbage or NaN, different from one
    // process to the next (uninitialised memory), where a kernel tap reads only padding (e.g.
    // in=3x2, ker=3x7, stride=2x3, pad=0x3), and in 3-D with a strided depth where every output
    // depth reads padding (e.g. input depth 3, kernel 3, stride 2, pad 1; reproduced). Ordinary
    // 2-D layers (padding below the kernel's extent) are not affected; 3-D ones only with a
    // strided depth of 2 or 3 outputs, or a negative end padding (below). (The third reported kind, a 1x1 kernel with
    // dilation > 1, never reaches oneDNN: onednn_conv.cpp passes dilation 1 where the kernel size is 1, the same
    // convolution.)
    if (p.direction == Direction::bwd_filter && bf16 &&
        ((starts_with(impl, "jit:") && contains(impl, "amx")) || starts_with(impl, "jit_bf16:"))) {
        if (any_dim(p, has_tap_reading_only_padding))
            return named(
                impl,
                "backward-weights kernel leaves uninitialised (garbage) weights gradients where a kernel tap reads "
                "only padding");
        if (p.spatial_dims == 3 && p.stride[0] > 1 && every_output_reads_padding(p, 0))
            return named(
                impl,
                "backward-weights kernel returns garbage in 3-D with a strided depth where every output depth reads "
                "padding");
        // Found by tests/test_random_differential (reproduced): 3-D with a
        // negative end padding in height, e.g. in=4x5x4, ker=1x1x1, stride=1x3x1, pad_end=0x-2x0;
        // withheld for a negative end padding in any dim of a 3-D problem (2-D ones pass).
        if (p.spatial_dims == 3 && negative_end_padding(p))
            return named(impl, "backward-weights kernel returns garbage in 3-D with negative end padding");
    }

    // Issue 35, on a Xeon with AMX (the GPU machine's host, 16 threads, 2026-12-07,
    // tests/test_random_differential, seed 43, case 7194): jit:avx512_core_amx_bf16 backward weights
    // returned garbage (errors of 1e17) on nhwc n=1 c=33 k=9 in=13x8 ker=4x5 dil=3x1 pad=4x3, where no
    // tap reads only padding. The other report of this implementation (a 1x1 kernel with
    // dilation > 1 and C=33) was dilated too. Not reproducible without AMX (the same problem passes
    // on AVX-512 with avx512_bf16). Withheld for every real dilation (> 1 along a dim whose kernel
    // size is > 1); undilated layers keep it.
    if (p.direction == Direction::bwd_filter && bf16 && starts_with(impl, "jit:") && contains(impl, "amx") &&
        any_dim(p, dilated))
        return named(impl, "backward-weights kernel returns garbage on dilated convolutions (seen on AMX)");

    // Issue 35, the AMX sweeps (tests/test_random_differential on a Xeon with AMX, 16 threads):
    // jit_bf16_1x1:avx512_core_bf16 backward weights returned wrong values on strided channels-last
    // problems: seed 43 case 15865, nwc n=2 c=13 k=8 in=42 stride=2 (scaled error 0.23), and seed 45
    // case 18728, nhwc n=3 c=8 k=32 in=18x18 stride=2x2 (2.8e-2 against a bound of 3.9e-3). The first
    // was withheld for its odd input channel count until the second (c=8) showed that the count is
    // not the cause; what both share is a stride > 1 on channels-last data (and an odd number of output
    // positions per image, 21 and 81). Neither is reproducible on an AVX-512 machine with avx512_bf16
    // (2 to 16 threads). Withheld for every stride > 1 on channels-last data; blocked layouts and
    // unstrided problems keep it.
    if (p.direction == Direction::bwd_filter && starts_with(impl, "jit_bf16_1x1:") && activations_channels_last &&
        strided(p))
        return named(impl,
                     "backward-weights kernel returns wrong values on strided channels-last problems (seen on AMX)");

    // Issue 35, on a Xeon with AMX (2026-12-07, tests/test_random_differential, seed 43): the
    // jit_1x1:avx512_core_amx_bf16 forward aborts the process (SIGABRT) on 1-D and 3-D problems,
    // channels-first and channels-last alike: nwc n=3 c=128 k=16 in=45; ncw n=1 c=128 k=64 in=39;
    // ndhwc n=1 c=48 k=64 in=3x3x3 and n=3 c=64 k=32 in=3x3x3 (1x1 kernel, stride 1, no padding).
    // Every crash seen was 1-D or 3-D; the 2-D problems the sweep ran before each crash did not
    // crash (how many reached this implementation was not recorded). Withheld for 1-D and 3-D;
    // not reproducible without AMX.
    // Run again with that refusal (the same host, seed 44): the 2-D forward corrupts the heap too
    // ("double free or corruption", "free(): invalid next size": the process aborts) on nhwc n=3 c=32
    // k=32 in=6x6 and nchw n=3 c=32 k=16 in=6x6 (1x1, stride 1, no padding). Withheld for every problem.
    if (p.direction == Direction::fwd && starts_with(impl, "jit_1x1:") && contains(impl, "amx"))
        return named(impl, "forward kernel corrupts the heap or aborts the process (SIGABRT) (seen on AMX)");

    // Issue 35, the same AMX host (seed 43, case 19039): brgconv_1x1:avx512_core_amx_bf16 forward
    // returned infinities on ndhwc n=1 c=48 k=8 in=4x7x7 with a depth stride of 2 (1x1x1 kernel).
    // Withheld for 3-D problems with a stride > 1; 2-D strided 1x1 layers (ResNet's downsampling)
    // keep it (none failed in 60,000 random cases).
    if (p.direction == Direction::fwd && starts_with(impl, "brgconv_1x1:") && contains(impl, "amx") &&
        p.spatial_dims == 3 && strided(p))
        return named(impl, "forward kernel returns infinities on strided 3-D problems (seen on AMX)");

    // Issue 35. jit_bf16_1x1:avx512_core_bf16 forward: wrong values (2 of 53; reproduced) on
    // channels-last data with an odd number of input channels per group, e.g. nwc, c=3, k=32,
    // in=118; backward data likewise with an odd number of output channels per group (its
    // reduction). bf16 pairs channels for its dot products (vdpbf16ps); the plain channels-last
    // tail of an odd count is read as a whole pair. Even channel counts (every ResNet layer) are
    // not affected; blocked (nchw-derived) formats pad the channels and are not affected either.
    if (starts_with(impl, "jit_bf16_1x1:") && activations_channels_last &&
        ((p.direction == Direction::fwd && p.c_per_group() % 2 != 0) ||
         (p.direction == Direction::bwd_data && p.k_per_group() % 2 != 0)))
        return named(
            impl,
            "kernel returns wrong values on channels-last data with an odd number of reduction channels per group");

    // Issue 35. jit:avx2 backward weights, f32: garbage or SIGSEGV (2 of 399, also on AVX2-only
    // machines; reproduced) with negative end padding, e.g. in=8x4, ker=7x7, stride=2x2, pad=3x3,
    // pad_end=-1x3. Every failure seen (this one; in=8x8 likewise) also has a dim where every
    // output reads padding (there a tap reads only padding too); the same shapes with an output
    // clear of the padding (in=10x8, 12x8, 16x8; stride 3) pass. Withheld where both hold, so
    // that the negative end padding of benchdnn's 1x1 stride-2 downsampling layers (ResNet-50's
    // res3a/4a/5a_branch1, pad_end=-1x-1) keeps this kernel.
    if (p.direction == Direction::bwd_filter && impl == "jit:avx2" && negative_end_padding(p) &&
        (any_dim(p, every_output_reads_padding) || any_dim(p, has_tap_reading_only_padding)))
        return named(
            impl,
            "backward-weights kernel crashes (SIGSEGV) or returns garbage with negative end padding where every output "
            "of a dim reads padding");

    return std::nullopt;
}

}  // namespace convtune::onednn
