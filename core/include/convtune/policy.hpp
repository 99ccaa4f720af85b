// SelectionPolicy: one selection policy (FlagValues::policy): its answers and its walks, so that
// the selector only orchestrates (memory cache, tuning database, the policy's decision, falling
// through when a choice fails). Every policy is one type in core/src/policies/<name>.cpp,
// registered by one line of core/src/policies/registry.cpp, which also gives it its user-facing
// name (to_string, parse_policy).
//
// The questions, in the order a selection asks them:
//   key         is `benchmark` part of the cache key (keys_benchmark)
//   when        does this selection search now, or run the heuristic's pick provisionally until the
//               shape has recurred (defers_search, search_due), or never search and let the
//               shape's real calls be the samples (in_band)
//   which       which candidates a decision reaches and in what order: which of the ranking's
//               named lists a search draws from (draws_from), how many it times (search_reach),
//               how many of those are kept for candidates the heuristics do not suggest
//               (explore_slots), whether a naive reference is held back while others are
//               eligible (holds_back_reference), how many benchmark off reaches (heuristic_reach),
//               and whether benchmark off takes the backend's fixed default (uses_fixed_default)
//               and which ones earlier searches demoted (demotion)
//   how         how the reached candidates are timed and the winner chosen (measurement)
//   persisted   whether a searched decision is read from and stored in the tuning database
//               (persists)
// The walks that follow the answers, each overridable: pick (benchmark off: the heuristic's first
// eligible candidate), search (benchmark on: convtune's walk, core/src/policies/convtune.cpp) and,
// for an in-band policy, run_in_band (a shape's own calls). They work with what core/src/search.hpp
// offers: the candidate list, the timer of a search, the selector's tools.
// docs/architecture.md, "How to add a policy", lists the files a new one touches.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "convtune/backend.hpp"
#include "convtune/decision.hpp"
#include "convtune/flags.hpp"
#include "convtune/measurement.hpp"
#include "convtune/search_history.hpp"

namespace convtune {

class SearchContext;  // one decision's candidates and the selector's tools (core/src/search.hpp)
class InBandCall;     // one call of an in-band shape and the selector's tools (core/src/search.hpp)

// What a policy keeps for the life of one selector (an in-band policy: its shapes not yet pinned).
class PolicyState {
public:
    virtual ~PolicyState() = default;
};

class SelectionPolicy {
public:
    virtual ~SelectionPolicy() = default;
    // Its registered name (core/src/policies/registry.cpp).
    std::string_view name() const;

    // The cache key holds `benchmark` (PyTorch's has not: a shape first met with benchmark off
    // keeps its heuristic pick when benchmark is turned on, PyTorch issue 45372).
    virtual bool keys_benchmark() const = 0;

    // Whether a selection under f counts the shape's occurrences and searches only once
    // search_due says so, running the heuristic's pick (a provisional decision) until then.
    virtual bool defers_search(const FlagValues&) const { return false; }
    // For a policy that defers: whether the shape, asked for the `seen`-th time, is searched now.
    // `provisional` is the shape's provisional decision when there is one yet (nullptr before).
    virtual bool search_due(int64_t /*seen*/, const Decision* /*provisional*/, const FlagValues&) const { return true; }
    // In-band tuning: whether, under f, a shape is never searched and its real calls
    // (Selector::run) are the measurement's samples instead. Each call runs the candidate whose
    // call is due (measurement.hpp, "In-band"; the shape's first call runs the heuristic's first
    // eligible candidate), timed as an execution as it runs (Selector::execute), so every call
    // still computes its output; once the measurement has decided, the shape is pinned (and persisted
    // as a searched decision is). The candidates are those a search would reach (search_reach,
    // holds_back_reference, the flag filters). Until then select() answers with the heuristic's
    // pick as a provisional decision.
    virtual bool in_band(const FlagValues&) const { return false; }

