// cuDNN legacy-API convolution algorithms (cudnnConvolutionForward / BackwardData /
// BackwardFilter with an explicit cudnnConvolution*Algo_t and cudnnMathType_t).
//
// What: one algorithm per (direction, cuDNN algorithm enum, math type); id
//   cudnn.<dir>.<algo>.<math> (see cudnn_backend.hpp). The kernels are cuDNN's.
// Where: whatever cudnnGetConvolution*WorkspaceSize accepts for the problem with the math type
//   set on the convolution descriptor; the legacy API takes one padding per dimension, so
//   asymmetric padding is refused here unless padding pad_begin on both sides gives the same
//   output size (then it is the same convolution); the graph-API engines take pre/post padding.
//   Dims and strides must fit in int.
// Workspace: cudnnGetConvolution*WorkspaceSize.
// Notes (static, per id): TENSOR_CORE for math default/tensor_op (cuDNN may use tensor cores;
//   f32 inputs may be rounded to TF32), none for fma; NONDETERMINISTIC for bwd_data algo_0 and
//   bwd_filter algo_0 / algo_3 (cuDNN's documentation; the GPU tests check every supported
//   problem against the determinism cudnnGet*Algorithm_v7 reports); FFT for the fft* algorithms,
//   WINOGRAD for winograd*.
// Compute type: f32 for f32/f16/bf16 (PyTorch's choice), f64 for f64.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "convtune/device_tensors.hpp"
#include "convtune/error.hpp"
#include "convtune/numeric.hpp"
#include "cudnn/cudnn_common.hpp"
#include "cudnn/cudnn_internal.hpp"

// The whole legacy convolution API is marked deprecated in cuDNN 9 but is still shipped and is
// what PyTorch's v7 path and cudnnFind*AlgorithmEx use.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace convtune::cudnn_detail {

namespace {

struct AlgoName {
    int value;
    const char* name;
};
constexpr AlgoName kFwd[] = {
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, "implicit_gemm"},
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, "implicit_precomp_gemm"},
    {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, "gemm"},
    {CUDNN_CONVOLUTION_FWD_ALGO_DIRECT, "direct"},
    {CUDNN_CONVOLUTION_FWD_ALGO_FFT, "fft"},
    {CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING, "fft_tiling"},
    {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, "winograd"},
    {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, "winograd_nonfused"},
};
constexpr AlgoName kBwdData[] = {
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, "algo_0"},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, "algo_1"},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, "fft"},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING, "fft_tiling"},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD, "winograd"},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED, "winograd_nonfused"},
};
// CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD (4) is "not implemented" in cuDNN and not listed.
constexpr AlgoName kBwdFilter[] = {
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, "algo_0"},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, "algo_1"},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, "fft"},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, "algo_3"},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED, "winograd_nonfused"},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING, "fft_tiling"},
};

struct MathName {
    cudnnMathType_t value;
    const char* name;
};
constexpr MathName kMaths[] = {
    {CUDNN_DEFAULT_MATH, "default"}, {CUDNN_TENSOR_OP_MATH, "tensor_op"}, {CUDNN_FMA_MATH, "fma"}};

const char* math_name(cudnnMathType_t m) {
    for (auto& x : kMaths)
        if (x.value == m) return x.name;
    return nullptr;  // CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: no id
}

// The four legacy descriptors of a problem, with one math type set.
struct LegacyDescriptors {
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
    std::string failed;  // the call that failed

