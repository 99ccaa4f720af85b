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

std::string named(std::string_view impl, std::string_view what) { return "oneDNN 2.6's " + std::string(impl) + " " + std::string(what); }

}  // namespace

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
    int64_t fewest = p.direction == Direction::fwd ? p.c_per_group() : p.direction == Direction::bwd_data ? p.k_per_group() : p.n;
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
        return named(impl, "(Winograd) on a problem where an output is the sum of fewer than " + std::to_string(kFewestWinogradProducts) +
                               " products: its error bound does not hold there");

    // jit_1x1 backward weights, strided, channels-last source with fewer input channels than one
    // SIMD register holds: valgrind reports out-of-bounds reads and writes inside the kernel, and
    // results are wrong or the heap is corrupted, with one thread or more (reproduced, AVX2).
    if (p.direction == Direction::bwd_filter && starts_with(impl, "jit_1x1:")) {
        const int64_t simd = contains(impl, "avx512") ? 16 : 8;
        if (strided(p) && p.c_per_group() < simd && activations_channels_last)
            return named(impl, "backward-weights kernel reads and writes out of bounds for strided 1x1 convolutions on channels-last data with fewer than " +
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
    if (p.direction == Direction::fwd && starts_with(impl, "brgconv") && contains(impl, "amx") && any_dim(p, has_output_wholly_in_padding))
        return named(impl, "forward kernel crashes (SIGSEGV) where an output's window lies wholly in the padding");

    // Issue 35. Backward weights of jit:avx512_core_amx_bf16 (8 of 464) and
    // jit_bf16:avx512_core_bf16 (5 of 425; reproduced here): garbage or NaN, different from one
    // process to the next (uninitialised memory), where a kernel tap reads only padding (e.g.
    // in=3x2, ker=3x7, stride=2x3, pad=0x3), and in 3-D with a strided depth where every output
    // depth reads padding (e.g. input depth 3, kernel 3, stride 2, pad 1; reproduced). Ordinary
    // 2-D layers (padding below the kernel's extent) are not affected; 3-D ones only with a
    // strided depth of 2 or 3 outputs, or a negative end padding (below). (The third reported kind, a 1x1 kernel with dilation > 1, never reaches oneDNN:
    // onednn_conv.cpp passes dilation 1 where the kernel size is 1, the same convolution.)
    if (p.direction == Direction::bwd_filter && bf16 &&
        ((starts_with(impl, "jit:") && contains(impl, "amx")) || starts_with(impl, "jit_bf16:"))) {
        if (any_dim(p, has_tap_reading_only_padding))
            return named(impl, "backward-weights kernel leaves uninitialised (garbage) weights gradients where a kernel tap reads only padding");
        if (p.spatial_dims == 3 && p.stride[0] > 1 && every_output_reads_padding(p, 0))
            return named(impl, "backward-weights kernel returns garbage in 3-D with a strided depth where every output depth reads padding");
        // Found by tests/test_random_differential (reproduced): 3-D with a
        // negative end padding in height, e.g. in=4x5x4, ker=1x1x1, stride=1x3x1, pad_end=0x-2x0;
        // withheld for a negative end padding in any dim of a 3-D problem (2-D ones pass).
        if (p.spatial_dims == 3 && negative_end_padding(p))
            return named(impl, "backward-weights kernel returns garbage in 3-D with negative end padding");
    }

    // Issue 35. jit_bf16_1x1:avx512_core_bf16 forward: wrong values (2 of 53; reproduced) on
    // channels-last data with an odd number of input channels per group, e.g. nwc, c=3, k=32,
    // in=118; backward data likewise with an odd number of output channels per group (its
    // reduction). bf16 pairs channels for its dot products (vdpbf16ps); the plain channels-last
    // tail of an odd count is read as a whole pair. Even channel counts (every ResNet layer) are
    // not affected; blocked (nchw-derived) formats pad the channels and are not affected either.
    if (starts_with(impl, "jit_bf16_1x1:") && activations_channels_last &&
        ((p.direction == Direction::fwd && p.c_per_group() % 2 != 0) || (p.direction == Direction::bwd_data && p.k_per_group() % 2 != 0)))
        return named(impl, "kernel returns wrong values on channels-last data with an odd number of reduction channels per group");

    // Issue 35. jit:avx2 backward weights, f32: garbage or SIGSEGV (2 of 399, also on AVX2-only
    // machines; reproduced) with negative end padding, e.g. in=8x4, ker=7x7, stride=2x2, pad=3x3,
    // pad_end=-1x3. Every failure seen (this one; in=8x8 likewise) also has a dim where every
    // output reads padding (there a tap reads only padding too); the same shapes with an output
    // clear of the padding (in=10x8, 12x8, 16x8; stride 3) pass. Withheld where both hold, so
    // that the negative end padding of benchdnn's 1x1 stride-2 downsampling layers (ResNet-50's
    // res3a/4a/5a_branch1, pad_end=-1x-1) keeps this kernel.
    if (p.direction == Direction::bwd_filter && impl == "jit:avx2" && negative_end_padding(p) &&
        (any_dim(p, every_output_reads_padding) || any_dim(p, has_tap_reading_only_padding)))
        return named(impl, "backward-weights kernel crashes (SIGSEGV) or returns garbage with negative end padding where every output of a dim reads padding");

    return std::nullopt;
}

}  // namespace convtune::onednn