    // How many eligible candidates a search times at most (-1: all).
    virtual int search_reach(const FlagValues& f) const { return f.benchmark_limit > 0 ? f.benchmark_limit : -1; }
    // Of a search's reach `limit`, how many are kept for candidates the backend's heuristics do
    // not suggest, when its ranking has such candidates (`explores`).
    virtual int explore_slots(const FlagValues&, int /*limit*/, bool /*explores*/) const { return 0; }
    // An eligible naive reference implementation (Note::reference) is held back while another
    // candidate is eligible.
    virtual bool holds_back_reference() const { return false; }
    // How many eligible candidates a decision with benchmark off reaches (-1: all); it picks the
    // first, the others are counted (the adaptive policy's threshold counts them).
    virtual int heuristic_reach(const FlagValues&) const { return 1; }
    // Benchmark off takes the backend's fixed default (Backend::fixed_default) when eligible
    // (what pytorch_v7.cpp's pick does).
    virtual bool uses_fixed_default(const FlagValues&) const { return false; }
    // The search first decides support (on cuDNN: builds the execution plan) for every
    // candidate it may time, in ranking order, and only then times up to search_reach of the
    // eligible ones, as PyTorch v8 builds a plan for every configuration its heuristics return
    // before timing any (pytorch.cpp's search; the simulator reads it too). false: support is
    // decided for each candidate as the timing reaches it.
    virtual bool decides_support_before_timing() const { return false; }
    // The named candidate lists of the backend's ranking the search draws from (ListName, as
    // cudnn-frontend takes heuristic modes): a candidate they hold n times together
    // (Ranking::in_lists) is timed n times and counts n towards search_reach, one they do not
    // hold is never reached, its support never decided. Default: `all`, every algorithm once,
    // which is what the default search (convtune.cpp) walks; PyTorch v8 draws from `heuristic`
    // and `fallback`, a plan per configuration of heuristics mode A and of the fallback list,
    // duplicates included (pytorch.cpp's search walks them).
    virtual std::span<const ListName> draws_from() const;

    // Which algorithms a search stops timing once earlier searches of this process found them far
    // slower than the winners of the same kind of problem (search_history.hpp; ratio 0: none).
    // The heuristic's pick is timed whatever its history.
    virtual Demotion demotion() const { return {}; }

    // How a search times its candidates and chooses (measurement.hpp).
    virtual MeasureStrategy measurement(const FlagValues& f) const = 0;

    // Searched decisions are read from and stored in the tuning database.
    virtual bool persists() const = 0;

    // The walks. The selector has built ctx.list up to the first eligible candidate (benchmark
    // off: heuristic_reach of them) and checked that there is one.
    // Benchmark off: the decision without timing. Default: the heuristic's first eligible
    // candidate (Source::heuristic).
    virtual Decision pick(SearchContext& ctx) const;
    // Benchmark on: a timed search (Source::search). Default: convtune's walk (convtune.cpp):
    // eligible candidates in heuristic order until search_reach have run, explore_slots of them
    // kept for candidates the heuristics do not suggest, demoted ones passed over.
    virtual Decision search(SearchContext& ctx) const;
    // What the policy keeps per selector (nullptr: nothing); made when the selector is.
    virtual std::unique_ptr<PolicyState> make_state() const { return nullptr; }
    // In-band (in_band): run()'s call of a shape whose decision is still provisional. Returns
    // the call's status when a candidate the policy ran computed the output; nullopt when none
    // did because the shape is pinned (InBandCall::pin), and run() runs the pinned decision.
    virtual std::optional<Status> run_in_band(InBandCall&) const { return std::nullopt; }
};

// Every registered policy, in the registry's order.
std::span<const Policy> all_policies();

// The occurrence on which the adaptive policy searches a shape whose provisional (heuristic)
// decision is `provisional`: flags.adaptive_after when set, else (0, auto) the number of calls a
// search costs: the candidates it times (eligible ones, at most benchmark_limit) x (1 + max_samples).
int64_t adaptive_threshold(const Decision& provisional, const FlagValues& f);

}  // namespace convtune