    LegacyDescriptors(const ConvProblem& p, cudnnMathType_t math) {
        auto step = [&](cudnnStatus_t s, const char* what) {
            if (status == CUDNN_STATUS_SUCCESS && s != CUDNN_STATUS_SUCCESS) {
                status = s;
                failed = what;
            }
            return status == CUDNN_STATUS_SUCCESS;
        };
        if (!step(cudnnCreateTensorDescriptor(&x), "cudnnCreateTensorDescriptor") ||
            !step(cudnnCreateTensorDescriptor(&y), "cudnnCreateTensorDescriptor") ||
            !step(cudnnCreateFilterDescriptor(&w), "cudnnCreateFilterDescriptor") ||
            !step(cudnnCreateConvolutionDescriptor(&conv), "cudnnCreateConvolutionDescriptor"))
            return;
        const cudnnDataType_t dt = data_type(p.dtype);
        auto set_tensor = [&](cudnnTensorDescriptor_t d, const Shape& s) {
            int dims[5], strides[5];
            for (int i = 0; i < s.rank; ++i) {
                dims[i] = static_cast<int>(s.dims[static_cast<std::size_t>(i)]);
                strides[i] = static_cast<int>(s.strides[static_cast<std::size_t>(i)]);
            }
            return step(cudnnSetTensorNdDescriptor(d, dt, s.rank, dims, strides), "cudnnSetTensorNdDescriptor");
        };
        if (!set_tensor(x, x_shape(p)) || !set_tensor(y, y_shape(p))) return;
        const Shape ws = w_shape(p);
        int wdims[5];
        for (int i = 0; i < ws.rank; ++i) wdims[i] = static_cast<int>(ws.dims[static_cast<std::size_t>(i)]);
        const cudnnTensorFormat_t fmt = p.layout == Layout::nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
        if (!step(cudnnSetFilterNdDescriptor(w, dt, fmt, ws.rank, wdims), "cudnnSetFilterNdDescriptor")) return;
        const Geometry g = geometry(p);
        int pad[3], stride[3], dil[3];
        for (int i = 0; i < g.spatial; ++i) {
            pad[i] = static_cast<int>(g.pad_pre[static_cast<std::size_t>(i)]);
            stride[i] = static_cast<int>(g.stride[static_cast<std::size_t>(i)]);
            dil[i] = static_cast<int>(g.dilation[static_cast<std::size_t>(i)]);
        }
        if (!step(cudnnSetConvolutionNdDescriptor(conv, g.spatial, pad, stride, dil, CUDNN_CROSS_CORRELATION,
                                                  compute_type(p.dtype)),
                  "cudnnSetConvolutionNdDescriptor") ||
            !step(cudnnSetConvolutionGroupCount(conv, static_cast<int>(p.groups)), "cudnnSetConvolutionGroupCount") ||
            !step(cudnnSetConvolutionMathType(conv, math), "cudnnSetConvolutionMathType"))
            return;
    }
    ~LegacyDescriptors() {
        if (x) cudnnDestroyTensorDescriptor(x);
        if (y) cudnnDestroyTensorDescriptor(y);
        if (w) cudnnDestroyFilterDescriptor(w);
        if (conv) cudnnDestroyConvolutionDescriptor(conv);
    }
    LegacyDescriptors(const LegacyDescriptors&) = delete;
    LegacyDescriptors& operator=(const LegacyDescriptors&) = delete;
    bool ok() const { return status == CUDNN_STATUS_SUCCESS; }
};

// Why the legacy API cannot describe p at all (independent of the algorithm), or empty.
std::string legacy_geometry_problem(const ConvProblem& p) {
    for (int i = 0; i < p.spatial_dims; ++i) {
        const auto u = static_cast<std::size_t>(i);
        // Unequal padding that yields the same output size as pad_begin on both sides is the
        // same convolution (the windows never reach the padding that differs: benchdnn's
        // stride-2 layers derive pad_end from the output size), so cuDNN gets pad_begin.
        const int64_t span = p.in[u] + 2 * p.pad_begin[u] - p.effective_kernel(i);
        const bool same_output = span >= 0 && span / p.stride[u] + 1 == p.out(i);
        if (p.pad_begin[u] != p.pad_end[u] && !same_output)
            return "asymmetric padding: the legacy cuDNN API takes one padding per dimension (dim " +
                   std::to_string(i) + ": begin " + std::to_string(p.pad_begin[u]) + ", end " +
                   std::to_string(p.pad_end[u]) + "); the graph-API engines (cudnn.graph.*) take pre/post padding";
    }
    for (const Shape& s : {x_shape(p), w_shape(p), y_shape(p)})
        for (int i = 0; i < s.rank; ++i)
            if (s.dims[static_cast<std::size_t>(i)] > INT_MAX || s.strides[static_cast<std::size_t>(i)] > INT_MAX)
                return "size: the legacy cuDNN API takes int dims and strides; this problem needs more than 2^31-1";
    return {};
}

