// cuDNN graph (backend) API engines for a single convolution.
//
// What: for each direction, the operation graph holding one
//   CUDNN_BACKEND_OPERATION_CONVOLUTION_{FORWARD,BACKWARD_DATA,BACKWARD_FILTER}_DESCRIPTOR
//   (tensors x/dx uid 'x', w/dw uid 'w', y/dy uid 'y'; alpha 1, beta 0), and per engine global
//   index N in [0, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT) of that graph the algorithms
//   cudnn.graph.<dir>.eng<N> and cudnn.graph.<dir>.eng<N>.cfg<n>, n in [1, kConfigSlots). The
//   count is read from a probe graph when the backend is built (it needs no GPU), so the list is
//   the same on every machine with the same cuDNN.
// Knobs: cuDNN's heuristics return several configurations (knob choices, e.g. split-K) of one
//   engine, and PyTorch times each. eng<N>.cfg<n> runs the n-th configuration for N (from 0) that
//   the heuristics return for the problem, in the order mode A, then the fallback list (the
//   order of the ranking, and PyTorch's two sources, so wherever PyTorch has a configuration the
//   same one is reached; mode B is never asked for knobs); eng<N> is n = 0 and, when neither lists N,
//   runs with its default knobs (an engine configuration without knob choices); eng<N>.cfg<n> is
//   unsupported where the heuristics list fewer than n + 1 configurations of N. So an id always
//   names one configuration per problem, and the configuration "benchmark off" would run is the
//   one measured. Each heuristics mode is queried once per problem, when first needed: an engine
//   of mode A's list needs no other query.
// Where: supports(p) finalizes the engine and an execution plan for p's graph (cached per
//   problem and engine, thread-safe); any status other than success is the reason. Exception:
//   for runtime-compiled engines (CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) supports(p) stops at
//   the engine configuration and the plan, whose build compiles a kernel (0.03-2 s each on the
//   H200), is built by the first workspace_size() or run(); a failure there is reported by
//   both. Engines measured to compute wrong results are refused with the measurement as the
//   reason (measured_wrong(): asymmetric padding in the backward directions; fwd eng72 and
//   bwd_filter eng69/eng70 in f32 with channels per group not a multiple of 8). Padding that is asymmetric only on
//   paper (same output size as symmetric) reaches cuDNN symmetric (cudnn_common.hpp).
// Workspace: CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE of the plan.
// Notes: CUDNN_ATTR_ENGINE_NUMERICAL_NOTE mapped to convtune's notes (TENSOR_CORE,
//   NONDETERMINISTIC, DOWN_CONVERT_INPUTS, FFT, WINOGRAD*). notes() must not depend on the
//   problem, so an engine's listed notes are the union of what it reports on a set of probe
//   graphs (2-D/3-D, grouped, dilated, strided; f32/f16/bf16; NCHW/NHWC), except TENSOR_CORE,
//   which says what happens to f32 inputs (TF32) and is taken from the f32 probes (unless the
//   engine takes no f32 probe), and DOWN_CONVERT_INPUTS, never listed: a configuration that
//   down-converts an f32 problem's inputs is refused for that problem (PyTorch never runs one).
//   supports(p) refuses a problem on which the engine reports a note outside its listed ones
//   (TENSOR_CORE only checked for f32), so a listed "deterministic" or "no TF32" is never wrong.
//   notes_before_support(p) reads the notes once the engine is built, before the plan is: the
//   selector's flag filters drop a configuration on them without building its plan, as PyTorch
//   filters engine configurations before it builds plans.
//   REDUCED_PRECISION_REDUCTION (accumulation in the storage type) has no convtune note: error_bound() widens instead.
//   Each engine is probed the first time its notes are asked (GraphRegistry::engine_notes), so
//   a process pays for the engines it meets, not for all of them (about 10 000 engine
//   finalisations). The probe needs a GPU; without one the notes are empty (the backend is
//   unavailable then).
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "convtune/numeric.hpp"
#include "cudnn/cudnn_common.hpp"
#include "cudnn/cudnn_internal.hpp"

