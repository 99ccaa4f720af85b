#include "cudnn/cudnn_common.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <mutex>

namespace convtune::cudnn_detail {

namespace {

struct HandleHolder {
    cudnnHandle_t handle = nullptr;
    std::string error;
    HandleHolder() {
        const cudnnStatus_t s = cudnnCreate(&handle);
        if (s != CUDNN_STATUS_SUCCESS) {
            handle = nullptr;
            error = "cudnnCreate failed: " + status_name(s);
            const std::string detail = last_error_message();
            if (!detail.empty()) error += " (" + detail + ")";
        }
    }
    // Never destroyed: a thread's handle lives until the process ends (at exit the CUDA runtime
    // may already have torn the context down, and cudnnDestroy would then touch freed state).
};

}  // namespace

namespace {
thread_local cudaStream_t tl_stream = nullptr;
}

cudnnHandle_t thread_handle(std::string* why) {
    thread_local HandleHolder h;
    if (!h.handle && why) *why = h.error;
    return h.handle;
}

cudaStream_t thread_stream() { return tl_stream; }

cudaStream_t exchange_thread_stream(cudaStream_t s) {
    const cudaStream_t old = tl_stream;
    if (cudnnHandle_t h = thread_handle(); h && s != old) cudnnSetStream(h, s);
    tl_stream = s;
    return old;
}

const std::string& unavailable_reason() {
    static const std::string reason = []() -> std::string {
        int count = 0;
        const cudaError_t e = cudaGetDeviceCount(&count);
        if (e != cudaSuccess)
            return std::string("no usable GPU: cudaGetDeviceCount failed (") + cudaGetErrorName(e) + ": " +
                   cudaGetErrorString(e) + ")";
        if (count == 0) return "no usable GPU: no CUDA device found";
        const size_t v = cudnnGetVersion();
        if (v / 10000 != CUDNN_MAJOR)
            return "cuDNN version mismatch: built against " + std::to_string(CUDNN_MAJOR) + ".x, loaded " +
                   std::to_string(v);
        // Each sub-library is loaded on first use; a missing one would otherwise surface as an
        // obscure failure in the middle of a search.
        for (auto [check, name] :
             {std::pair{&cudnnGraphVersionCheck, "libcudnn_graph"}, std::pair{&cudnnOpsVersionCheck, "libcudnn_ops"},
              std::pair{&cudnnCnnVersionCheck, "libcudnn_cnn"}}) {
            const cudnnStatus_t s = check();
            if (s != CUDNN_STATUS_SUCCESS)
                return std::string(name) + " is not usable: " + status_name(s) + " (is it on LD_LIBRARY_PATH?)";
        }
        std::string why;
        if (!thread_handle(&why)) return why;
        return {};
    }();
    return reason;
}

std::string status_name(cudnnStatus_t s) {
    return std::string(cudnnGetErrorString(s)) + " (" + std::to_string(static_cast<int>(s)) + ")";
}

bool is_out_of_memory(cudnnStatus_t s) {
    return s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
           s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED;
}

std::string last_error_message() {
    char buf[512] = {0};
    cudnnGetLastErrorString(buf, sizeof buf);
    return buf;
}

Status to_status(cudnnStatus_t s, std::string_view what) {
    if (s == CUDNN_STATUS_SUCCESS) return Status::success();
    std::string m = std::string(what) + ": " + status_name(s);
    const std::string detail = last_error_message();
    if (!detail.empty()) m += " (" + detail + ")";
    if (is_out_of_memory(s)) return Status::out_of_memory(m);
    return Status::failure(m);
}

cudnnDataType_t data_type(DataType t) {
    switch (t) {
        case DataType::f32: return CUDNN_DATA_FLOAT;
        case DataType::f16: return CUDNN_DATA_HALF;
        case DataType::bf16: return CUDNN_DATA_BFLOAT16;
        case DataType::f64: return CUDNN_DATA_DOUBLE;
    }
    return CUDNN_DATA_FLOAT;
}

cudnnDataType_t compute_type(DataType t) { return t == DataType::f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT; }

namespace {

// Dims (outer, channels, spatial...) with 1-D mapped to 2-D, and packed strides for the layout:
// channels-first packs n, c, spatial; channels-last packs n, spatial, c (c innermost).
Shape make_shape(const ConvProblem& p, int64_t outer, int64_t channels, const Dims& sizes) {
    Shape s;
    const int sd = p.spatial_dims == 1 ? 2 : p.spatial_dims;
    s.rank = 2 + sd;
    s.dims[0] = outer;
    s.dims[1] = channels;
    if (p.spatial_dims == 1) {
        s.dims[2] = 1;
        s.dims[3] = sizes[0];
    } else {
        for (int i = 0; i < sd; ++i) s.dims[static_cast<std::size_t>(2 + i)] = sizes[static_cast<std::size_t>(i)];
    }
    int64_t spatial = 1;
    for (int i = 0; i < sd; ++i) spatial *= s.dims[static_cast<std::size_t>(2 + i)];
    if (p.layout == Layout::nchw) {
        int64_t st = 1;
        for (int i = s.rank - 1; i >= 0; --i) {
            s.strides[static_cast<std::size_t>(i)] = st;
            st *= s.dims[static_cast<std::size_t>(i)];
        }
    } else {
        s.strides[1] = 1;
        int64_t st = channels;
        for (int i = s.rank - 1; i >= 2; --i) {
            s.strides[static_cast<std::size_t>(i)] = st;
            st *= s.dims[static_cast<std::size_t>(i)];
        }
        s.strides[0] = channels * spatial;
    }
    return s;
}

}  // namespace

Shape x_shape(const ConvProblem& p) { return make_shape(p, p.n, p.c, p.in); }
Shape w_shape(const ConvProblem& p) { return make_shape(p, p.k, p.c_per_group(), p.kernel); }
Shape y_shape(const ConvProblem& p) {
    Dims o{1, 1, 1};
    for (int i = 0; i < p.spatial_dims; ++i) o[static_cast<std::size_t>(i)] = p.out(i);
    return make_shape(p, p.n, p.k, o);
}

Geometry geometry(const ConvProblem& p) {
    Geometry g;
    g.spatial = p.spatial_dims == 1 ? 2 : p.spatial_dims;
    const int shift = p.spatial_dims == 1 ? 1 : 0;
    for (int i = 0; i < g.spatial; ++i) {
        const auto gi = static_cast<std::size_t>(i);
        if (i < shift) {
            g.pad_pre[gi] = 0;
            g.pad_post[gi] = 0;
            g.stride[gi] = 1;
            g.dilation[gi] = 1;
        } else {
            const auto pi = static_cast<std::size_t>(i - shift);
            g.pad_pre[gi] = p.pad_begin[pi];
            g.pad_post[gi] = p.pad_end[pi];
            // Padding that differs at the end but gives the same output size as pad_begin on
            // both sides is the same convolution; cuDNN gets the symmetric form, which every
            // engine takes (benchdnn's stride-2 shapes derive pad_end from the output size).
            const int64_t span = p.in[pi] + 2 * p.pad_begin[pi] - p.effective_kernel(i - shift);
            if (p.pad_end[pi] != p.pad_begin[pi] && span >= 0 && span / p.stride[pi] + 1 == p.out(i - shift))
                g.pad_post[gi] = p.pad_begin[pi];
            g.stride[gi] = p.stride[pi];
            g.dilation[gi] = p.dilation[pi];
        }
    }
    return g;
}

bool padding_reaches_kernel(const ConvProblem& p) {
    for (int i = 0; i < p.spatial_dims; ++i) {
        const auto u = static_cast<std::size_t>(i);
        if (p.pad_begin[u] >= p.effective_kernel(i) || p.pad_end[u] >= p.effective_kernel(i)) return true;
    }
    return false;
}

double cudnn_error_bound(const ConvProblem& p, Notes notes) {
    double b = default_error_bound(p, notes);
    if (notes.has(Note::tensor_core) && p.dtype == DataType::f32) b += 2 * 0x1p-11;
    if (notes.has(Note::fft)) {
        double padded = 1;
        for (int i = 0; i < p.spatial_dims; ++i) {
            const auto u = static_cast<std::size_t>(i);
            padded *= static_cast<double>(p.in[u] + p.pad_begin[u] + std::max<int64_t>(p.pad_end[u], 0));
        }
        const double u_acc = p.dtype == DataType::f64 ? 0x1p-53 : 0x1p-24;
        b += 16 * u_acc * padded;
    }
    return b;
}

Desc::Desc(cudnnBackendDescriptorType_t type) {
    if (cudnnBackendCreateDescriptor(type, &d_) != CUDNN_STATUS_SUCCESS) d_ = nullptr;
}
Desc::~Desc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
}
Desc& Desc::operator=(Desc&& o) noexcept {
    if (this != &o) {
        if (d_) cudnnBackendDestroyDescriptor(d_);
        d_ = o.d_;
        o.d_ = nullptr;
    }
    return *this;
}

cudnnStatus_t set(const Desc& d, cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t, int64_t count,
                  const void* v) {
    return cudnnBackendSetAttribute(d.get(), a, t, count, v);
}

}  // namespace convtune::cudnn_detail
