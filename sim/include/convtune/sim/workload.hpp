// Workload: a network as an ordered list of convolution layers with repeat counts, and what one
// iteration (a forward pass, or a training step) of it calls.
//
// Workloads come from benchdnn shape files (the built-in names map to the peer files, e.g.
// resnet50 -> shapes_resnet_50_v1_5), from plain files of canonical problems, or from convtune's
// own workload format (docs/simulation.md):
//
//     convtune-workload 1
//     name tiny_cnn
//     layer stem  x1 n=2,c=3,k=16,in=32x32,ker=3x3,pad=1x1
//     layer block x3 ic16ih32oc16oh32kh3ph1
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "convtune/problem.hpp"

namespace convtune::sim {

enum class Mode { infer, train };
std::string_view to_string(Mode m);
Mode parse_mode(std::string_view s);  // "infer"/"inference", "train"/"training"; throws ParseError

struct Layer {
    std::string name;
    int repeat = 1;       // how many times the shape occurs in one pass of the network
    ConvProblem problem;  // the forward problem as written (batch, dtype, layout included)
};

struct Workload {
    std::string name;    // built-in name, the file's `name`, or the file's stem
    std::string source;  // the file it was read from
    std::vector<Layer> layers;
    int64_t convolutions() const;  // sum of the repeats: forward convolutions per pass
};

struct BuiltinWorkload {
    std::string_view name, file, description;
};
// Built-in names and the peer shape file each maps to.
std::span<const BuiltinWorkload> builtin_workloads();
// $CONVTUNE_SHAPES_DIR, else the folder configured at build time.
std::string default_shapes_dir();

// An existing file path, else a built-in name resolved in shapes_dir (empty = default_shapes_dir()).
// Throws convtune::Error naming --workload when it is neither, ParseError for a bad file.
Workload load_workload(const std::string& name_or_file, const std::string& shapes_dir = "");
// Parses convtune's workload format, or (without the header line) a benchdnn / canonical shape file.
Workload parse_workload_text(std::string_view text, const std::string& name);

// How a workload is instantiated: the mode, and overrides of the problems' batch, dtype, layout.
struct WorkloadOptions {
    Mode mode = Mode::infer;
    int64_t batch = 0;  // 0 = as written
    std::optional<DataType> dtype;
    std::optional<Layout> layout;
};

// What varies between iterations: the batch (0 = the options'/file's) and a scale per spatial dim
// (outermost first, as ConvProblem::in).
struct Variant {
    int64_t batch = 0;
    std::array<double, 3> scale{1, 1, 1};
    bool operator==(const Variant&) const = default;
    std::string describe(int spatial_dims) const;  // "batch 4, 0.75x1.25"
};

// One entry of an iteration: `count` back-to-back calls of the same problem.
struct Call {
    ConvProblem problem;
    int count = 1;
    std::string layer;
    int flags = -1;  // a trace's: index of the flags recorded for it (Stream::trace_flags()), -1: none
};

// The calls of one iteration. Inference: each layer's forward problem, in order, repeat times.
// Training: that forward pass, then the backward pass in reverse layer order, each layer
// bwd_data then bwd_filter, repeat times each, except that the first layer's first occurrence
// has no bwd_data (the network's input needs no gradient; PyTorch skips it too).
std::vector<Call> instantiate(const Workload& w, const WorkloadOptions& o, const Variant& v = {});

// The problem with its input sizes scaled (rounded to nearest, at least 1 and at least what
// the kernel needs for one output). Kernel, stride, dilation and both paddings are kept, so
// the output sizes follow from the convolution formula.
ConvProblem scale_problem(const ConvProblem& p, const std::array<double, 3>& scale);

}  // namespace convtune::sim