// CUDNN_ATTR_OPERATIONGRAPH_HANDLE and CUDNN_ATTR_EXECUTION_PLAN_HANDLE are marked deprecated
// in cuDNN 9 but are how the graph learns its device (cudnn-frontend sets them too).
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace convtune::cudnn_detail {

namespace {

constexpr int64_t kUidX = 'x', kUidW = 'w', kUidY = 'y';
constexpr int64_t kAlignment = 16;  // bytes; run() refuses pointers that are not
constexpr Direction kDirections[] = {Direction::fwd, Direction::bwd_data, Direction::bwd_filter};

int dir_index(Direction d) { return static_cast<int>(d); }

// A finalized operation graph and the descriptors it references.
struct OpGraph {
    std::vector<Desc> parts;
    Desc graph;
    cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
    std::string failed;
    bool ok() const { return status == CUDNN_STATUS_SUCCESS; }
};

OpGraph build_graph(const ConvProblem& p, cudnnHandle_t handle) {
    OpGraph g;
    auto step = [&](cudnnStatus_t s, const char* what) {
        if (g.status == CUDNN_STATUS_SUCCESS && s != CUDNN_STATUS_SUCCESS) {
            g.status = s;
            g.failed = what;
        }
        return g.status == CUDNN_STATUS_SUCCESS;
    };
    const cudnnDataType_t dt = data_type(p.dtype), ct = compute_type(p.dtype);
    auto tensor = [&](int64_t uid, const Shape& s) -> const Desc* {
        Desc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
        if (!t) {
            step(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "cudnnBackendCreateDescriptor(TENSOR)");
            return nullptr;
        }
        int64_t align = kAlignment;
        if (!step(set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt), "TENSOR_DATA_TYPE") ||
            !step(set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, s.rank, s.dims.data()), "TENSOR_DIMENSIONS") ||
            !step(set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, s.rank, s.strides.data()), "TENSOR_STRIDES") ||
            !step(set_i64(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, uid), "TENSOR_UNIQUE_ID") ||
            !step(set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align), "TENSOR_BYTE_ALIGNMENT") ||
            !step(cudnnBackendFinalize(t.get()), "cudnnBackendFinalize(TENSOR)"))
            return nullptr;
        g.parts.push_back(std::move(t));
        return &g.parts.back();
    };
    g.parts.reserve(8);
    const Desc* x = tensor(kUidX, x_shape(p));
    const Desc* w = x ? tensor(kUidW, w_shape(p)) : nullptr;
    const Desc* y = w ? tensor(kUidY, y_shape(p)) : nullptr;
    if (!y) return g;

    Desc conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    const Geometry geo = geometry(p);
    const int64_t nd = geo.spatial;
    const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    if (!step(conv ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "create CONVOLUTION") ||
        !step(set_i64(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, nd), "CONVOLUTION_SPATIAL_DIMS") ||
        !step(set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &ct), "CONVOLUTION_COMP_TYPE") ||
        !step(set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode),
              "CONVOLUTION_CONV_MODE") ||
        !step(set(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, nd, geo.pad_pre.data()),
              "CONVOLUTION_PRE_PADDINGS") ||
        !step(set(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, nd, geo.pad_post.data()),
              "CONVOLUTION_POST_PADDINGS") ||
        !step(set(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, nd, geo.dilation.data()),
              "CONVOLUTION_DILATIONS") ||
        !step(set(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, nd, geo.stride.data()),
              "CONVOLUTION_FILTER_STRIDES") ||
        !step(cudnnBackendFinalize(conv.get()), "cudnnBackendFinalize(CONVOLUTION)"))
        return g;
    g.parts.push_back(std::move(conv));
    const Desc& cv = g.parts.back();

    cudnnBackendDescriptorType_t op_type{};
    cudnnBackendAttributeName_t a_x{}, a_w{}, a_y{}, a_conv{}, a_alpha{}, a_beta{};
    switch (p.direction) {
        case Direction::fwd:
            op_type = CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR;
            a_x = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X;
            a_w = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W;
            a_y = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y;
            a_conv = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC;
            a_alpha = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA;
            a_beta = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA;
            break;
        case Direction::bwd_data:
            op_type = CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR;
            a_x = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX;
            a_w = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W;
            a_y = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY;
            a_conv = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC;
            a_alpha = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA;
            a_beta = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA;
            break;
        case Direction::bwd_filter:
            op_type = CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR;
            a_x = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X;
            a_w = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW;
            a_y = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY;
            a_conv = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC;
            a_alpha = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA;
            a_beta = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA;
            break;
    }
    Desc op(op_type);
    const float af = 1.f, bf = 0.f;
    const double ad = 1.0, bd = 0.0;
    const bool dbl = p.dtype == DataType::f64;
    const cudnnBackendAttributeType_t scal = dbl ? CUDNN_TYPE_DOUBLE : CUDNN_TYPE_FLOAT;
    if (!step(op ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED,
              "create OPERATION_CONVOLUTION") ||
        !step(set_desc(op, a_x, *x), "OPERATION_CONVOLUTION x") ||
        !step(set_desc(op, a_w, *w), "OPERATION_CONVOLUTION w") ||
        !step(set_desc(op, a_y, *y), "OPERATION_CONVOLUTION y") ||
        !step(set_desc(op, a_conv, cv), "OPERATION_CONVOLUTION conv") ||
        !step(set(op, a_alpha, scal, 1, dbl ? static_cast<const void*>(&ad) : &af), "OPERATION_CONVOLUTION alpha") ||
        !step(set(op, a_beta, scal, 1, dbl ? static_cast<const void*>(&bd) : &bf), "OPERATION_CONVOLUTION beta") ||
        !step(cudnnBackendFinalize(op.get()), "cudnnBackendFinalize(OPERATION_CONVOLUTION)"))
        return g;
    g.parts.push_back(std::move(op));

    Desc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    cudnnBackendDescriptor_t ops = g.parts.back().get();
    if (!step(graph ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED,
              "create OPERATIONGRAPH") ||
        !step(set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ops), "OPERATIONGRAPH_OPS"))
        return g;
    if (handle &&
        !step(set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle), "OPERATIONGRAPH_HANDLE"))
        return g;
    if (!step(cudnnBackendFinalize(graph.get()), "cudnnBackendFinalize(OPERATIONGRAPH)")) return g;
    g.graph = std::move(graph);
    return g;
}

int64_t global_count(const Desc& graph) {
    int64_t count = 0, n = 0;
    if (cudnnBackendGetAttribute(graph.get(), CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, CUDNN_TYPE_INT64, 1, &n,
                                 &count) != CUDNN_STATUS_SUCCESS)
        return 0;
    return count;
}

// Notes and flags an engine reports.
struct EngineReport {
    Notes notes;
    bool reduced_precision = false;
    bool runtime_compiled = false;
};

