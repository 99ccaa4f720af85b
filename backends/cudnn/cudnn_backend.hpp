// The cuDNN backend: legacy-API algorithms and graph-API engine configurations.
//
// Algorithm ids (persisted in tuning databases; append-only, never reused):
//   cudnn.<dir>.<algo>.<math>   a legacy algorithm (cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t)
//                               run with one cudnnMathType_t:
//                               <dir>  fwd | bwd_data | bwd_filter
//                               <algo> the enum's name in lower case without its prefix, e.g.
//                                      implicit_precomp_gemm, winograd_nonfused, algo_1, fft_tiling
//                               <math> default (CUDNN_DEFAULT_MATH: for f32 TF32 tensor cores are
//                                      allowed), tensor_op (CUDNN_TENSOR_OP_MATH), fma
//                                      (CUDNN_FMA_MATH: no tensor cores, strict f32)
//   cudnn.graph.<dir>.eng<N>    graph (backend) API engine with global index N for the single-
//                               convolution operation graph of the direction, with the first
//                               configuration cuDNN's heuristics return for it. N is cuDNN 9.x's
//                               engine numbering (CUDNN_ATTR_ENGINE_GLOBAL_INDEX): the ids are
//                               tied to that numbering, and a cuDNN release that renumbers its
//                               engines needs new ids, not reused ones.
//   cudnn.graph.<dir>.eng<N>.cfg<n>  the same engine with the n-th further configuration (knob
//                               choices) the heuristics return for the problem (n = 1..3).
// See docs/gpu.md for the knob policy, the notes and the error bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "convtune/backend.hpp"

namespace convtune {

Backend& cudnn_backend();

// cuDNN's own search (cudnnFind*AlgorithmEx over the legacy algorithms), exposed so a selector
// can use it as a search strategy and its picks can be compared with convtune's.
struct CudnnFinderOptions {
    // PyTorch's math-type policy: f32 -> DEFAULT when TF32 is allowed, else FMA; f16 ->
    // TENSOR_OP; bf16, f64 -> DEFAULT.
    bool allow_tf32 = true;
    // Largest workspace an algorithm may use (cuDNN skips algorithms needing more).
    std::size_t workspace_limit = SIZE_MAX;
};
struct CudnnFinderResult {
    const Algorithm* algorithm = nullptr;  // the legacy algorithm (direction, algo, math type)
    Status status;                         // cuDNN's status for this algorithm
    double ms = 0;                         // cuDNN's own measurement
    std::size_t workspace = 0;
    bool deterministic = true;
};
// Results in cuDNN's order (fastest first; failed entries last). Allocates tensors filled with
// values in [-1, 1) and the workspace itself. On a setup failure (no GPU, descriptors rejected,
// allocation failed) the result is one entry with algorithm == nullptr and the failing status.
std::vector<CudnnFinderResult> cudnn_find(const ConvProblem& p, const CudnnFinderOptions& o = {});
// The same on caller-provided device tensors (their contents are overwritten) and workspace.
std::vector<CudnnFinderResult> cudnn_find(const ConvProblem& p, const ConvTensors& device, Workspace ws,
                                          const CudnnFinderOptions& o = {});

// cuDNN's own rankings for p, as algorithms of this backend, in cuDNN's order, not filtered by
// supports(): heuristics mode A (PyTorch's benchmark=False), mode B, the fallback list, and the
// legacy cudnnGet*Algorithm_v7 ranking (mapped by the math type each entry reports).
enum class CudnnRanking { mode_a, mode_b, fallback, legacy_v7 };

// Forgets every graph-API operation graph and execution plan built so far (they are left
// allocated, not destroyed), so the next call on a problem builds them again as a fresh process
// would. For benchmarks that compare first-call costs; kernels already loaded stay loaded.
void cudnn_forget_plans();
// Lifts (false) or restores (true, the default) the refusal of graph engines measured to compute
// wrong results (docs/gpu.md, "Engines refused after measurement"), so the probe that re-measures
// them (test_gpu_cudnn --run_test=gpu/refused_engines_probe) can run them against the oracle. Process-wide; not for
// production use: with the refusals lifted a selector may pick an engine known to be wrong.
void cudnn_refuse_measured_wrong(bool refuse);
std::vector<const Algorithm*> cudnn_ranking(const ConvProblem& p, CudnnRanking r);

// The notes cuDNN reports for `a` on p: for a graph engine, its CUDNN_ATTR_ENGINE_NUMERICAL_NOTE
// for this operation graph; for a legacy algorithm, the determinism and math type of its
// cudnnGet*Algorithm_v7 entry. nullopt when cuDNN reports nothing for the pair.
std::optional<Notes> cudnn_reported_notes(const Algorithm& a, const ConvProblem& p);

// What the backend knows about a graph engine on p (reports, tests, the benchmark's probe).
// Never builds a runtime-compiled engine's deferred plan.
struct CudnnPlanInfo {
    Support support;
    std::string knobs;  // where the configuration came from (mode_a, fallback, default) and its knob choices
                        // "[TYPE=VALUE ...]"
    bool runtime_compiled = false;             // CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION
    bool reduced_precision_reduction = false;  // CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION
    Notes reported;                            // the engine's notes on this graph
    bool plan_built = false;                   // runtime-compiled plans are built on first use
    std::size_t workspace = 0;                 // valid when plan_built
    double build_ms = 0;                       // wall time spent building engine and plan so far

};
// nullopt for a legacy algorithm or another direction.
std::optional<CudnnPlanInfo> cudnn_plan_info(const Algorithm& a, const ConvProblem& p);

}  // namespace convtune
