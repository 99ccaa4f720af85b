// Between the cuDNN backend's translation units: the two algorithm families and their rankings.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

#include "cudnn/cudnn_backend.hpp"

namespace convtune::cudnn_detail {

// The preparation work of this process (Backend::work_counts), counted where it is done.
struct WorkCounters {
    std::atomic<int64_t> heuristic_queries{0};  // heuristics mode queries (graph API), one per problem and mode
    std::atomic<int64_t> engine_builds{0};      // engine configurations finalized for a problem (stage 1)
    std::atomic<int64_t> plan_builds{0};        // execution plans finalized (stage 2)
    std::atomic<int64_t> note_probes{0};        // engines probed for their listed notes (once per engine)
    std::atomic<int64_t> legacy_v7_queries{0};  // cudnnGet*Algorithm_v7 calls
    std::atomic<int64_t> legacy_workspace_queries{0};  // legacy algorithms' per-problem workspace queries
};
WorkCounters& work_counters();

// Legacy algorithms, in id order: fwd, bwd_data, bwd_filter; per direction each cuDNN algorithm
// enum value with math types default, tensor_op, fma.
std::vector<const Algorithm*> legacy_algorithms(const Backend& b);
// cudnnGet*Algorithm_v7's ranking of p mapped to legacy algorithms (not filtered by supports()).
std::vector<const Algorithm*> legacy_v7_ranking(const ConvProblem& p);
std::optional<Notes> legacy_reported_notes(const Algorithm& a, const ConvProblem& p);
// A legacy algorithm (of direction d, when given).
bool is_legacy(const Algorithm& a, std::optional<Direction> d = {});

// Graph-API engines: per direction, cudnn.graph.<dir>.eng<N> for N in [0, global engine count).
std::vector<const Algorithm*> graph_algorithms(const Backend& b);
// Heuristic mode A / B / fallback for p, mapped to graph algorithms (not filtered by supports()).
// `repeats`: instead, the configurations the mode lists again (already listed by it or by an
// earlier mode), each once per further listing.
std::vector<const Algorithm*> graph_ranking(const ConvProblem& p, CudnnRanking r, bool repeats = false);
std::optional<Notes> graph_reported_notes(const Algorithm& a, const ConvProblem& p);
std::optional<CudnnPlanInfo> graph_plan_info(const Algorithm& a, const ConvProblem& p);
// Whether a graph engine compiles its kernel at run time, as its note probes report (the
// engine's, not a problem's: one probe per engine per process, no engine build per problem).
bool graph_engine_compiles(const Algorithm& a);
// A graph engine (of direction d, when given).
bool is_graph(const Algorithm& a, std::optional<Direction> d = {});
void graph_forget_plans();
void graph_refuse_measured_wrong(bool refuse);

}  // namespace convtune::cudnn_detail