EngineReport read_report(cudnnBackendDescriptor_t engine) {
    EngineReport r;
    cudnnBackendNumericalNote_t nn[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    int64_t n = 0;
    if (cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                 CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, nn) == CUDNN_STATUS_SUCCESS) {
        for (int64_t i = 0; i < n && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; ++i) {
            switch (nn[i]) {
                case CUDNN_NUMERICAL_NOTE_TENSOR_CORE: r.notes = r.notes | Note::tensor_core; break;
                case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS: r.notes = r.notes | Note::down_convert_inputs; break;
                case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION: r.reduced_precision = true; break;
                case CUDNN_NUMERICAL_NOTE_FFT: r.notes = r.notes | Note::fft; break;
                case CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC: r.notes = r.notes | Note::nondeterministic; break;
                case CUDNN_NUMERICAL_NOTE_WINOGRAD:
                case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4:
                case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6:
                case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13: r.notes = r.notes | Note::winograd; break;
                default: break;
            }
        }
    }
    cudnnBackendBehaviorNote_t bn[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
    n = 0;
    if (cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                 CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &n, bn) == CUDNN_STATUS_SUCCESS) {
        for (int64_t i = 0; i < n && i < CUDNN_BEHAVIOR_NOTE_TYPE_COUNT; ++i)
            if (bn[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) r.runtime_compiled = true;
    }
    return r;
}

// An engine with default knobs for `graph`: the finalized engine, or the failing status.
cudnnStatus_t make_engine(const Desc& graph, int64_t index, Desc& engine) {
    engine = Desc(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    if (!engine) return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    cudnnStatus_t s = set_desc(engine, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, graph);
    if (s == CUDNN_STATUS_SUCCESS) s = set_i64(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, index);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(engine.get());
    return s;
}

// The engine inside an engine configuration (copied into a new descriptor).
cudnnStatus_t engine_of(const Desc& cfg, Desc& engine, int64_t& index) {
    engine = Desc(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    if (!engine) return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    cudnnBackendDescriptor_t e = engine.get();
    int64_t n = 0;
    cudnnStatus_t s =
        cudnnBackendGetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e);
    if (s != CUDNN_STATUS_SUCCESS) return s;
    return cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &index);
}

// The knob choices of an engine configuration as "TYPE=VALUE" pairs sorted by knob type
// (cuDNN's numeric knob type), e.g. "3=2 17=1"; empty for default knobs, nullopt when they cannot
// be read.
std::optional<std::string> knob_choices(cudnnBackendDescriptor_t cfg) {
    // Room for one choice per knob type (a count query with no room is not relied on).
    const int64_t count = CUDNN_KNOB_TYPE_COUNTS;
    std::vector<Desc> choices;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < count; ++i) {
        choices.emplace_back(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
        if (!choices.back()) return std::nullopt;
        raw.push_back(choices.back().get());
    }
    int64_t got = 0;
    if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                                 raw.data()) != CUDNN_STATUS_SUCCESS)
        return std::nullopt;
    std::vector<std::pair<int64_t, int64_t>> kv;
    for (int64_t i = 0; i < std::min(got, count); ++i) {
        cudnnBackendKnobType_t type{};
        int64_t value = 0, n = 0;
        if (cudnnBackendGetAttribute(raw[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &n, &type) !=
                CUDNN_STATUS_SUCCESS ||
            cudnnBackendGetAttribute(raw[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &n, &value) !=
                CUDNN_STATUS_SUCCESS)
            return std::nullopt;
        kv.emplace_back(static_cast<int64_t>(type), value);
    }
    std::sort(kv.begin(), kv.end());
    std::string out;
    for (const auto& [k, v] : kv) out += (out.empty() ? "" : " ") + std::to_string(k) + "=" + std::to_string(v);
    return out;
}

// Engine configurations of one heuristics mode, in cuDNN's order.
cudnnStatus_t heuristic_configs(const Desc& graph, cudnnBackendHeurMode_t mode, std::vector<Desc>& out) {
    out.clear();
    Desc h(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    if (!h) return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    cudnnStatus_t s = set_desc(h, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
    if (s == CUDNN_STATUS_SUCCESS) s = set(h, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(h.get());
    if (s != CUDNN_STATUS_SUCCESS) return s;
    int64_t count = 0;
    s = cudnnBackendGetAttribute(h.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                 nullptr);
    if (s != CUDNN_STATUS_SUCCESS || count <= 0) return s;
    std::vector<Desc> cfgs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < count; ++i) {
        cfgs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
        if (!cfgs.back()) return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
        raw.push_back(cfgs.back().get());
    }
    int64_t got = 0;
    s = cudnnBackendGetAttribute(h.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                                 raw.data());
    if (s != CUDNN_STATUS_SUCCESS) return s;
    cfgs.resize(static_cast<std::size_t>(std::min(got, count)));
    out = std::move(cfgs);
    return CUDNN_STATUS_SUCCESS;
}

// An execution plan for an engine configuration: the finalized plan and its workspace, or the
// failing status (with cuDNN's last error message).
struct BuiltPlan {
    cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
    std::string what;  // the failing step
    Desc plan;
    std::size_t workspace = 0;
};

BuiltPlan build_execution_plan(cudnnHandle_t h, const Desc& cfg) {
    BuiltPlan b;
    Desc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    cudnnStatus_t s = plan ? set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h)
                           : CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    if (s == CUDNN_STATUS_SUCCESS) s = set_desc(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfg);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(plan.get());
    if (s != CUDNN_STATUS_SUCCESS) {
        const std::string detail = last_error_message();
        b.status = s;
        b.what = "execution plan: " + status_name(s) + (detail.empty() ? "" : " (" + detail + ")");
        return b;
    }
    int64_t bytes = 0, n = 0;
    s = cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &bytes);
    if (s != CUDNN_STATUS_SUCCESS || bytes < 0) {
        b.status = s != CUDNN_STATUS_SUCCESS ? s : CUDNN_STATUS_INTERNAL_ERROR;
        b.what = "workspace size: " + status_name(b.status);
        return b;
    }
    b.workspace = static_cast<std::size_t>(bytes);
    b.plan = std::move(plan);
    return b;
}

// Runs a plan on x, w, y (uids 'x', 'w', 'y') with workspace ws (nullptr when it needs none).
cudnnStatus_t execute_plan(cudnnHandle_t h, cudnnBackendDescriptor_t plan, const ConvTensors& t, void* ws) {
    Desc vp(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    if (!vp) return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    int64_t uids[3] = {kUidX, kUidW, kUidY};
    void* ptrs[3] = {t.x.data, t.w.data, t.y.data};
    cudnnStatus_t st = set(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
    if (st == CUDNN_STATUS_SUCCESS) st = set(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs);
    if (st == CUDNN_STATUS_SUCCESS) st = set(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(vp.get());
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendExecute(h, plan, vp.get());
    return st;
}

// ---- per-problem cache --------------------------------------------------------------------

// Stage 1 (engine + configuration + notes) is cheap and always done; stage 2 (the execution
// plan) compiles a kernel for runtime-compiled engines and is then deferred to the first
// workspace_size() or run().
struct EnginePlan {
    Support support;  // stage 1: the engine takes the graph
    Desc own_cfg, engine;
    const Desc* cfg = nullptr;
    EngineReport report;
    std::string knobs;  // where the configuration came from (mode_a, fallback, default) and its knob choices
                        // "[TYPE=VALUE ...]"
    bool plan_tried = false;
    Support plan_support;  // stage 2: the execution plan finalized
    Desc plan;
    std::size_t workspace = 0;
    double build_ms = 0;
};

// An engine configuration of a problem: (engine global index, n), n = 0 for the engine's first
// configuration in heuristic order (or its default knobs when no heuristic lists it).
using ConfigKey = std::pair<int64_t, int>;

// Configurations per engine that have an algorithm id: eng<N> (n = 0) and eng<N>.cfg<n> for n in
// [1, kConfigSlots). cuDNN 9.19's mode A and fallback lists on the ResNet-50 layers held up to 4
// configurations of one engine (fwd eng70).
constexpr int kConfigSlots = 4;

struct ProblemEntry {
    std::mutex mutex;
    bool graph_built = false;
    OpGraph graph;
    std::string graph_error;  // non-empty when the graph could not be built
    // One heuristics query per mode, each made when first needed and after the modes before it
    // (kModes order: mode A, the fallback list, mode B): its configurations in cuDNN's order,
    // each as (engine, n) = the n-th configuration of that engine met in that order.
    struct Mode {
        bool queried = false;
        std::vector<ConfigKey> entries;
        // Configurations this mode lists again (met earlier in it or in an earlier mode): dropped
        // from `entries`, kept here, as PyTorch builds and times a plan per listing.
        std::vector<ConfigKey> repeats;
        std::map<ConfigKey, Desc> cfg;
    };
    std::array<Mode, 3> modes;
    // Per engine, its configurations met so far over the modes queried (descriptors held in
    // modes[].cfg; a configuration listed twice, e.g. by mode A and the fallback list, counts
    // once), and the knob choices of those read so far: they are read only to tell a second
    // configuration of an engine from the first, or to show them (CudnnPlanInfo::knobs).
    std::map<int64_t, std::vector<cudnnBackendDescriptor_t>> configs_met;
    std::map<cudnnBackendDescriptor_t, std::string> knob_text;
    std::map<ConfigKey, std::unique_ptr<EnginePlan>> plans;
};

// The heuristics in the order their configurations are numbered: mode A (PyTorch's "instant"),
// the fallback list (PyTorch's second source), then mode B (which PyTorch never queries). An
// engine's knobs are taken from the first kKnobModes of them: mode B is asked only by a caller
// that wants its list (cudnn_ranking), never by a search or a database's call. Reading its list
// took about 3 ms a problem on an H100 by cuDNN's call counts, more than any other query of a
// search, and PyTorch's search has no configuration from it.
constexpr const char* kModeName[3] = {"mode_a", "fallback", "mode_b"};
constexpr cudnnBackendHeurMode_t kModes[3] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK, CUDNN_HEUR_MODE_B};
constexpr std::size_t kKnobModes = 2;

// Entries are never freed: plans and graphs live until the process ends (destroying them at
// exit could run after the CUDA context is gone).
class GraphCache {
public:
    // A call that the memory cache answers asks for its problem's entry several times (supports(),
    // workspace_size() and run() each): the thread's last entry answers a repeat without building
    // the problem's text or taking the cache's lock. forget() moves the generation on, so a
    // remembered entry is never returned after it.
    ProblemEntry& entry(const ConvProblem& p) {
        thread_local Last last;
        const uint64_t gen = generation_.load(std::memory_order_acquire);
        if (last.entry && last.cache == this && last.generation == gen && last.problem == p) return *last.entry;
        const std::string key = p.to_string();
        std::lock_guard<std::mutex> lock(mutex_);
        auto& e = map_[key];
        if (!e) e = new ProblemEntry;
        last = {this, generation_.load(std::memory_order_relaxed), p, e};
        return *e;
    }
    // Entries are dropped, not freed: a caller may still hold a reference to one.
    void forget() {
        std::lock_guard<std::mutex> lock(mutex_);
        map_.clear();
        generation_.fetch_add(1, std::memory_order_release);
    }

private:
    struct Last {
        const GraphCache* cache = nullptr;
        uint64_t generation = 0;
        ConvProblem problem;
        ProblemEntry* entry = nullptr;
    };
    std::mutex mutex_;
    std::unordered_map<std::string, ProblemEntry*> map_;
    std::atomic<uint64_t> generation_{0};
};

GraphCache& cache() {
    static GraphCache* c = new GraphCache;
    return *c;
}

// Caller holds e.mutex.
bool ensure_graph(ProblemEntry& e, const ConvProblem& p) {
    if (!e.graph_built) {
        e.graph_built = true;
        std::string why;
        cudnnHandle_t h = thread_handle(&why);
        if (!h) {
            e.graph_error = why;
        } else {
            e.graph = build_graph(p, h);
            if (!e.graph.ok())
                e.graph_error =
                    "cuDNN rejects the operation graph: " + e.graph.failed + ": " + status_name(e.graph.status);
        }
    }
    return e.graph_error.empty();
}

// Caller holds e.mutex. The knob choices of configuration cfg (knob_choices), read once;
// unreadable ones never equal another configuration's.
const std::string& knobs_of(ProblemEntry& e, cudnnBackendDescriptor_t cfg) {
    auto it = e.knob_text.find(cfg);
    if (it == e.knob_text.end())
        it = e.knob_text
                 .emplace(cfg, knob_choices(cfg).value_or("unread#" + std::to_string(reinterpret_cast<uintptr_t>(cfg))))
                 .first;
    return it->second;
}

// Caller holds e.mutex and the graph is built. A failed query leaves the mode empty: the engines
// are still reached by index, with their default knobs. The modes before m are queried first, so
// an engine's configurations are numbered in heuristic order.
const ProblemEntry::Mode& ensure_mode(ProblemEntry& e, std::size_t m) {
    for (std::size_t before = 0; before < m; ++before) ensure_mode(e, before);
    ProblemEntry::Mode& mode = e.modes[m];
    if (mode.queried) return mode;
    mode.queried = true;
    std::vector<Desc> cfgs;
    ++work_counters().heuristic_queries;
    if (heuristic_configs(e.graph.graph, kModes[m], cfgs) != CUDNN_STATUS_SUCCESS) return mode;
    for (Desc& cfg : cfgs) {
        Desc engine;
        int64_t index = -1;
        if (engine_of(cfg, engine, index) != CUDNN_STATUS_SUCCESS || index < 0) continue;
        std::vector<cudnnBackendDescriptor_t>& met = e.configs_met[index];
        if (!met.empty()) {
            const std::string& knobs = knobs_of(e, cfg.get());
            const auto same = std::find_if(met.begin(), met.end(),
                                           [&](cudnnBackendDescriptor_t m) { return knobs_of(e, m) == knobs; });
            if (same != met.end()) {
                e.knob_text.erase(cfg.get());  // the same configuration again: dropped with its descriptor
                mode.repeats.push_back({index, static_cast<int>(same - met.begin())});
                continue;
            }
        }
        const ConfigKey key{index, static_cast<int>(met.size())};
        met.push_back(cfg.get());
        mode.entries.push_back(key);
        mode.cfg.emplace(key, std::move(cfg));
    }
    return mode;
}

// ---- the engine list and its static notes -----------------------------------------------

struct EngineNotes {
    Notes all;      // union over every probe the engine supports
    Notes f32;      // union over the f32 probes
    bool any_f32 = false;
    bool any = false;
    bool runtime_compiled = false;  // some probe reports CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION
};

// TENSOR_CORE and DOWN_CONVERT_INPUTS describe what happens to f32 inputs (TF32, or conversion
// to f16/bf16); for f16/bf16 data they say nothing a filter needs.
constexpr uint32_t kF32Notes =
    static_cast<uint32_t>(Note::tensor_core) | static_cast<uint32_t>(Note::down_convert_inputs);

Notes without(Notes n, uint32_t bits) { return Notes(static_cast<Note>(n.bits() & ~bits)); }

std::atomic<bool> g_refuse_measured_wrong{true};

// Engines that finalize but compute wrong results (measured with cuDNN 9.19.0 on an H200 against
// the f64 oracle; see docs/gpu.md). Empty when none applies.
std::string measured_wrong(Direction d, int64_t engine, const ConvProblem& p) {
    const Geometry g = geometry(p);
    bool asymmetric = false;
    for (int i = 0; i < g.spatial; ++i)
        if (g.pad_pre[static_cast<std::size_t>(i)] != g.pad_post[static_cast<std::size_t>(i)]) asymmetric = true;
    if (asymmetric && d != Direction::fwd)
        return "asymmetric padding: cuDNN 9.19 backward engines accept pre != post padding but several return wrong "
            "gradients or "
               "leave elements unwritten (measured: bwd_data eng50, bwd_filter eng1/eng18/eng20), so convtune refuses "
               "it for every backward engine";
    if (d == Direction::fwd && engine == 6 && padding_reaches_kernel(p)) return kWinogradPadding;
    // fwd eng72 and bwd_filter eng69/eng70 (TF32 engines) in f32: wrong results (scaled errors
    // 0.4-1.8) on 6 of the 39 probed pairs whose input or output channels per group are not a
    // multiple of 8, correct on all 145 pairs where both are (test_gpu_cudnn's
    // refused_engines_probe, docs/gpu.md).
    const bool f32 = p.dtype == DataType::f32;
    const bool channels_by_8 = p.c_per_group() % 8 == 0 && p.k_per_group() % 8 == 0;
    if (f32 && !channels_by_8 &&
        ((d == Direction::fwd && engine == 72) || (d == Direction::bwd_filter && (engine == 69 || engine == 70))))
        return "engine " + std::to_string(engine) +
               " returned wrong f32 results with channels per group not a multiple of 8 (cuDNN 9.19.0, measured on an "
               "H200), so convtune refuses it for such f32 problems";
    return {};
}

class GraphAlgorithm;

struct GraphRegistry {
    std::array<int64_t, 3> count{};
    std::array<std::string, 3> count_error;
    // Per direction, in the order ids are listed: the configuration slot n major, the engine
    // index minor, so (direction, engine, n) is at n * count + engine of its direction.
    std::array<std::vector<std::unique_ptr<GraphAlgorithm>>, 3> algorithms;
    const GraphAlgorithm* find(Direction d, int64_t engine, int nth) const {
        const auto di = static_cast<std::size_t>(dir_index(d));
        if (engine < 0 || engine >= count[di] || nth < 0 || nth >= kConfigSlots) return nullptr;
        return algorithms[di][static_cast<std::size_t>(nth * count[di] + engine)].get();
    }
    // The engines' listed notes, each probed on the first ask for it (engine_notes): the probe
    // graphs of its direction are built once, then only that engine is tried on them, so a
    // process that meets a few engines (a warm tuning database) pays a few probes, not all of
    // them. One mutex serialises the probes (they share the probe graphs).
    std::mutex probe_mutex;
    std::array<bool, 3> graphs_built{};
    std::array<std::vector<std::pair<DataType, OpGraph>>, 3> probe_graphs;
    std::array<std::vector<std::optional<EngineNotes>>, 3> notes;

    EngineNotes engine_notes(Direction d, int64_t engine);
};

GraphRegistry& registry();

class GraphAlgorithm final : public Algorithm {
public:
    GraphAlgorithm(const Backend& b, Direction d, int64_t engine, int nth = 0)
        : backend_(b),
          dir_(d),
          engine_(engine),
          nth_(nth),
          id_("cudnn.graph." + std::string(to_string(d)) + ".eng" + std::to_string(engine) +
              (nth ? ".cfg" + std::to_string(nth) : "")) {}
    std::string_view id() const override { return id_; }
    const Backend& backend() const override { return backend_; }
    Direction direction() const { return dir_; }
    int64_t engine() const { return engine_; }

    Notes notes() const override { return listed(registry().engine_notes(dir_, engine_)); }

    // Precompiled engines: the execution plan finalizes. Runtime-compiled engines
    // (CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION): the engine and its configuration finalize; the
    // plan, whose build compiles a kernel (0.03-2 s each on the H200), is built by the first
    // workspace_size() or run(), and a failure there is reported by both.
    Support supports(const ConvProblem& p) const override {
        if (Support s = before_engine(p); !s) return s;
        ProblemEntry& e = cache().entry(p);
        std::lock_guard<std::mutex> lock(e.mutex);
        const EnginePlan& plan = stage(e, p, Need::as_supports);
        if (!plan.support) return plan.support;
        if (plan.plan_tried && !plan.plan_support) return plan.plan_support;
        return engine_checks(plan, p);
    }

    // The notes the engine reports for p (as notes_for), read once the engine is built, before its
    // execution plan is: PyTorch too filters engine configurations by their notes before it builds
    // plans. nullopt where supports(p) refuses p before or at the plan (it says why).
    std::optional<Notes> notes_before_support(const ConvProblem& p) const override {
        if (!before_engine(p)) return std::nullopt;
        ProblemEntry& e = cache().entry(p);
        std::lock_guard<std::mutex> lock(e.mutex);
        const EnginePlan& plan = stage(e, p, Need::engine);
        if (!plan.support || (plan.plan_tried && !plan.plan_support) || !engine_checks(plan, p)) return std::nullopt;
        return Notes(static_cast<Note>(plan.report.notes.bits() & notes().bits()));
    }

    std::size_t workspace_size(const ConvProblem& p) const override {
        if (!supports(p)) return 0;
        ProblemEntry& e = cache().entry(p);
        std::lock_guard<std::mutex> lock(e.mutex);
        const EnginePlan& plan = stage(e, p, Need::plan);
        return plan.plan_support ? plan.workspace : 0;
    }

    Status run(const ConvProblem& p, const ConvTensors& t, Workspace ws) const override {
        const Support s = supports(p);
        if (!s) return Status::unsupported(s.reason);
        cudnnBackendDescriptor_t plan = nullptr;
        std::size_t need = 0;
        {
            ProblemEntry& e = cache().entry(p);
            std::lock_guard<std::mutex> lock(e.mutex);
            const EnginePlan& ep = stage(e, p, Need::plan);
            if (!ep.plan_support) return Status::unsupported(ep.plan_support.reason);
            plan = ep.plan.get();
            need = ep.workspace;
        }
        if (ws.bytes < need)
            return Status::failure(id_ + ": workspace of " + std::to_string(ws.bytes) + " bytes, needs " +
                                   std::to_string(need));
        for (const void* ptr : {t.x.data, t.w.data, t.y.data})
            if (reinterpret_cast<uintptr_t>(ptr) % kAlignment != 0)
                return Status::unsupported(id_ + ": tensors must be " + std::to_string(kAlignment) + "-byte aligned");
        std::string why;
        cudnnHandle_t h = thread_handle(&why);
        if (!h) return Status::failure(why);
        return to_status(execute_plan(h, plan, t, need ? ws.data : nullptr), id_ + ": cudnnBackendExecute");
    }

    // cudnn_error_bound over the notes reported for p, plus measured refinements:
    //  * REDUCED_PRECISION_REDUCTION (f16/bf16): the accumulation term uses the storage type's
    //    unit roundoff instead of f32's;
    //  * f32 without TENSOR_CORE: L * 2^-20 more. cuDNN does not document how its f32 engines
    //    multiply; bwd_filter eng17 measured 21 f32 ulps (relative to sum|a*b|) on L = 12, above
    //    the plain L*2^-24 + 2^-24 (a product emulated from split TF32 parts, whose dropped
    //    low*low term and rounded low parts cost up to 3 * 2^-22 per product, would explain it).
    double error_bound(const ConvProblem& p) const override {
        EngineReport rep;
        bool have = false;
        if (p.direction == dir_ && unavailable_reason().empty()) {
            ProblemEntry& e = cache().entry(p);
            std::lock_guard<std::mutex> lock(e.mutex);
            const EnginePlan& plan = stage(e, p, Need::as_supports);
            if (plan.support) {
                rep = plan.report;
                have = true;
            }
        }
        Notes n = have ? (rep.notes | notes()) : notes();
        // bwd_filter eng4 reports no FFT note but its error behaves like a transform's: 80 f32
        // ulps (relative to sum|a*b|) on a 4x4 input with a 4x4 kernel, L = 2. It gets the
        // transform-size term of FFT engines (not re-measured after this change).
        if (dir_ == Direction::bwd_filter && engine_ == 4) n = n | Note::fft;
        const double L = static_cast<double>(p.reduction_length());
        double b = cudnn_error_bound(p, n);
        if (have && rep.reduced_precision && p.dtype != DataType::f32 && p.dtype != DataType::f64)
            b += L * (unit_roundoff(p.dtype) - unit_roundoff(DataType::f32));
        if (p.dtype == DataType::f32 && !n.has(Note::tensor_core)) b += L * 0x1p-20;
        return b;
    }

    // The notes the engine reports for p's graph, within the listed ones (supports(p) refuses a
    // problem where it reports more; TENSOR_CORE and DOWN_CONVERT_INPUTS say nothing for f16/bf16).
    Notes notes_for(const ConvProblem& p) const override {
        const Notes listed_notes = notes();
        const std::optional<Notes> r = reported(p);
        return r ? Notes(static_cast<Note>(r->bits() & listed_notes.bits())) : listed_notes;
    }

    bool compiles_at_first_use(const ConvProblem& p) const override {
        if (!supports(p)) return false;
        ProblemEntry& e = cache().entry(p);
        std::lock_guard<std::mutex> lock(e.mutex);
        return stage(e, p, Need::as_supports).report.runtime_compiled;
    }

    // The notes cuDNN reports for p, or nullopt when the engine does not take p.
    std::optional<Notes> reported(const ConvProblem& p) const {
        if (!supports(p)) return std::nullopt;
        ProblemEntry& e = cache().entry(p);
        std::lock_guard<std::mutex> lock(e.mutex);
        return stage(e, p, Need::as_supports).report.notes;
    }

    // Does not build a deferred plan.
    std::optional<CudnnPlanInfo> info(const ConvProblem& p) const {
        if (p.direction != dir_) return std::nullopt;
        CudnnPlanInfo i;
        i.support = supports(p);
        if (!unavailable_reason().empty()) return i;
        ProblemEntry& e = cache().entry(p);
        std::lock_guard<std::mutex> lock(e.mutex);
        const EnginePlan& plan = stage(e, p, Need::as_supports);
        i.knobs = plan.knobs;
        i.runtime_compiled = plan.report.runtime_compiled;
        i.reduced_precision_reduction = plan.report.reduced_precision;
        i.reported = plan.report.notes;
        i.plan_built = plan.plan_tried && plan.plan_support;
        i.workspace = plan.workspace;
        i.build_ms = plan.build_ms;
        return i;
    }

private:
    // DOWN_CONVERT_INPUTS is never listed: an engine that down-converts an f32 problem's inputs
    // is refused for that problem (PyTorch never runs such engines), and f16/bf16 inputs have
    // nothing narrower to go to. TENSOR_CORE comes from the f32 probes when the engine takes
    // any f32 graph (it only filters f32: TF32).
    static Notes listed(const EngineNotes& en) {
        const uint32_t tc = static_cast<uint32_t>(Note::tensor_core);
        const Notes tc_src = en.any_f32 ? en.f32 : en.all;
        return without(en.all, kF32Notes) | Notes(static_cast<Note>(tc_src.bits() & tc));
    }

    // supports(p)'s checks that build nothing.
    Support before_engine(const ConvProblem& p) const {
        if (p.direction != dir_) return Support::no("direction: " + id_ + " computes " + std::string(to_string(dir_)));
        if (const std::string& u = unavailable_reason(); !u.empty()) return Support::no("cuDNN unavailable: " + u);
        if (g_refuse_measured_wrong.load(std::memory_order_relaxed))
            if (std::string w = measured_wrong(dir_, engine_, p); !w.empty()) return Support::no(w);
        return Support::yes();
    }

    // supports(p)'s checks of the notes the built engine reports for p.
    Support engine_checks(const EnginePlan& plan, const ConvProblem& p) const {
        const Notes listed_notes = notes();
        if (p.dtype == DataType::f32 && plan.report.notes.has(Note::down_convert_inputs))
            return Support::no("notes: " + id_ +
                               " down-converts this f32 problem's inputs (DOWN_CONVERT_INPUTS); convtune refuses such "
                               "configurations, as PyTorch never runs them");
        // The notes cuDNN reports for this problem must be within the listed ones.
        Notes reported = plan.report.notes;
        if (p.dtype != DataType::f32) reported = without(reported, kF32Notes);
        if ((reported.bits() & ~listed_notes.bits()) != 0)
            return Support::no("notes: on this problem " + id_ + " reports [" + reported.to_string() +
                               "], outside its listed notes [" + listed_notes.to_string() + "]");
        return Support::yes();
    }

    // How far stage() builds: the engine only; as supports() needs (the plan too unless the
    // engine is runtime-compiled); the plan.
    enum class Need { engine, as_supports, plan };

    // Caller holds e.mutex. Stage 1 always; stage 2 as `need` asks.
    const EnginePlan& stage(ProblemEntry& e, const ConvProblem& p, Need need) const {
        auto it = e.plans.find(ConfigKey{engine_, nth_});
        if (it == e.plans.end()) {
            auto ep = std::make_unique<EnginePlan>();
            const auto t0 = std::chrono::steady_clock::now();
            build_engine(e, p, *ep);
            ep->build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            it = e.plans.emplace(ConfigKey{engine_, nth_}, std::move(ep)).first;
        }
        EnginePlan& ep = *it->second;
        const bool plan_now = need == Need::plan || (need == Need::as_supports && !ep.report.runtime_compiled);
        if (ep.support && !ep.plan_tried && plan_now) {
            const auto t0 = std::chrono::steady_clock::now();
            build_plan(ep);
            ep.build_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        }
        return ep;
    }

    void build_engine(ProblemEntry& e, const ConvProblem& p, EnginePlan& ep) const {
        if (!ensure_graph(e, p)) {
            ep.support = Support::no(e.graph_error);
            return;
        }
        const Desc* listed_cfg = nullptr;
        for (std::size_t m = 0; m < kKnobModes && !listed_cfg; ++m) {
            const ProblemEntry::Mode& mode = ensure_mode(e, m);
            if (auto h = mode.cfg.find(ConfigKey{engine_, nth_}); h != mode.cfg.end()) {
                listed_cfg = &h->second;
                const std::string& choices = knobs_of(e, h->second.get());
                ep.knobs = std::string(kModeName[m]) + (choices.empty() ? "" : "[" + choices + "]");
            }
        }
        if (!listed_cfg && nth_ > 0) {
            ep.support = Support::no("cuDNN's heuristics list fewer than " + std::to_string(nth_ + 1) +
                                     " configurations of engine " + std::to_string(engine_) + " for this problem");
            return;
        }
        // Counted from here: an engine read from a listed configuration or made by index (the
        // configurations the heuristics list fewer of than nth_ cost no cuDNN call).
        ++work_counters().engine_builds;
        if (listed_cfg) {
            ep.cfg = listed_cfg;
            int64_t idx = -1;
            if (const cudnnStatus_t s = engine_of(*ep.cfg, ep.engine, idx); s != CUDNN_STATUS_SUCCESS) {
                ep.support = Support::no("engine " + std::to_string(engine_) +
                                         ": cannot read the heuristic configuration: " + status_name(s));
                return;
            }
        } else {
            ep.knobs = "default";
            if (const cudnnStatus_t s = make_engine(e.graph.graph, engine_, ep.engine); s != CUDNN_STATUS_SUCCESS) {
                ep.support = Support::no("engine " + std::to_string(engine_) +
                                         " does not support this operation graph: " + status_name(s));
                return;
            }
            ep.own_cfg = Desc(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
            cudnnStatus_t s = ep.own_cfg ? set_desc(ep.own_cfg, CUDNN_ATTR_ENGINECFG_ENGINE, ep.engine)
                                         : CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
            if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(ep.own_cfg.get());
            if (s != CUDNN_STATUS_SUCCESS) {
                ep.support =
                    Support::no("engine " + std::to_string(engine_) + ": engine configuration: " + status_name(s));
                return;
            }
            ep.cfg = &ep.own_cfg;
        }
        ep.report = read_report(ep.engine.get());
        ep.support = Support::yes();
    }

    void build_plan(EnginePlan& ep) const {
        ep.plan_tried = true;
        ++work_counters().plan_builds;
        std::string why;
        cudnnHandle_t h = thread_handle(&why);
        if (!h) {
            ep.plan_support = Support::no(why);
            return;
        }
        BuiltPlan b = build_execution_plan(h, *ep.cfg);
        if (b.status != CUDNN_STATUS_SUCCESS) {
            ep.plan_support = Support::no("engine " + std::to_string(engine_) + " (" + ep.knobs + " knobs): " + b.what);
            return;
        }
        ep.workspace = b.workspace;
        ep.plan = std::move(b.plan);
        ep.plan_support = Support::yes();
    }

    const Backend& backend_;
    Direction dir_;
    int64_t engine_;
    int nth_;  // which configuration of the engine (ConfigKey)
    std::string id_;
};

GraphRegistry& registry() {
    static GraphRegistry* r = new GraphRegistry;  // never destroyed (see GraphCache)
    return *r;
}

// Small graphs covering the shapes engines specialise on.
std::vector<ConvProblem> probe_problems(Direction d) {
    static const char* const kSpecs[] = {
        "n=2,c=16,k=32,in=16x16,ker=3x3,pad=1x1",          "n=2,c=64,k=64,in=14x14,ker=1x1,stride=2x2",
        "n=1,c=8,k=16,in=6x6x6,ker=3x3x3,pad=1x1x1",       "n=2,c=16,k=16,g=16,in=12x12,ker=3x3,pad=1x1",
        "n=1,c=8,k=8,in=12x12,ker=3x3,dil=2x2,pad=2x2",    "n=2,c=32,k=32,g=2,in=9x9,ker=5x5,pad=2x2",
        "n=4,c=64,k=64,in=28x28,ker=3x3,pad=1x1",
    };
    std::vector<ConvProblem> r;
    for (const char* s : kSpecs)
        for (DataType t : {DataType::f32, DataType::f16, DataType::bf16})
            for (Layout l : {Layout::nchw, Layout::nhwc}) {
                ConvProblem p = ConvProblem::parse(s);
                p.direction = d;
                p.dtype = t;
                p.layout = l;
                r.push_back(p);
            }
    return r;
}

EngineNotes GraphRegistry::engine_notes(Direction d, int64_t engine) {
    const auto di = static_cast<std::size_t>(dir_index(d));
    std::lock_guard lock(probe_mutex);
    if (engine < 0 || engine >= count[di]) return {};
    std::vector<std::optional<EngineNotes>>& v = notes[di];
    if (v.empty()) v.resize(static_cast<std::size_t>(count[di]));
    std::optional<EngineNotes>& slot = v[static_cast<std::size_t>(engine)];
    if (slot) return *slot;
    slot.emplace();
    // Without cuDNN (or a handle) the notes stay empty: the backend is unavailable then.
    if (!unavailable_reason().empty()) return *slot;
    cudnnHandle_t h = thread_handle();
    if (!h) return *slot;
    ++work_counters().note_probes;
    if (!graphs_built[di]) {
        graphs_built[di] = true;
        for (const ConvProblem& p : probe_problems(d)) {
            OpGraph g = build_graph(p, h);
            if (g.ok()) probe_graphs[di].emplace_back(p.dtype, std::move(g));
        }
    }
    EngineNotes& en = *slot;
    for (const auto& [dtype, g] : probe_graphs[di]) {
        Desc e;
        if (make_engine(g.graph, engine, e) != CUDNN_STATUS_SUCCESS) continue;
        const EngineReport rep = read_report(e.get());
        en.any = true;
        en.all = en.all | rep.notes;
        en.runtime_compiled = en.runtime_compiled || rep.runtime_compiled;
        if (dtype == DataType::f32) {
            en.any_f32 = true;
            en.f32 = en.f32 | rep.notes;
        }
    }
    return en;
}

}  // namespace

std::optional<CudnnPlanInfo> graph_plan_info(const Algorithm& a, const ConvProblem& p) {
    const auto* g = dynamic_cast<const GraphAlgorithm*>(&a);
    if (!g) return std::nullopt;
    return g->info(p);
}

bool graph_engine_compiles(const Algorithm& a) {
    const auto* g = dynamic_cast<const GraphAlgorithm*>(&a);
    return g && registry().engine_notes(g->direction(), g->engine()).runtime_compiled;
}

std::vector<const Algorithm*> graph_algorithms(const Backend& b) {
    GraphRegistry& r = registry();
    static std::once_flag once;
    std::call_once(once, [&] {
        for (Direction d : kDirections) {
            const auto di = static_cast<std::size_t>(dir_index(d));
            ConvProblem p = ConvProblem::parse("n=1,c=8,k=8,in=8x8,ker=3x3,pad=1x1");
            p.direction = d;
            OpGraph g = build_graph(p, nullptr);  // needs no handle and no GPU
            if (!g.ok()) {
                r.count_error[di] = g.failed + ": " + status_name(g.status);
                continue;
            }
            r.count[di] = global_count(g.graph);
            for (int nth = 0; nth < kConfigSlots; ++nth)
                for (int64_t i = 0; i < r.count[di]; ++i)
                    r.algorithms[di].push_back(std::make_unique<GraphAlgorithm>(b, d, i, nth));
        }
    });
    std::vector<const Algorithm*> out;
    for (const auto& dir : r.algorithms)
        for (const auto& a : dir) out.push_back(a.get());
    return out;
}

bool is_graph(const Algorithm& a, std::optional<Direction> d) {
    const auto* g = dynamic_cast<const GraphAlgorithm*>(&a);
    return g && (!d || g->direction() == *d);
}

std::vector<const Algorithm*> graph_ranking(const ConvProblem& p, CudnnRanking which, bool repeats) {
    std::vector<const Algorithm*> out;
    if (which == CudnnRanking::legacy_v7 || !unavailable_reason().empty()) return out;
    const std::size_t m = which == CudnnRanking::mode_a ? 0 : which == CudnnRanking::fallback ? 1 : 2;
    std::vector<ConfigKey> entries;
    {
        ProblemEntry& e = cache().entry(p);
        std::lock_guard<std::mutex> lock(e.mutex);
        if (!ensure_graph(e, p)) return out;
        const ProblemEntry::Mode& mode = ensure_mode(e, m);
        entries = repeats ? mode.repeats : mode.entries;
    }
    for (const ConfigKey& k : entries)  // configurations past the last slot have no id
        if (const GraphAlgorithm* a = registry().find(p.direction, k.first, k.second)) out.push_back(a);
    return out;
}

std::optional<Notes> graph_reported_notes(const Algorithm& a, const ConvProblem& p) {
    const auto* g = dynamic_cast<const GraphAlgorithm*>(&a);
    if (!g) return std::nullopt;
    return g->reported(p);
}

void graph_forget_plans() { cache().forget(); }

void graph_refuse_measured_wrong(bool refuse) { g_refuse_measured_wrong.store(refuse, std::memory_order_relaxed); }

}  // namespace convtune::cudnn_detail
