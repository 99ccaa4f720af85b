// The cuDNN backend: legacy-API algorithms and graph-API engine configurations on the current
// CUDA device, device memory from cudaMalloc, time from CUDA events on the default stream.
//
// availability() says exactly why cuDNN cannot run here (no driver, no device, a cuDNN
// sub-library that does not load, cudnnCreate failing). heuristic_order(p) is PyTorch's
// benchmark=False order first: graph heuristics mode A, then the fallback list, then mode B,
// then every other supporting graph engine by index, then the legacy algorithms in
// cudnnGet*Algorithm_v7 order and the remaining legacy algorithms in id order.
#include "cudnn/cudnn_backend.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "cudnn/cudnn_common.hpp"
#include "cudnn/cudnn_internal.hpp"

namespace convtune {

using namespace cudnn_detail;

namespace {

std::string version_string() {
    const size_t v = cudnnGetVersion();  // e.g. 91900
    return "cuDNN " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

class CudnnBackend final : public Backend {
public:
    CudnnBackend() {
        list_ = legacy_algorithms(*this);
        const auto graph = graph_algorithms(*this);
        list_.insert(list_.end(), graph.begin(), graph.end());
    }
    std::string_view name() const override { return "cudnn"; }
    Availability availability() const override {
        const std::string& why = unavailable_reason();
        if (!why.empty()) return {false, why};
        return {};
    }
    BackendIdentity identity() const override {
        BackendIdentity id{version_string(), "", ""};
        if (!unavailable_reason().empty()) return id;
        int dev = 0;
        cudaDeviceProp prop{};
        if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess)
            id.device = std::string(prop.name) + " sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
        int drv = 0;
        if (cudaDriverGetVersion(&drv) == cudaSuccess)
            id.driver = "CUDA driver " + std::to_string(drv / 1000) + "." + std::to_string(drv % 1000 / 10);
        return id;
    }
    std::span<const Algorithm* const> algorithms() const override { return list_; }

    std::vector<const Algorithm*> heuristic_order(const ConvProblem& p) const override {
        std::vector<const Algorithm*> r;
        if (!unavailable_reason().empty()) return r;
        auto add = [&](const Algorithm* a) {
            if (a->backend().name() != name() || std::find(r.begin(), r.end(), a) != r.end()) return;
            if (a->supports(p)) r.push_back(a);
        };
        for (CudnnRanking k : {CudnnRanking::mode_a, CudnnRanking::fallback, CudnnRanking::mode_b})
            for (const Algorithm* a : graph_ranking(p, k)) add(a);
        for (const Algorithm* a : list_)
            if (is_graph(*a)) add(a);
        for (const Algorithm* a : legacy_v7_ranking(p)) add(a);
        for (const Algorithm* a : list_)
            if (is_legacy(*a)) add(a);
        return r;
    }

    DeviceBuffer allocate(std::size_t bytes) const override {
        void* p = nullptr;
        if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
            cudaGetLastError();  // reset the runtime's last-error state
            return {};
        }
        return DeviceBuffer(p, bytes, [](void* q) { cudaFree(q); });
    }
    void upload(void* dst, const void* src, std::size_t bytes) const override {
        if (bytes) cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
    }
    void download(void* dst, const void* src, std::size_t bytes) const override {
        if (bytes) cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
    }
    double time_ms(const std::function<void()>& fn) const override {
        cudaEvent_t a = nullptr, b = nullptr;
        if (cudaEventCreate(&a) != cudaSuccess || cudaEventCreate(&b) != cudaSuccess) {
            if (a) cudaEventDestroy(a);
            fn();
            cudaDeviceSynchronize();
            return 0;
        }
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

private:
    std::vector<const Algorithm*> list_;
};

}  // namespace

Backend& cudnn_backend() {
    static CudnnBackend b;
    return b;
}

std::vector<const Algorithm*> cudnn_ranking(const ConvProblem& p, CudnnRanking r) {
    cudnn_backend();
    if (r == CudnnRanking::legacy_v7) return legacy_v7_ranking(p);
    return graph_ranking(p, r);
}

void cudnn_forget_plans() { graph_forget_plans(); }
void cudnn_refuse_measured_wrong(bool refuse) { graph_refuse_measured_wrong(refuse); }

std::optional<CudnnPlanInfo> cudnn_plan_info(const Algorithm& a, const ConvProblem& p) { return graph_plan_info(a, p); }

std::optional<Notes> cudnn_reported_notes(const Algorithm& a, const ConvProblem& p) {
    if (is_legacy(a)) return legacy_reported_notes(a, p);
    return graph_reported_notes(a, p);
}

}  // namespace convtune
