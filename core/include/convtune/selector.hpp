// Selector: chooses the algorithm for (problem, backend, flags) — from memory, from the tuning
// database, from the backend's heuristic, or by timing candidates — and runs it, falling
// through to the next candidate when one fails or runs out of memory.
//
// The selector only orchestrates: the memory cache, the tuning database, the policy's decision,
// the fall-through. What goes into the cache key, when to search, which candidates a decision
// reaches, how they are measured and whether the result is persisted are the policy's answers,
// and the walks that reach and time the candidates are the policy's (FlagValues::policy ->
// SelectionPolicy, policy.hpp; each policy's rules are at the top of its file in
// core/src/policies/ and in docs/autotuning.md); timing and choosing are the measurement's
// (measurement.hpp).
// Filters, every policy: deterministic drops NONDETERMINISTIC; f32 without allow_tf32 drops
// TENSOR_CORE; DOWN_CONVERT_INPUTS is always dropped; workspace above workspace_limit is dropped.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "convtune/backend.hpp"
#include "convtune/cache_key.hpp"
#include "convtune/decision.hpp"
#include "convtune/flags.hpp"
#include "convtune/measurement.hpp"
#include "convtune/policy.hpp"
#include "convtune/search_history.hpp"
#include "convtune/tuning_cache.hpp"
#include "convtune/tuning_db.hpp"

namespace convtune {

// The cache key's text (CacheKey: backend, problem and the flag fields the policy keys on).
std::string cache_key(const Backend& b, const ConvProblem& p, const FlagValues& f);

// Why the flag filters drop an algorithm whose notes on p (Algorithm::notes_for) are `notes`, or
// an empty string when they keep it: the selector's filters above except the workspace limit (for
// the benchmarks, which apply the same rules).
std::string flag_filter_reason(const Notes& notes, const ConvProblem& p, const FlagValues& f);

// What a selector reports as it works, for metering (the simulator charges search and execution
// time through it) and tracing. Calls come from the thread that calls select() or run(); the
// defaults do nothing.
class SelectorObserver {
public:
    virtual ~SelectorObserver() = default;
    // A timed search of p begins (every cache and database missed).
    virtual void search_started(const ConvProblem&) {}
    // One timed call of candidate a during a search (its warm-up or a sample): ms on the device's clock.
    virtual void candidate_timed(const ConvProblem&, const Algorithm&, double) {}
    // run() is about to execute a on p, a call of the program's sequence rather than a timing
    // sample: what a meter whose device models both (the simulator's, on a replay) tells it.
    virtual void executing(const ConvProblem&, const Algorithm&) {}
    // run() executed a on p with this status, in ms of Device::time_ms. Executions are timed only
    // while an observer is set.
    virtual void executed(const ConvProblem&, const Algorithm&, const Status&, double) {}
};

class SearchContext;  // what a policy's walk works with (core/src/search.hpp)
class InBandCall;
class PolicyState;

// Where run() takes workspace from when its caller owns the device's memory (PyTorch's caching
// allocator): a buffer of at least the given bytes, or an empty one when there is none (out of
// memory, which the selector treats as it treats Backend::allocate failing). Without one, the
// backend's allocate().
using WorkspaceSource = std::function<DeviceBuffer(std::size_t)>;

// What one Selector::run call ran under: the decision's algorithm, where the decision came from
// (Source::memory when the in-memory cache had it) and the search time this call spent on it.
struct RunInfo {
    std::string algorithm;
    Source source = Source::heuristic;
    double search_ms = 0;
};

class Selector {
public:
    // `cache` is required; `db` may be null (no persistence).
    Selector(const Backend& backend, TuningCache& cache, TuningDatabase* db = nullptr);

    const Backend& backend() const { return backend_; }
    // The observer of what this selector does next (nullptr: none). Not owned; set it before the
    // selector is shared between threads.
    void set_observer(SelectorObserver* o) { observer_ = o; }

    // The decision for p under f, from the cheapest source that has one. Throws Error when no
    // algorithm of the backend can run p under f (the message lists why each was rejected).
    std::shared_ptr<const Decision> select(const ConvProblem& p, const FlagValues& f);
    std::shared_ptr<const Decision> select(const ConvProblem& p) { return select(p, current_flags()); }

    // A fresh decision that ignores every cache (what select does on a miss).
    Decision decide(const ConvProblem& p, const FlagValues& f) const;

    // Selects and runs on t (device memory of the backend). When the chosen algorithm fails or
    // runs out of memory, the next eligible candidate runs and becomes the cached choice.
    // Under an in-band policy (SelectionPolicy::in_band) a shape not yet pinned runs the
    // candidate whose call is due instead, timed as it runs (a failing one is replaced by the
    // next due in the same call); the shape's calls are serialised until it is pinned.
    // `workspace`, when given, provides every workspace buffer of the call (a search's and the
    // run's); `info`, when given, receives what the call ran under. A call the in-memory cache
    // answers copies nothing of the decision (a cuDNN decision lists ~1000 candidates): it runs
    // the chosen algorithm and builds the order of the others only when that one fails.
    Status run(const ConvProblem& p, const ConvTensors& t, const FlagValues& f,
               const WorkspaceSource* workspace = nullptr, RunInfo* info = nullptr);

private:
    // `t`, when given, are the caller's tensors (run()): a search times candidates on them
    // instead of allocating and filling scratch tensors, as PyTorch's benchmark mode does (the
    // output is overwritten, and the chosen algorithm computes it afterwards).
    // `ws`, when given, is the caller's workspace source (run()).
    std::shared_ptr<const Decision> select(const ConvProblem& p, const FlagValues& f, const ConvTensors* t,
                                           const WorkspaceSource* ws);
    // select() without the copy it makes of a cached decision to mark it Source::memory: the
    // cached decision itself, and *hit says whether it came from the in-memory cache.
    std::shared_ptr<const Decision> select_cached(const ConvProblem& p, const FlagValues& f, const ConvTensors* t,
                                                  const WorkspaceSource* ws, bool* hit);
    Decision decide(const ConvProblem& p, const FlagValues& f, const ConvTensors* t, const WorkspaceSource* ws) const;
    DeviceBuffer workspace(std::size_t bytes, const WorkspaceSource* ws) const;
    // Runs a on t with a workspace (from `ws` when given, else the backend's; within the memory
    // budget), timed on the device's clock when `timed_ms` is given or an observer is set (which is
    // told before and after: SelectorObserver::executing, executed).
    Status execute(const Algorithm& a, const ConvProblem& p, const ConvTensors& t, double* timed_ms,
                   const WorkspaceSource* ws = nullptr) const;
    // Stores a searched decision in the tuning database (when the policy persists and its
    // measurement allows it).
    void persist(const Environment& env, const std::string& key, const Decision& d, const FlagValues& f);
    // The state policy p keeps in this selector (SelectionPolicy::make_state), nullptr when none.
    PolicyState* state_of(const SelectionPolicy& p) const;

    // The policies' walks use the selector's device, history, observer and, in-band, its
    // execution, memory and database (core/src/search.hpp).
    friend class SearchContext;
    friend class InBandCall;

    const Backend& backend_;
    TuningCache& cache_;
    TuningDatabase* db_;
    SelectorObserver* observer_ = nullptr;
    std::vector<std::pair<const SelectionPolicy*, std::unique_ptr<PolicyState>>> states_;  // each registered policy's
    ExplorationBudget exploration_;  // what the in-band shapes' exploring has cost (measurement.hpp)
    mutable SearchHistory history_;  // what the searches have learnt so far (search_history.hpp)
};

}  // namespace convtune