std::string_view dir_name(Direction d) { return to_string(d); }

int max_algo_count(Direction d) {
    switch (d) {
        case Direction::fwd: return CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
        case Direction::bwd_data: return CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
        case Direction::bwd_filter: return CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
    }
    return 0;
}

// One perf entry of any direction (the three cuDNN structs have the same fields).
struct PerfEntry {
    int algo = 0;
    cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
    float time = 0;
    std::size_t memory = 0;
    cudnnDeterminism_t determinism = CUDNN_DETERMINISTIC;
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};
template <class Perf>
PerfEntry to_entry(const Perf& r) {
    return {static_cast<int>(r.algo), r.status, r.time, r.memory, r.determinism, r.mathType};
}

// cudnnGet*Algorithm_v7 for p with `math` set on the descriptor.
cudnnStatus_t get_v7(const ConvProblem& p, cudnnMathType_t math, std::vector<PerfEntry>& out) {
    out.clear();
    cudnnHandle_t h = thread_handle();
    if (!h) return CUDNN_STATUS_NOT_INITIALIZED;
    ++work_counters().legacy_v7_queries;
    LegacyDescriptors d(p, math);
    if (!d.ok()) return d.status;
    const int n = max_algo_count(p.direction);
    int got = 0;
    cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
    switch (p.direction) {
        case Direction::fwd: {
            std::vector<cudnnConvolutionFwdAlgoPerf_t> r(static_cast<std::size_t>(n));
            s = cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, n, &got, r.data());
            for (int i = 0; i < got; ++i) out.push_back(to_entry(r[static_cast<std::size_t>(i)]));
            break;
        }
        case Direction::bwd_data: {
            std::vector<cudnnConvolutionBwdDataAlgoPerf_t> r(static_cast<std::size_t>(n));
            s = cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x, n, &got, r.data());
            for (int i = 0; i < got; ++i) out.push_back(to_entry(r[static_cast<std::size_t>(i)]));
            break;
        }
        case Direction::bwd_filter: {
            std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> r(static_cast<std::size_t>(n));
            s = cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w, n, &got, r.data());
            for (int i = 0; i < got; ++i) out.push_back(to_entry(r[static_cast<std::size_t>(i)]));
            break;
        }
    }
    return s;
}

class LegacyAlgorithm;
std::vector<const LegacyAlgorithm*>& legacy_list();

class LegacyAlgorithm final : public Algorithm {
public:
    LegacyAlgorithm(const Backend& b, Direction d, AlgoName algo, MathName math)
        : backend_(b), dir_(d), algo_(algo.value), math_(math.value) {
        id_ = "cudnn." + std::string(dir_name(d)) + "." + algo.name + "." + math.name;
        const std::string name = algo.name;
        Notes n;
        if (math.value != CUDNN_FMA_MATH) n = n | Note::tensor_core;
        if ((d == Direction::bwd_data && algo.value == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0) ||
            (d == Direction::bwd_filter &&
             (algo.value == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || algo.value == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3)))
            n = n | Note::nondeterministic;
        if (name.find("fft") != std::string::npos) n = n | Note::fft;
        if (name.find("winograd") != std::string::npos) n = n | Note::winograd;
        notes_ = n;
    }
    std::string_view id() const override { return id_; }
    const Backend& backend() const override { return backend_; }
    Notes notes() const override { return notes_; }
    // Fixed per algorithm (notes_for is notes()): the flags filter before the workspace query.
    std::optional<Notes> notes_before_support(const ConvProblem& p) const override {
        if (p.direction != dir_) return std::nullopt;
        return notes_;
    }
    Direction direction() const { return dir_; }
    int algo() const { return algo_; }
    cudnnMathType_t math() const { return math_; }

