// Algorithm: one stateless way to compute a convolution on one backend.
//
// One object serves every thread and every problem (as MIOpen's solvers do): it holds no
// per-problem state, so plans or handles it needs are built inside run() or cached by its
// backend. Its id is persisted in tuning databases, so ids are append-only and never reused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "convtune/problem.hpp"
#include "convtune/tensor.hpp"

namespace convtune {

class Backend;

// Numerical notes, as data (cudnn-frontend's vocabulary). Flags are filters over these:
// deterministic drops NONDETERMINISTIC, fp32 without TF32 drops TENSOR_CORE, and
// DOWN_CONVERT_INPUTS is always dropped by the PyTorch policy.
enum class Note : uint32_t {
    tensor_core = 1u << 0,         // fp32 inputs rounded to TF32 (or half inputs on tensor cores)
    nondeterministic = 1u << 1,    // reruns may differ bitwise (atomics, split reductions)
    down_convert_inputs = 1u << 2, // inputs converted to a narrower type than the problem's
    winograd = 1u << 3,            // transform-domain arithmetic: larger rounding error
    fft = 1u << 4,                 // FFT-domain arithmetic
    reference = 1u << 5,           // naive loops meant for checking, not speed
    layout_conversion = 1u << 6,   // reorders tensors inside the timed run
};

class Notes {
public:
    constexpr Notes() = default;
    constexpr Notes(Note n) : bits_(static_cast<uint32_t>(n)) {}  // NOLINT: implicit by design
    constexpr Notes operator|(Notes o) const { return Notes(bits_ | o.bits_); }
    constexpr bool has(Note n) const { return (bits_ & static_cast<uint32_t>(n)) != 0; }
    constexpr uint32_t bits() const { return bits_; }
    constexpr bool operator==(const Notes&) const = default;
    // "tensor_core,winograd" (empty string when none).
    std::string to_string() const;
    std::vector<std::string_view> names() const;

private:
    constexpr explicit Notes(uint32_t b) : bits_(b) {}
    uint32_t bits_ = 0;
};
constexpr Notes operator|(Note a, Note b) { return Notes(a) | Notes(b); }

// The answer to "can you run this problem?": yes, or no with the reason.
struct Support {
    bool ok = true;
    std::string reason;
    static Support yes() { return {}; }
    static Support no(std::string why) { return {false, std::move(why)}; }
    explicit operator bool() const { return ok; }
};

// Outcome of run(). Failures are values the selector reacts to (try the next candidate).
struct Status {
    enum class Code { ok, unsupported, out_of_memory, failed };
    Code code = Code::ok;
    std::string message;
    static Status success() { return {}; }
    static Status unsupported(std::string m) { return {Code::unsupported, std::move(m)}; }
    static Status out_of_memory(std::string m) { return {Code::out_of_memory, std::move(m)}; }
    static Status failure(std::string m) { return {Code::failed, std::move(m)}; }
    bool ok() const { return code == Code::ok; }
    std::string_view code_name() const;
};

struct Workspace {
    void* data = nullptr;
    std::size_t bytes = 0;
};

class Algorithm {
public:
    virtual ~Algorithm() = default;
    // Stable id, e.g. "cpu.direct", "cpu.winograd_f4x3", "cudnn.fwd.implicit_precomp_gemm.tf32".
    virtual std::string_view id() const = 0;
    virtual const Backend& backend() const = 0;
    // What the algorithm may do on any problem (the union): a listed "deterministic" or "no
    // TF32" holds for every problem it supports.
    virtual Notes notes() const = 0;
    // What it does on p (precondition: supports(p)), a subset of notes(); the flag filters use
    // these, as PyTorch filters a cuDNN engine configuration by the notes it reports for the
    // problem. The default: notes().
    virtual Notes notes_for(const ConvProblem& p) const;
    // Its notes on p where they are known before the costly part of supports(p): whenever
    // supports(p) holds, they equal notes_for(p). The selector applies the flag filters to them
    // first, so a candidate the flags drop costs no full support check, as PyTorch filters cuDNN's
    // engine configurations by their notes before it builds their plans (cuDNN graph engines: the
    // engine is built, its execution plan not; legacy algorithms: fixed notes, no workspace query).
    // nullopt, the default: not known without supports(p).
    virtual std::optional<Notes> notes_before_support(const ConvProblem&) const { return std::nullopt; }
    virtual Support supports(const ConvProblem& p) const = 0;
    // Whether its kernel for p is compiled at run time on first use (precondition: supports(p)):
    // a process that starts with an empty kernel cache pays the compile again on its first call
    // (cuDNN's runtime-compiled engines: CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION, cached on disk in
    // the CUDA kernel cache). A robust search prefers a candidate that is not, where the one that
    // is leads it by no more than the noise (measurement.hpp). Default: false.
    virtual bool compiles_at_first_use(const ConvProblem&) const { return false; }
    virtual std::size_t workspace_size(const ConvProblem& p) const = 0;
    // Computes the direction's output into the tensors (device memory of the backend).
    // Preconditions: supports(p), tensors sized for p, workspace >= workspace_size(p).
    virtual Status run(const ConvProblem& p, const ConvTensors& t, Workspace ws) const = 0;
    // Documented bound on |result - exact| / sum|a*b| for every output element, where the
    // exact result and sum|a*b| (the same convolution of |inputs|) come from the f64 oracle
    // on the same (already rounded) inputs. See docs/algorithms.md for each derivation.
    virtual double error_bound(const ConvProblem& p) const;
};

// The bound of a plain sum of L = p.reduction_length() products accumulated in f32 (f64 for
// f64 data): L * u_acc, plus u_out for rounding the result to the storage type, plus 2 * 2^-11
// when the notes say TENSOR_CORE (both inputs rounded to TF32). WINOGRAD multiplies the
// accumulation term by 64 and FFT by 16: generous caps for backends (cuDNN) whose transforms we
// cannot see; convtune's own Winograd and FFT algorithms override with derived bounds.
double default_error_bound(const ConvProblem& p, Notes notes);
// The absolute term of every algorithm's bound: an output element may differ from the exact value
// by error_bound(p) * sum|a*b| + error_floor(p). It covers the roundings into the subnormal range
// that a relative bound cannot: the output's, subnormal_rounding(p.dtype), and each of the
// accumulator's, 64 * L * subnormal_rounding(accumulator) (64: the largest growth of a transform,
// Winograd's, so that one floor serves every algorithm). Derived in docs/algorithms.md.
double error_floor(const ConvProblem& p);

}  // namespace convtune
