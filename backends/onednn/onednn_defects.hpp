// Known defects of oneDNN 2.6.3 implementations: the one place that decides which
// implementation convtune withholds on which problem, and why. Each predicate names the failure
// it was observed with (crash, garbage, wrong values) and where: reproduced here, or only reported
// (AMX classes, which the development machines cannot run).
//
// compute_offers() (onednn_conv.cpp) asks known_defect() for every primitive descriptor oneDNN
// lists: a withheld implementation is refused with the reason (supports() says it), and
// onednn.auto walks convolution_auto's iterator past it to oneDNN's next choice, so the
// automatic choice never runs a withheld implementation either.
//
// Free of oneDNN types so that tests can check the predicates directly, including those of
// classes the test machine cannot run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "convtune/problem.hpp"

namespace convtune::onednn {

// The reason to withhold implementation `impl` (oneDNN's impl_info_str(), e.g.
// "jit_bf16:avx512_core_bf16") for p, or nullopt. `activations_channels_last`: the
// implementation reads and writes the activations (x and y) in a plain channels-last format
// (N[D][H]WC), as it does when built with convtune's layout (plain or plain_data formats).
std::optional<std::string> known_defect(const ConvProblem& p, std::string_view impl, bool activations_channels_last);

// Geometry of spatial dim i, as the predicates read it (input position of output o and tap t:
// o * stride - pad_begin + t * dilation).
// Some output's window lies wholly in the padding (all its taps read outside the input).
bool has_output_wholly_in_padding(const ConvProblem& p, int i);
// Some kernel tap reads only padding, for every output.
bool has_tap_reading_only_padding(const ConvProblem& p, int i);
// Every output's window reads some padding.
bool every_output_reads_padding(const ConvProblem& p, int i);
// The fewest products any output element of p is the exact sum of: per output, the (input,
// weight) pairs of its sum that do not read padding (fwd: C/g x taps reading the input; bwd_data:
// K/g x the (output, tap) pairs reading the input position; bwd_filter: N x the outputs whose
// tap reads the input). 0 where an output is a sum of padding only.
int64_t fewest_products(const ConvProblem& p);
// oneDNN 2.6's brgemm convolution forward (brgconv, not AMX) with virtual padding along the width
// (its exec_vpad mode): whether some blocking it may choose (any width block, output-channel block
// and brgemm row block) leaves a row of its source reads past the end of the width unmasked. In
// oneDNN 2.6.3's brgemm kernel a row block split into one full block of B rows and a tail of T
// rows (B < M < 2B) masks the bottom virtual padding only in the tail; where more than T rows of
// the width block read past the end, the first block reads memory past the source row (garbage).
// `bf16`: the bf16 kernel (its register blocking differs from f32's).
bool brgemm_vpad_misses_bottom_padding(const ConvProblem& p, bool bf16);
// Winograd implementations are withheld below this (the bound's assumption, see known_defect).
inline constexpr int64_t kFewestWinogradProducts = 8;

}  // namespace convtune::onednn