    Support supports(const ConvProblem& p) const override {
        if (p.direction != dir_) return Support::no("direction: " + id_ + " computes " + std::string(dir_name(dir_)));
        if (dir_ == Direction::fwd && algo_ == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED &&
            padding_reaches_kernel(p))
            return Support::no(kWinogradPadding);
        const Query& q = query(p);
        return q.support;
    }
    std::size_t workspace_size(const ConvProblem& p) const override {
        const Query& q = query(p);
        return q.support ? q.workspace : 0;
    }

    Status run(const ConvProblem& p, const ConvTensors& t, Workspace ws) const override {
        const Query& q = query(p);
        if (!q.support) return Status::unsupported(q.support.reason);
        if (ws.bytes < q.workspace)
            return Status::failure(id_ + ": workspace of " + std::to_string(ws.bytes) + " bytes, needs " +
                                   std::to_string(q.workspace));
        std::string why;
        cudnnHandle_t h = thread_handle(&why);
        if (!h) return Status::failure(why);
        LegacyDescriptors d(p, math_);
        if (!d.ok()) return to_status(d.status, d.failed);
        const float af = 1.f, bf = 0.f;
        const double ad = 1.0, bd = 0.0;
        const void* alpha = p.dtype == DataType::f64 ? static_cast<const void*>(&ad) : &af;
        const void* beta = p.dtype == DataType::f64 ? static_cast<const void*>(&bd) : &bf;
        cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
        switch (dir_) {
            case Direction::fwd:
                s = cudnnConvolutionForward(h, alpha, d.x, t.x.data, d.w, t.w.data, d.conv,
                                            static_cast<cudnnConvolutionFwdAlgo_t>(algo_), ws.data, ws.bytes, beta, d.y,
                                            t.y.data);
                return to_status(s, id_ + ": cudnnConvolutionForward");
            case Direction::bwd_data:
                s = cudnnConvolutionBackwardData(h, alpha, d.w, t.w.data, d.y, t.y.data, d.conv,
                                                 static_cast<cudnnConvolutionBwdDataAlgo_t>(algo_), ws.data, ws.bytes,
                                                 beta, d.x, t.x.data);
                return to_status(s, id_ + ": cudnnConvolutionBackwardData");
            case Direction::bwd_filter:
                s = cudnnConvolutionBackwardFilter(h, alpha, d.x, t.x.data, d.y, t.y.data, d.conv,
                                                   static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo_), ws.data,
                                                   ws.bytes, beta, d.w, t.w.data);
                return to_status(s, id_ + ": cudnnConvolutionBackwardFilter");
        }
        return Status::failure("unknown direction");
    }

    // Nondeterministic legacy algorithms add partial sums atomically into the output tensor, so
    // for f16/bf16 the accumulation term uses the storage type's unit roundoff (measured:
    // bwd_data algo_0 in f16 exceeded the f32-accumulation bound by 10%).
    double error_bound(const ConvProblem& p) const override {
        double b = cudnn_error_bound(p, notes_);
        if (notes_.has(Note::nondeterministic) && (p.dtype == DataType::f16 || p.dtype == DataType::bf16))
            b += static_cast<double>(p.reduction_length()) * (unit_roundoff(p.dtype) - unit_roundoff(DataType::f32));
        return b;
    }

