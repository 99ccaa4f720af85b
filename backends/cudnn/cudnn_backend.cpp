// The cuDNN backend: legacy-API algorithms and graph-API engine configurations on the current
// CUDA device, device memory from cudaMalloc, time from CUDA events on the thread's stream (the
// legacy default stream unless a caller set its own: exchange_thread_stream).
//
// availability() says exactly why cuDNN cannot run here (no driver, no device, a cuDNN
// sub-library that does not load, cudnnCreate failing). The ranking is PyTorch's
// benchmark=False order first: graph heuristics mode A, then the fallback list (PyTorch's two
// sources; mode B is never asked: PyTorch does not, and reading its list cost more than any other
// query of a search), then every other graph engine of the direction by index, then the legacy algorithms in
// cudnnGet*Algorithm_v7 order and the remaining legacy algorithms of the direction in id
// order. It is produced lazily (ranking()): each cuDNN query is made when the consumer reaches
// its stage, and support is decided by the consumer; heuristic_order(p) is the whole ranking
// filtered by supports().
#include "cudnn/cudnn_backend.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <set>
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

// The NVIDIA kernel module's release ("570.86.15") from /proc/driver/nvidia/version, or empty.
std::string kernel_driver_release() {
    std::ifstream in("/proc/driver/nvidia/version");
    std::string line;
    if (!std::getline(in, line)) return {};
    return nvidia_driver_release(line);
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
    // Asked at every decision the tuning database is consulted for, so each device's identity is
    // made once per process: cudaGetDeviceProperties and reading the driver's release cost more
    // than the rest of a database-answered decision.
    BackendIdentity identity() const override {
        if (!unavailable_reason().empty()) return {version_string(), "", ""};
        int dev = 0;
        const bool have_device = cudaGetDevice(&dev) == cudaSuccess;
        std::lock_guard lock(identity_mutex_);
        if (have_device)
            if (const auto it = identities_.find(dev); it != identities_.end()) return it->second;
        BackendIdentity id = make_identity(have_device, dev);
        if (have_device && !id.device.empty()) identities_.emplace(dev, id);
        return id;
    }
    static BackendIdentity make_identity(bool have_device, int dev) {
        BackendIdentity id{version_string(), "", ""};
        cudaDeviceProp prop{};
        if (have_device && cudaGetDeviceProperties(&prop, dev) == cudaSuccess)
            id.device = std::string(prop.name) + " sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
        int drv = 0;
        if (cudaDriverGetVersion(&drv) == cudaSuccess)
            id.driver = "CUDA driver " + std::to_string(drv / 1000) + "." + std::to_string(drv % 1000 / 10);
        // The CUDA version alone names many driver releases (570.86 and 570.124 both say 12.8):
        // the kernel module's release goes into the key too, so that a driver update never
        // reuses a pick.
        if (const std::string rel = kernel_driver_release(); !rel.empty()) id.driver += " (NVIDIA " + rel + ")";
        return id;
    }
    std::span<const Algorithm* const> algorithms() const override { return list_; }

    std::map<std::string, int64_t> work_counts() const override {
        const WorkCounters& w = work_counters();
        return {{"heuristic_queries", w.heuristic_queries.load()}, {"engine_builds", w.engine_builds.load()},
                {"plan_builds", w.plan_builds.load()}, {"note_probes", w.note_probes.load()},
                {"legacy_v7_queries", w.legacy_v7_queries.load()},
                {"legacy_workspace_queries", w.legacy_workspace_queries.load()}};
    }

    std::vector<const Algorithm*> heuristic_order(const ConvProblem& p) const override {
        std::vector<const Algorithm*> r;
        const auto k = ranking(p);
        while (const Algorithm* a = k->next())
            if (a->supports(p)) r.push_back(a);
        return r;
    }

    // Each stage's cuDNN query (a heuristics mode, the legacy v7 ranking) is made when the
    // consumer reaches it, and no support is decided here.
    std::unique_ptr<Ranking> ranking(const ConvProblem& p) const override { return std::make_unique<Staged>(*this, p); }

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
        cudaEventRecord(a, thread_stream());
        fn();
        cudaEventRecord(b, thread_stream());
        cudaEventSynchronize(b);
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        cudaEventDestroy(a);
        cudaEventDestroy(b);
        return ms;
    }
    void synchronize() const override { cudaDeviceSynchronize(); }
    void* exchange_thread_stream(void* stream) const override {
        return cudnn_detail::exchange_thread_stream(static_cast<cudaStream_t>(stream));
    }

