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
//
// The framework's own requests are data too: framework_refusal() decides, from the names the
// framework gives its tensors' device, layout and dtype and from its flags, whether convtune takes
// a call at all, and flags_from_torch() is what PyTorch's flags mean as convtune's. Both of
// convtune.torch's overrides (Python and C++) call these and keep only what needs PyTorch's
// objects (FakeTensor, tensor subclasses, autograd).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
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
    std::string dtype;      // f32, f16, bf16, f64, or the framework's name of one (framework_dtype)
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
    // "problem" (not a problem convtune accepts), "unsupported" (no algorithm of the backend
    // can run it under the flags), "failed" (every eligible algorithm failed or ran out of
    // memory); `detail` says more.
    std::string fallback, detail;
    std::optional<ConvProblem> problem;  // the problem, when there was one (its text: problem->to_string())
    std::string algorithm;  // what ran
    std::string source;     // where the decision came from: memory, database, search, heuristic, ...
    double search_ms = 0;   // time this call spent searching
};

// PyTorch's flags as values: torch.backends.cudnn's enabled, benchmark, deterministic (also under
// torch.use_deterministic_algorithms), allow_tf32 and benchmark_limit.
struct TorchFlagValues {
    bool enabled = true, benchmark = false, deterministic = false, allow_tf32 = true;
    int64_t benchmark_limit = -1;  // < 0: a PyTorch without the flag (convtune's value stays)
};

// What PyTorch's flags and convtune's selection `policy` mean as convtune's flags, on top of
// `base`: enabled, benchmark, deterministic and allow_tf32 carry over, benchmark_limit where
// PyTorch has it. Throws Error for an unknown policy or a limit out of range.
FlagValues flags_from_torch(FlagValues base, const TorchFlagValues& t, std::string_view policy);

// The keys of convtune's flags that flags_from_torch(.., t, ..) sets, in that order.
std::vector<std::string_view> torch_flag_keys(const TorchFlagValues& t);

// convtune's name of the framework's dtype ("torch.float32" -> "f32"; f16, bf16, f64 likewise),
// or nullptr for one convtune does not run.
const char* framework_dtype(std::string_view framework_name);

// x or w as the framework names them, before convtune looks at sizes or memory.
struct FrameworkOperand {
    std::string_view device;  // the device type: "cpu", "cuda", ...
    int32_t index = -1;       // the device index; -1: none (PyTorch's CPU)
    std::string_view layout;  // "torch.strided", "torch.sparse_coo", ...
    std::string_view dtype;   // "torch.float32", ...
};

// One convolution the framework asks convtune to take.
struct FrameworkRequest {
    std::string_view device;  // the device type convtune runs for: "cpu" or "cuda"
    FrameworkOperand x, w;
    bool transposed = false;
    bool enabled = true;  // torch.backends.cudnn.enabled
    // cuda: the device convtune's handles live on; -1 until the first call taken on "cuda" claims
    // it (atomically: the caller owns it, suitably aligned, and touches it only through here).
    // nullptr: no such rule.
    int32_t* home = nullptr;
    // The convolution's shape, for the rule on where PyTorch runs its own kernel (pytorch_kernel):
    // groups, x's channels, w's output channels, and whether PyTorch's memory format for the call
    // is channels-last (x or w is).
    int64_t groups = 1, channels = 0, out_channels = 0;
    bool channels_last = false;
};

struct FrameworkRefusal {
    const char* category = nullptr;  // a static string (framework_refusal_categories); nullptr: taken
    std::string detail;              // built only when refused
    explicit operator bool() const { return category != nullptr; }
};

// Why convtune does not take the request at all (an empty refusal: it may), the first rule that
// applies of: device (x or w on another device type), layout (not strided), dtype (one convtune
// does not run, or x's and w's differ), transposed, device (cuda: x on another device than
// *home), cudnn_disabled, pytorch_kernel (cuda: pytorch_runs_own_kernel). Allocates nothing when
// the request is taken.
FrameworkRefusal framework_refusal(const FrameworkRequest& r);

// framework_refusal's categories, then run_framework's other fallbacks (problem, unsupported,
// failed; its layout is a refusal's too): every category either can name.
std::span<const char* const> framework_fallback_categories();

// The problem of the call, or the reason it has none ("layout: ..." or the rule it breaks).
std::variant<ConvProblem, std::string> framework_problem(const FrameworkCall& c);

// Whether PyTorch (2.x, its convolution backend selection) runs this CUDA convolution with its own
// kernel rather than cuDNN, as far as this rule knows: a depthwise convolution (groups = C > 1, K a
// multiple of C; 1-D ones are viewed as 2-D) in the contiguous memory format in f32 or bf16 goes to
// PyTorch's CUDA depthwise kernels. f16 ones (chosen by PyTorch's table of depthwise workloads)
// and channels-last ones (always cuDNN) are not claimed. `dtype`: convtune's name (f32, ...).
bool pytorch_runs_own_kernel(int64_t groups, int64_t channels, int64_t out_channels, bool channels_last,
                             std::string_view dtype);

// Selects and runs the call on ctx's selector of c.backend. Throws Error only for a backend that
// does not exist or cannot run here (require_available).
FrameworkResult run_framework(Context& ctx, const FrameworkCall& c);

}  // namespace convtune::app