private:
    struct Query {
        Support support;
        std::size_t workspace = 0;
    };

    // The workspace query, cached per problem (it is cheap but called by supports(),
    // workspace_size() and run() for every candidate of every search).
    const Query& query(const ConvProblem& p) const {
        const std::string key = p.to_string();
        {
            std::lock_guard<std::mutex> lock(mutex_);
            auto it = cache_.find(key);
            if (it != cache_.end()) return *it->second;
        }
        auto q = std::make_unique<Query>(compute(p));
        std::lock_guard<std::mutex> lock(mutex_);
        auto [it, inserted] = cache_.emplace(key, std::move(q));
        return *it->second;
    }

    Query compute(const ConvProblem& p) const {
        Query q;
        if (const std::string& u = unavailable_reason(); !u.empty()) {
            q.support = Support::no("cuDNN unavailable: " + u);
            return q;
        }
        ++work_counters().legacy_workspace_queries;
        if (std::string g = legacy_geometry_problem(p); !g.empty()) {
            q.support = Support::no(g);
            return q;
        }
        std::string why;
        cudnnHandle_t h = thread_handle(&why);
        if (!h) {
            q.support = Support::no(why);
            return q;
        }
        LegacyDescriptors d(p, math_);
        if (!d.ok()) {
            q.support = Support::no("cuDNN rejects the descriptors: " + d.failed + ": " + status_name(d.status));
            return q;
        }
        std::size_t bytes = 0;
        cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
        const char* call = "";
        switch (dir_) {
            case Direction::fwd:
                call = "cudnnGetConvolutionForwardWorkspaceSize";
                s = cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y,
                                                            static_cast<cudnnConvolutionFwdAlgo_t>(algo_), &bytes);
                break;
            case Direction::bwd_data:
                call = "cudnnGetConvolutionBackwardDataWorkspaceSize";
                s = cudnnGetConvolutionBackwardDataWorkspaceSize(
                    h, d.w, d.y, d.conv, d.x, static_cast<cudnnConvolutionBwdDataAlgo_t>(algo_), &bytes);
                break;
            case Direction::bwd_filter:
                call = "cudnnGetConvolutionBackwardFilterWorkspaceSize";
                s = cudnnGetConvolutionBackwardFilterWorkspaceSize(
                    h, d.x, d.y, d.conv, d.w, static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo_), &bytes);
                break;
        }
        if (s != CUDNN_STATUS_SUCCESS) {
            q.support = Support::no(std::string(call) + ": " + status_name(s));
            return q;
        }
        q.workspace = bytes;
        return q;
    }

    const Backend& backend_;
    Direction dir_;
    int algo_;
    cudnnMathType_t math_;
    std::string id_;
    Notes notes_;
    mutable std::mutex mutex_;
    mutable std::map<std::string, std::unique_ptr<Query>> cache_;
};

std::vector<const LegacyAlgorithm*>& legacy_list() {
    static std::vector<const LegacyAlgorithm*> list;
    return list;
}

const LegacyAlgorithm* find_legacy(Direction d, int algo, cudnnMathType_t math) {
    for (const LegacyAlgorithm* a : legacy_list())
        if (a->direction() == d && a->algo() == algo && a->math() == math) return a;
    return nullptr;
}

const char* algo_name(Direction d, int algo) {
    auto look = [&](const auto& table) -> const char* {
        for (const AlgoName& a : table)
            if (a.value == algo) return a.name;
        return nullptr;
    };
    switch (d) {
        case Direction::fwd: return look(kFwd);
        case Direction::bwd_data: return look(kBwdData);
        case Direction::bwd_filter: return look(kBwdFilter);
    }
    return nullptr;
}

// PyTorch's v7 math-type policy (see cudnn_backend.hpp).
cudnnMathType_t pytorch_math(DataType t, bool allow_tf32) {
    if (t == DataType::f16) return CUDNN_TENSOR_OP_MATH;
    if (t == DataType::f32 && !allow_tf32) return CUDNN_FMA_MATH;
    return CUDNN_DEFAULT_MATH;
}

}  // namespace

std::vector<const Algorithm*> legacy_algorithms(const Backend& b) {
    static std::vector<std::unique_ptr<LegacyAlgorithm>> owned = [&] {
        std::vector<std::unique_ptr<LegacyAlgorithm>> v;
        auto add = [&](Direction d, const auto& table) {
            for (const AlgoName& a : table)
                for (const MathName& m : kMaths) v.push_back(std::make_unique<LegacyAlgorithm>(b, d, a, m));
        };
        add(Direction::fwd, kFwd);
        add(Direction::bwd_data, kBwdData);
        add(Direction::bwd_filter, kBwdFilter);
        for (auto& a : v) legacy_list().push_back(a.get());
        return v;
    }();
    std::vector<const Algorithm*> r;
    for (auto& a : owned) r.push_back(a.get());
    return r;
}