private:
    // Stages: heuristics mode A, the fallback list, the other graph engines by index
    // (runtime-compiled ones held back), the legacy v7 ranking, the other legacy algorithms,
    // then the held-back runtime-compiled graph engines: timing one of those costs a kernel
    // compile (0.03-2 s), so a search reaches them only when nothing before them is left. The
    // heuristics suggest what stages 0, 1 and 3 yield. Mode B is not a stage: PyTorch never asks
    // it, and on an H100 reading its list took about 3 ms a problem by cuDNN's call counts
    // (docs/benchmarks-gpu.md, "Mode B no longer asked"); its engines are reached by the walk by
    // index, with their default knobs. Its named lists (ListName): heuristic,
    // mode A's configurations; fallback, the fallback list's; each with the configurations the
    // list names again (PyTorch's two sources, which build and time a plan per listing).
    class Staged final : public Ranking {
    public:
        Staged(const CudnnBackend& b, const ConvProblem& p) : b_(b), p_(p) {}
        const Algorithm* next() override {
            for (;;) {
                while (pos_ < stage_list_.size()) {
                    const Algorithm* a = stage_list_[pos_++];
                    if (a->backend().name() != b_.name() || seen_.count(a)) continue;
                    if (stage_ == kByIndex + 1 && runtime_compiled(*a)) {
                        held_back_.push_back(a);
                        continue;
                    }
                    seen_.insert(a);
                    if (kSuggests[stage_ - 1]) suggested_.insert(a);
                    return a;
                }
                if (stage_ == kStages || !unavailable_reason().empty()) return nullptr;
                stage_list_ = load(stage_++);
                pos_ = 0;
                if (stage_ <= 2) {  // mode A, the fallback list: every listing
                    std::map<const Algorithm*, int>& listed = listed_[stage_ - 1];
                    for (const Algorithm* a : stage_list_) ++listed[a];
                    const CudnnRanking mode = stage_ == 1 ? CudnnRanking::mode_a : CudnnRanking::fallback;
                    for (const Algorithm* a : graph_ranking(p_, mode, true))
                        ++listed[a];  // the configurations it lists again
                }
            }
        }
        bool explores() const override { return true; }
        bool suggested(const Algorithm& a) const override { return suggested_.count(&a) > 0; }
        int in_list(const Algorithm& a, ListName list) const override {
            if (list == ListName::all) return Ranking::in_list(a, list);
            const std::map<const Algorithm*, int>& listed = listed_[list == ListName::heuristic ? 0 : 1];
            const auto it = listed.find(&a);
            return it == listed.end() ? 0 : it->second;
        }

    private:
        static constexpr int kStages = 6, kByIndex = 2;
        static constexpr bool kSuggests[kStages] = {true, true, false, true, false, false};
        // From the engine's note probes, not from p's plan: reading p's would build the engine
        // (and a precompiled engine's plan) for every engine the walk passes, most of which the
        // search never times.
        static bool runtime_compiled(const Algorithm& a) { return graph_engine_compiles(a); }
        std::vector<const Algorithm*> load(int stage) {
            std::vector<const Algorithm*> v;
            switch (stage) {
                case 0: return graph_ranking(p_, CudnnRanking::mode_a);
                case 1: return graph_ranking(p_, CudnnRanking::fallback);
                case kByIndex:
                    for (const Algorithm* a : b_.list_)
                        if (is_graph(*a, p_.direction)) v.push_back(a);
                    return v;
                case 3: return legacy_v7_ranking(p_);
                case 4:
                    for (const Algorithm* a : b_.list_)
                        if (is_legacy(*a, p_.direction)) v.push_back(a);
                    return v;
                default: return std::move(held_back_);
            }
        }
        const CudnnBackend& b_;
        ConvProblem p_;
        int stage_ = 0;
        std::vector<const Algorithm*> stage_list_;
        std::size_t pos_ = 0;
        std::set<const Algorithm*> seen_, suggested_;
        std::map<const Algorithm*, int> listed_[2];  // how many times mode A's, the fallback's list names it
        std::vector<const Algorithm*> held_back_;  // runtime-compiled graph engines no heuristic lists
    };

    std::vector<const Algorithm*> list_;
    mutable std::mutex identity_mutex_;
    mutable std::map<int, BackendIdentity> identities_;  // per CUDA device index
};

}  // namespace

namespace cudnn_detail {
WorkCounters& work_counters() {
    static WorkCounters c;
    return c;
}
}  // namespace cudnn_detail

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
