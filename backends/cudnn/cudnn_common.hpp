// Plumbing shared by the cuDNN legacy algorithms and graph-API engines: the per-thread handle,
// status mapping, the tensor shapes cuDNN is given for a ConvProblem, and an owning wrapper for
// cudnnBackendDescriptor_t.
//
// Shapes: cuDNN always receives dims in logical order (n, c, [d,] h, w) / (k, c/g, [kd,] kh, kw)
// with strides that encode convtune's memory order (tensor.hpp), so NCHW and NHWC differ only
// in the strides. A 1-D problem is given to cuDNN as 2-D with a leading H of size 1 (kernel 1,
// stride 1, dilation 1, no padding in H), which describes the same memory.
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "convtune/algorithm.hpp"
#include "convtune/backend.hpp"

namespace convtune::cudnn_detail {

// The calling thread's cuDNN handle (created on first use, on the current CUDA device, bound
// to the thread's stream). nullptr when cudnnCreate fails; `why` receives the reason.
cudnnHandle_t thread_handle(std::string* why = nullptr);

// The stream this thread's cuDNN calls, timings and synchronisations use (nullptr: the legacy
// default stream), and its exchange (Device::exchange_thread_stream): the handle is re-bound.
cudaStream_t thread_stream();
cudaStream_t exchange_thread_stream(cudaStream_t s);

// Why cuDNN cannot run here, or empty when it can. Computed once per process.
const std::string& unavailable_reason();

std::string status_name(cudnnStatus_t s);
bool is_out_of_memory(cudnnStatus_t s);
// ok for SUCCESS; out_of_memory for allocation failures; failure otherwise. `what` names the call.
Status to_status(cudnnStatus_t s, std::string_view what);

cudnnDataType_t data_type(DataType t);
// Accumulation type: f32 for f32/f16/bf16 (what PyTorch asks for half types), f64 for f64.
cudnnDataType_t compute_type(DataType t);

// Dims and strides of one tensor as cuDNN sees it (4 entries for 1-D/2-D, 5 for 3-D).
struct Shape {
    int rank = 4;
    std::array<int64_t, 5> dims{};
    std::array<int64_t, 5> strides{};
};
Shape x_shape(const ConvProblem& p);
Shape w_shape(const ConvProblem& p);
Shape y_shape(const ConvProblem& p);

// Convolution geometry with 1-D mapped to 2-D: `spatial` is 2 or 3. Where pad_end differs from
// pad_begin but pad_begin on both sides gives the same output size (the windows never reach the
// padding that differs), the symmetric form is given: it is the same convolution.
struct Geometry {
    int spatial = 2;
    std::array<int64_t, 3> pad_pre{}, pad_post{}, stride{}, dilation{};
};
Geometry geometry(const ConvProblem& p);

// Owning handle of a cudnnBackendDescriptor_t.
class Desc {
public:
    Desc() = default;
    explicit Desc(cudnnBackendDescriptorType_t type);  // d() is null when creation failed
    ~Desc();
    Desc(Desc&& o) noexcept : d_(o.d_) { o.d_ = nullptr; }
    Desc& operator=(Desc&& o) noexcept;
    Desc(const Desc&) = delete;
    Desc& operator=(const Desc&) = delete;
    cudnnBackendDescriptor_t get() const { return d_; }
    cudnnBackendDescriptor_t* ptr() { return &d_; }
    explicit operator bool() const { return d_ != nullptr; }
    // Never destroys the descriptor (for objects that live until the process ends, when the
    // CUDA context may already be gone).
    void leak() { d_ = nullptr; }

private:
    cudnnBackendDescriptor_t d_ = nullptr;
};

// cudnnBackendSetAttribute helpers; return the cuDNN status.
cudnnStatus_t set(const Desc& d, cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t, int64_t count,
                  const void* v);
inline cudnnStatus_t set_i64(const Desc& d, cudnnBackendAttributeName_t a, int64_t v) {
    return set(d, a, CUDNN_TYPE_INT64, 1, &v);
}
inline cudnnStatus_t set_desc(const Desc& d, cudnnBackendAttributeName_t a, const Desc& v) {
    cudnnBackendDescriptor_t x = v.get();
    return set(d, a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
}

// default_error_bound with two refinements every cuDNN algorithm gets (measured on the H200,
// docs/gpu.md):
//  * TENSOR_CORE on f32: 2 * 2^-10 instead of 2 * 2^-11 for the TF32 inputs: tensor cores read
//    f32 operands by truncation to TF32 unless a kernel rounds them first (bwd_filter eng68
//    measured 1.2 times the round-to-nearest bound);
//  * FFT: the accumulation term also covers the transform, 16 * u * (product of the padded
//    input sizes): an FFT's error scales with the transform length, not the reduction length
//    (bwd_filter eng4 measured 2.3 times the L-based bound on a 4x4 input, L = 2).
double cudnn_error_bound(const ConvProblem& p, Notes notes);

// Padding at least as wide as the (dilated) kernel in some dimension: windows that lie entirely
// in the padding. cuDNN 9.19's non-fused Winograd forward (legacy winograd_nonfused, graph fwd
// eng6) returned garbage (~1e301) on such a problem (3x3 input, 3x3 kernel, padding 3).
bool padding_reaches_kernel(const ConvProblem& p);
inline constexpr const char* kWinogradPadding =
    "padding: cuDNN 9.19's non-fused Winograd forward returned garbage when the padding is as wide as the kernel "
    "(measured on an H200), so convtune refuses it there";

// The last error message cuDNN recorded on this thread (empty when none).
std::string last_error_message();

}  // namespace convtune::cudnn_detail