bool is_legacy(const Algorithm& a, std::optional<Direction> d) {
    const auto* l = dynamic_cast<const LegacyAlgorithm*>(&a);
    return l && (!d || l->direction() == *d);
}

std::vector<const Algorithm*> legacy_v7_ranking(const ConvProblem& p) {
    std::vector<const Algorithm*> r;
    if (!unavailable_reason().empty() || !legacy_geometry_problem(p).empty()) return r;
    std::vector<PerfEntry> entries;
    for (cudnnMathType_t m : {CUDNN_DEFAULT_MATH, CUDNN_FMA_MATH}) {
        if (get_v7(p, m, entries) != CUDNN_STATUS_SUCCESS) continue;
        for (const PerfEntry& e : entries) {
            if (e.status != CUDNN_STATUS_SUCCESS || !math_name(e.math)) continue;
            const LegacyAlgorithm* a = find_legacy(p.direction, e.algo, e.math);
            if (a && std::find(r.begin(), r.end(), a) == r.end()) r.push_back(a);
        }
    }
    return r;
}

std::optional<Notes> legacy_reported_notes(const Algorithm& alg, const ConvProblem& p) {
    const auto* a = dynamic_cast<const LegacyAlgorithm*>(&alg);
    if (!a || p.direction != a->direction() || !unavailable_reason().empty() || !legacy_geometry_problem(p).empty())
        return std::nullopt;
    std::vector<PerfEntry> entries;
    if (get_v7(p, a->math(), entries) != CUDNN_STATUS_SUCCESS) return std::nullopt;
    // Prefer the entry with the requested math type; cuDNN may report another one.
    const PerfEntry* hit = nullptr;
    for (const PerfEntry& e : entries)
        if (e.algo == a->algo() && e.status == CUDNN_STATUS_SUCCESS && (!hit || e.math == a->math())) hit = &e;
    if (!hit) return std::nullopt;
    Notes n;
    if (hit->determinism == CUDNN_NON_DETERMINISTIC) n = n | Note::nondeterministic;
    if (hit->math == CUDNN_TENSOR_OP_MATH || hit->math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
        n = n | Note::tensor_core;
    if (hit->math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) n = n | Note::down_convert_inputs;
    const std::string name = algo_name(p.direction, a->algo()) ? algo_name(p.direction, a->algo()) : "";
    if (name.find("fft") != std::string::npos) n = n | Note::fft;
    if (name.find("winograd") != std::string::npos) n = n | Note::winograd;
    return n;
}

}  // namespace convtune::cudnn_detail

