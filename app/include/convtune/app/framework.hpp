// Running one convolution of a framework (PyTorch) through convtune, on the framework's memory:
// the one entry point behind convtune.torch (python/convtune/torch).
//
// The call names its tensors as the framework does, sizes and element strides in logical order
// (x: n, c, spatial...; w: k, c/groups, kernel...; y: n, k, out...), with data pointers it owns.
// framework_problem() turns that into a ConvProblem: the layout comes from the strides (dense
// channels-first, or dense channels-last: PyTorch's channels_last), the same for all three
// tensors; any other strides are refused. run_framework() selects through the context's
// selector for the backend (its tuning cache and database) under the call's flags and runs on
// the caller's pointers: on the caller's stream, with workspace from the caller's allocator.
//
// What convtune cannot take is a value, not an error: the result says why (`fallback`, a short
// category, and `detail`), and the caller runs its own path.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "convtune/convtune.hpp"
#include "convtune/flags.hpp"
#include "convtune/selector.hpp"

namespace convtune::app {

struct FrameworkTensor {
    std::vector<int64_t> sizes;    // logical order
    std::vector<int64_t> strides;  // in elements, one per size
    std::uintptr_t data = 0;       // device memory of the backend
    std::size_t bytes = 0;         // what the caller's storage holds from `data` on
};

struct FrameworkCall {
    std::string direction;  // fwd, bwd_data (writes x), bwd_filter (writes w)
    std::string dtype;      // f32, f16, bf16, f64
    FrameworkTensor x, w, y;
    std::vector<int64_t> stride, padding, dilation;  // one per spatial dim
    int64_t groups = 1;
    std::string backend;  // "cudnn", "cpu", "onednn", ...
    FlagValues flags;
    void* stream = nullptr;     // the backend's stream (CUDA: a cudaStream_t); nullptr: its default
    WorkspaceSource workspace;  // empty: the backend's allocator
};

struct FrameworkResult {
    bool ran = false;
    // Why convtune did not run it, when !ran: "layout" (strides that are neither dense layout),
    // "problem" (not a problem convtune accepts), "pytorch_kernel" (on cudnn: PyTorch itself runs
    // its own kernel here, not cuDNN: pytorch_runs_own_kernel), "unsupported" (no algorithm of the
    // backend can run it under the flags), "failed" (every eligible algorithm failed or ran out
    // of memory); `detail` says more.
    std::string fallback, detail;
    std::optional<ConvProblem> problem;  // the problem, when there was one (its text: problem->to_string())
    std::string algorithm;  // what ran
    std::string source;     // where the decision came from: memory, database, search, heuristic, ...
    double search_ms = 0;   // time this call spent searching
};

// The problem of the call, or the reason it has none ("layout: ..." or the rule it breaks).
std::variant<ConvProblem, std::string> framework_problem(const FrameworkCall& c);

// Where PyTorch (2.x, its convolution backend selection) runs a CUDA convolution with its own
// kernel rather than cuDNN, as far as this rule knows: a depthwise convolution (groups = C > 1, K a
// multiple of C; 1-D ones are viewed as 2-D) in the contiguous memory format in f32 or bf16 goes to
// PyTorch's CUDA depthwise kernels. f16 ones (chosen by PyTorch's table of depthwise workloads)
// and channels-last ones (always cuDNN) are not claimed. The reason, or nullopt.
std::optional<std::string> pytorch_runs_own_kernel(const ConvProblem& p);

// Selects and runs the call on ctx's selector of c.backend. Throws Error only for a backend that
// does not exist or cannot run here (require_available).
FrameworkResult run_framework(Context& ctx, const FrameworkCall& c);

}  // namespace convtune::app
