// The bridge between a ConvProblem and oneDNN 2.6's convolution primitives: descriptors in
// convtune's layouts, the implementations oneDNN offers for a problem, and executable plans
// (the primitive of one implementation plus the reorders between convtune's layouts and the
// implementation's formats).
//
// Internal to the oneDNN backend; nothing here throws dnnl::error to the caller.
#pragma once

#include <dnnl.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "convtune/algorithm.hpp"

namespace convtune::onednn {

// The one CPU engine every primitive is created on.
const dnnl::engine& cpu_engine();
// oneDNN's effective ISA on this machine, e.g. "avx2", "avx512_core_amx".
std::string effective_isa_name();

// The memory formats a descriptor is built with, in convtune's order of preference:
// plain       every tensor in convtune's layout (nothing to reorder);
// plain_data  activations in convtune's layout, weights `any` (the implementation's choice);
// any         every tensor `any` (the implementation's preferred, usually blocked, formats).
enum class Formats { plain, plain_data, any };
std::string_view to_string(Formats f);

// One implementation oneDNN offers for a problem, with the descriptor that yields it.
struct Offer {
    std::string impl;                    // impl_info_str(), e.g. "jit:avx2"
    dnnl::algorithm alg{};               // convolution_direct, _winograd or _auto
    Formats formats = Formats::any;
    bool reorders = false;               // some tensor's format differs from convtune's layout
};

// Everything oneDNN offers for one problem.
struct Offers {
    // Each implementation once, with the first descriptor (in Formats order, then direct before
    // winograd) whose iterator lists it.
    std::vector<Offer> named;
    // oneDNN's own choice: the first implementation of convolution_auto with `any` formats
    // (falling back to plain_data, then plain, when `any` yields nothing).
    std::optional<Offer> automatic;
    // Implementation names in convolution_auto's iterator order (oneDNN's preference).
    std::vector<std::string> auto_order;
    // Why nothing is offered (empty when something is).
    std::string none_reason;
    // Implementations oneDNN lists but convtune withholds for this problem (known defects of
    // the oneDNN build), with the reason.
    std::vector<std::pair<std::string, std::string>> withheld;

    const Offer* find(std::string_view impl) const;
    const std::string* withheld_reason(std::string_view impl) const;
    std::string list() const;  // "a, b, c"
};

// What oneDNN offers for p (uncached; a few dozen microseconds to a few milliseconds).
Offers compute_offers(const ConvProblem& p);

// One reorder of a conversion chain.
struct ReorderStep {
    dnnl::primitive prim;
    dnnl::memory::desc scratch;  // its scratchpad (user mode)
};

// An executable plan: the primitive of one implementation and the reorders around it.
struct Plan {
    std::string impl;
    dnnl::primitive conv;
    // Per tensor x, w, y: convtune's layout, the implementation's format, whether they differ.
    dnnl::memory::desc user_md[3], impl_md[3];
    bool reorder[3] = {false, false, false};
    int arg[3] = {0, 0, 0};  // DNNL_ARG_* of x, w, y for this direction
    int out = 0;             // index of the tensor the direction writes
    // The conversion user -> impl (inputs) or impl -> user (the output): one reorder, or two
    // through a dense intermediate (mid_md) where oneDNN has no direct reorder (e.g. NHWC
    // weights into a Winograd weights format).
    std::vector<ReorderStep> convert[3];
    dnnl::memory::desc mid_md[3];
    // Scratchpads (user mode) of the primitives, all placed at the start of the workspace: they
    // run one after the other, so one region of the largest size serves all.
    dnnl::memory::desc conv_scratch;
    std::size_t scratch_bytes = 0;
    std::size_t offset[3] = {0, 0, 0};      // workspace offsets of the reordered tensors
    std::size_t mid_offset[3] = {0, 0, 0};  // and of the intermediates
    std::size_t workspace_bytes = 0;
};

// Builds the plan of `offer` for p: creates the primitive (JIT compilation) and the reorders.
// Throws dnnl::error / std::runtime_error; the caller turns them into Status.
Plan build_plan(const ConvProblem& p, const Offer& offer);

// Runs a plan on convtune's tensors; the workspace holds at least plan.workspace_bytes.
Status execute_plan(const Plan& plan, const ConvTensors& t, Workspace ws);

// Status for a dnnl::error (out_of_memory when oneDNN says so).
Status status_from(const dnnl::error& e, std::string_view what);

}  // namespace convtune::onednn