namespace convtune {

using namespace cudnn_detail;

namespace {

CudnnFinderResult setup_failure(Status s) {
    CudnnFinderResult r;
    r.status = std::move(s);
    return r;
}

}  // namespace

std::vector<CudnnFinderResult> cudnn_find(const ConvProblem& p, const ConvTensors& device, Workspace ws,
                                          const CudnnFinderOptions& o) {
    cudnn_backend();  // make sure the algorithm list exists
    if (const std::string& u = unavailable_reason(); !u.empty())
        return {setup_failure(Status::unsupported("cuDNN unavailable: " + u))};
    if (std::string g = legacy_geometry_problem(p); !g.empty()) return {setup_failure(Status::unsupported(g))};
    std::string why;
    cudnnHandle_t h = thread_handle(&why);
    if (!h) return {setup_failure(Status::failure(why))};
    const cudnnMathType_t math = pytorch_math(p.dtype, o.allow_tf32);
    LegacyDescriptors d(p, math);
    if (!d.ok()) return {setup_failure(to_status(d.status, d.failed))};
    const int n = max_algo_count(p.direction);
    int got = 0;
    const std::size_t bytes = std::min(ws.bytes, o.workspace_limit);
    std::vector<PerfEntry> entries;
    cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
    switch (p.direction) {
        case Direction::fwd: {
            std::vector<cudnnConvolutionFwdAlgoPerf_t> r(static_cast<std::size_t>(n));
            s = cudnnFindConvolutionForwardAlgorithmEx(h, d.x, device.x.data, d.w, device.w.data, d.conv, d.y,
                                                       device.y.data, n, &got, r.data(), ws.data, bytes);
            for (int i = 0; i < got; ++i) entries.push_back(to_entry(r[static_cast<std::size_t>(i)]));
            break;
        }
        case Direction::bwd_data: {
            std::vector<cudnnConvolutionBwdDataAlgoPerf_t> r(static_cast<std::size_t>(n));
            s = cudnnFindConvolutionBackwardDataAlgorithmEx(h, d.w, device.w.data, d.y, device.y.data, d.conv, d.x,
                                                            device.x.data, n, &got, r.data(), ws.data, bytes);
            for (int i = 0; i < got; ++i) entries.push_back(to_entry(r[static_cast<std::size_t>(i)]));
            break;
        }
        case Direction::bwd_filter: {
            std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> r(static_cast<std::size_t>(n));
            s = cudnnFindConvolutionBackwardFilterAlgorithmEx(h, d.x, device.x.data, d.y, device.y.data, d.conv, d.w,
                                                              device.w.data, n, &got, r.data(), ws.data, bytes);
            for (int i = 0; i < got; ++i) entries.push_back(to_entry(r[static_cast<std::size_t>(i)]));
            break;
        }
    }
    if (s != CUDNN_STATUS_SUCCESS) return {setup_failure(to_status(s, "cudnnFind*AlgorithmEx"))};
    std::vector<CudnnFinderResult> out;
    for (const PerfEntry& e : entries) {
        CudnnFinderResult r;
        // ALLOW_CONVERSION entries have no id; they are reported under tensor_op's id only if
        // cuDNN ever returns one, which it does not for the math types requested here.
        const cudnnMathType_t m = e.math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ? CUDNN_TENSOR_OP_MATH : e.math;
        r.algorithm = find_legacy(p.direction, e.algo, m);
        r.status =
            e.status == CUDNN_STATUS_SUCCESS ? Status::success() : to_status(e.status, "cudnnFind*AlgorithmEx entry");
        r.ms = e.time;
        r.workspace = e.memory;
        r.deterministic = e.determinism == CUDNN_DETERMINISTIC;
        out.push_back(std::move(r));
    }
    return out;
}

std::vector<CudnnFinderResult> cudnn_find(const ConvProblem& p, const CudnnFinderOptions& o) {
    const Backend& b = cudnn_backend();
    if (const std::string& u = unavailable_reason(); !u.empty())
        return {setup_failure(Status::unsupported("cuDNN unavailable: " + u))};
    // Inputs in [-1, 1): the finder times real arithmetic, not zeros.
    std::optional<DeviceTensors> t;
    try {
        t.emplace(b, p);
    } catch (const Error& e) {  // the host copy of the data is over the memory budget
        return {setup_failure(Status::out_of_memory(std::string("cudnn_find: ") + e.what()))};
    }
    if (!t->ok()) return {setup_failure(Status::out_of_memory("cudnn_find: cannot allocate the tensors"))};
    // The largest workspace any algorithm of the direction asks for, capped by the limit.
    std::size_t need = 0;
    const cudnnMathType_t math = pytorch_math(p.dtype, o.allow_tf32);
    for (const LegacyAlgorithm* a : legacy_list())
        if (a->direction() == p.direction && a->math() == math && a->supports(p))
            need = std::max(need, a->workspace_size(p));
    need = std::min(need, o.workspace_limit);
    DeviceBuffer ws = need ? b.allocate(need) : DeviceBuffer{};
    if (need && !ws) need = 0;  // as PyTorch does when the pool cannot give it: search without workspace
    return cudnn_find(p, t->views(), Workspace{ws.data(), need}, o);
}

}  // namespace convtune
