// Decision: what the selector chose for one (problem, backend, flags) and why — the data behind
// `convtune tune`'s explain table and the tuning cache's value.
#pragma once

#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "convtune/algorithm.hpp"

namespace convtune {

// Where a choice came from.
enum class Source {
    memory,     // the in-memory cache
    database,   // the persistent tuning database
    heuristic,  // the backend's ranking, nothing timed
    search,     // timed candidates
    fixed,      // a fixed default (PyTorch v7: deterministic && !benchmark)
    fallback,   // enabled=false: the native fallback algorithm
};
std::string_view to_string(Source s);

struct Candidate {
    enum class State {
        timed,         // ran and was timed
        chosen_untimed,// chosen without timing (heuristic / fixed / fallback)
        not_timed,     // eligible, but not timed (benchmark off, limit reached)
        filtered,      // removed by a flag filter (reason says which)
        unsupported,   // supports() said no (reason says why)
        over_workspace,// workspace above the limit
        out_of_memory, // allocating its workspace or running failed for memory
        failed,        // run() failed
        not_checked,   // not reached: the decision ended before it, so its support and the
                       // filters were never decided (a decision checks only what it needs)
    };
    std::string id;
    Notes notes;
    State state = State::not_timed;
    std::string reason;
    // Bytes of workspace; nullopt when not asked: with an unlimited workspace_limit the selector
    // asks only candidates it times or chooses (asking can build a plan, which compiles a kernel
    // for cuDNN's runtime-compiled engines).
    std::optional<std::size_t> workspace;
    double first_ms = 0;             // the warm-up run before the samples (0 when not timed)
    std::vector<double> samples_ms;  // timed runs after the warm-up(s)
    double median_ms = 0;
    double spread = 0;  // (max - min) / median of the samples
    bool suggested = true;  // the backend's heuristics suggest it (Ranking::suggested)
    int listings = 1;       // how many times the lists its policy draws from hold it (Ranking::in_lists)
};
std::string_view to_string(Candidate::State s);

struct Decision {
    std::string key;          // the cache key
    std::string algorithm;    // chosen id (empty when nothing can run)
    Source source = Source::heuristic;
    double search_ms = 0;     // wall time spent timing candidates for this decision
    double median_ms = 0;     // the winner's median (0 when not timed)
    bool provisional = false; // adaptive policy: heuristic pick until the shape recurs enough
    std::vector<Candidate> candidates;
};

// The two JSON forms of a Decision, one list of fields:
// - report: the document `convtune tune --json` prints per problem and the Python module returns:
//   {algorithm, source, search_ms, median_ms, key, candidates: [{id, state, reason, notes,
//   workspace (null when not asked), first_ms, samples_ms, median_ms, spread, suggested}]}, the
//   source, states and notes by name;
// - exact: lossless, between processes of one build (the ranks of distributed/): the same fields
//   with enums as their numbers and notes as their bits, and `provisional`.
enum class DecisionForm { report, exact };
nlohmann::json to_json(const Decision& d, DecisionForm form = DecisionForm::report);
// Reads the exact form back (throws nlohmann::json::exception when a field is missing or of the
// wrong type).
Decision decision_from_json(const nlohmann::json& j);

}  // namespace convtune
