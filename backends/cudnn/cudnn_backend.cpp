// The cuDNN backend's shell: it reports cuDNN's version and whether a GPU is usable here
// (cudnnCreate fails without a driver). Its algorithms are not built yet.
#include "cudnn/cudnn_backend.hpp"

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <string>

namespace convtune {

namespace {

std::string version_string() {
    const size_t v = cudnnGetVersion();  // e.g. 91900
    return "cuDNN " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

class CudnnBackend final : public Backend {
public:
    std::string_view name() const override { return "cudnn"; }
    Availability availability() const override {
        int count = 0;
        const cudaError_t e = cudaGetDeviceCount(&count);
        if (e != cudaSuccess)
            return {false, std::string("no usable GPU: cudaGetDeviceCount failed (") + cudaGetErrorString(e) + ")"};
        if (count == 0) return {false, "no usable GPU: no CUDA device found"};
        return {false, "the cuDNN algorithms are not built yet"};
    }
    BackendIdentity identity() const override { return {version_string(), "", ""}; }
    std::span<const Algorithm* const> algorithms() const override { return {}; }
    DeviceBuffer allocate(std::size_t bytes) const override {
        void* p = nullptr;
        if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) return {};
        return DeviceBuffer(p, bytes, [](void* q) { cudaFree(q); });
    }
    void upload(void* dst, const void* src, std::size_t bytes) const override { cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice); }
    void download(void* dst, const void* src, std::size_t bytes) const override { cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost); }
    double time_ms(const std::function<void()>& fn) const override {
        cudaEvent_t a, b;
        cudaEventCreate(&a);
        cudaEventCreate(&b);
        cudaEventRecord(a);
        fn();
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        cudaEventDestroy(a);
        cudaEventDestroy(b);
        return ms;
    }
    void synchronize() const override { cudaDeviceSynchronize(); }
};

}  // namespace

Backend& cudnn_backend() {
    static CudnnBackend b;
    return b;
}

}  // namespace convtune
