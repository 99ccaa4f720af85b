// What a policy's walk works with (SelectionPolicy::pick, search, run_in_band), inside core: a
// decision's candidates built as far as it needs them (CandidateList), the device side of a timed
// search (SearchTimer), the selector's tools for an in-band call (InBandCall), and the small rules
// every walk shares (the flag filters on one candidate, the explore slots, what a measurement
// found put onto the candidates, what the search history learns from a decision).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "convtune/device_tensors.hpp"
#include "convtune/error.hpp"
#include "convtune/policy.hpp"
#include "convtune/selector.hpp"

namespace convtune {

// The candidate for algorithm a: its support decided and the flags' filters applied. The
// workspace is asked here only when a limit needs it: asking can build a plan (cuDNN compiles a
// kernel for a runtime-compiled engine), so otherwise the candidates that are timed or chosen
// ask it when they are (workspace_of).
Candidate evaluate(const Algorithm& a, const ConvProblem& p, const FlagValues& f);

// The candidate's workspace, asked of its algorithm the first time it is needed.
std::size_t workspace_of(const Backend& b, const ConvProblem& p, Candidate& c);

// A decision's candidate list as reported: the candidates that were eligible first (in heuristic
// order), then the ones a filter, the workspace limit or supports() removed, then every other
// algorithm of the backend: unsupported (with supports()' reason and its notes) when the ranking
// was walked to its end (a ranking lists every supporting algorithm), else not checked, with no
// notes: asking them can cost a backend work the decision never needed (cuDNN probes an engine's
// notes on small graphs the first time they are asked: about 4400 engine finalisations, some
// 100 ms, at a process's first decision from the tuning database, measured on the H200).
std::vector<Candidate> complete(const Backend& b, const ConvProblem& p, std::vector<Candidate> cands,
                                bool ranking_ended);

// The message of the Error thrown when no candidate can run p: each candidate and why not.
std::string no_candidate_message(const Backend& b, const ConvProblem& p, const std::vector<Candidate>& cands);

// The explore-slot rule of a search and of an in-band rotation alike: of `limit` candidates,
// `explore` are kept for ones the heuristics do not suggest, so a suggested candidate met once
// `suggested` of them are in waits for the slots the walk leaves.
bool waits_for_explore_slot(const Candidate& c, int suggested, int limit, int explore);
// Whether `suggested` suggested candidates fill the limit's slots that the `explore` kept ones
// leave (waits_for_explore_slot's rule, for a candidate not yet decided).
bool suggested_slots_full(int suggested, int limit, int explore);

void fail_candidate(Candidate& c, const Status& st);

// What measurement m (after its rounds) found, onto the candidates its trials measured (a
// trial's order is its candidate's list position); returns the winner's id, empty when none.
std::string take_measurement(const Measurement& m, std::vector<Candidate>& cands, const SelectionPolicy& policy);

// The kind of problem a SearchHistory judges candidates on: what changes which kernels compete.
std::string history_kind(const ConvProblem& p, const FlagValues& f);

// Tells the history how each timed candidate of a decision fared against its winner.
void judge(SearchHistory& h, const std::vector<Candidate>& cands, const std::string& winner, const std::string& kind,
           const Demotion& d);

// The candidates of one decision, built only as far as the decision needs them: each algorithm
// the backend's ranking yields has its support decided and the filters applied when reached.
// The convtune policies never run a naive reference implementation (Note::reference) when any
// other candidate is eligible (timing one costs seconds on a real layer and it never wins), so
// an eligible reference candidate is held back and enters the list, filtered or eligible, when
// the ranking ends (SelectionPolicy::holds_back_reference). The PyTorch policies keep them, as
// PyTorch times whatever the library offers.
class CandidateList {
public:
    CandidateList(const Backend& b, const ConvProblem& p, const FlagValues& f);

    std::vector<Candidate>& items() { return items_; }
    int eligible() const { return eligible_; }
    bool explores() const { return ranking_->explores(); }

    // Appends the next ranked algorithm as a candidate (or, at the ranking's end, the held-back
    // reference candidates); false when there is nothing left to append.
    bool extend() { return extend(true); }
    // Extends until `n` candidates are eligible (n < 0: all) or the ranking has ended.
    void reach(int n);
    // Walks the ranking to its end, deciding support for every algorithm the lists the policy
    // draws from hold (SelectionPolicy::draws_from), in ranking order; the others are listed
    // undecided (not_checked, their support not asked). Each candidate's listings are those the
    // ended ranking reports.
    void decide_drawn();
    // From now on, a candidate the heuristics do not suggest whose id `skip` gives a reason for
    // (a demotion, say) is appended not checked with that reason, its support not asked (on
    // cuDNN, asking builds the engine and its plan). An empty function ends the skipping.
    void skip_unsuggested(std::function<std::string(std::string_view id)> skip) { skip_ = std::move(skip); }
    // From now on, a candidate the heuristics suggest is appended undecided (not_checked, its
    // support not asked: on cuDNN no engine or plan is built) while `defer` returns true: the
    // convtune walk's suggested candidates that wait for the slots the explore slots leave, most
    // of which are never timed. decide(i) decides one when it gets a slot. An empty function
    // ends the deferring.
    void defer_suggested(std::function<bool()> defer) { defer_ = std::move(defer); }
    // Whether items()[i] is listed undecided.
    bool undecided(std::size_t i) const { return undecided_.count(i) > 0; }
    // Decides the support of items()[i] (and applies the filters) when it is listed undecided.
    void decide(std::size_t i);
    // The candidates as reported (complete()), the undecided and unreached ones explained where
    // that costs nothing.
    std::vector<Candidate> finish() &&;

private:
    // extend(); unless `decide_all`, an algorithm the lists the policy draws from do not hold is
    // appended undecided.
    bool extend(bool decide_all);
    void skip_reference(Candidate& c) const;

    const Backend& b_;
    const ConvProblem& p_;
    const FlagValues& f_;
    std::unique_ptr<Ranking> ranking_;
    std::span<const ListName> lists_;  // the lists the policy draws from
    bool hold_reference_;
    bool ended_ = false;
    int eligible_ = 0;
    std::vector<Candidate> items_, held_;
    std::map<std::size_t, const Algorithm*> undecided_;  // items_ position -> its algorithm
    std::function<std::string(std::string_view)> skip_;  // skip_unsuggested
    std::function<bool()> defer_;                        // defer_suggested
};

// One fresh decision of the selector's (enabled): its problem, flags, key and candidates, the
// caller's tensors and workspace source when run() asks, and the selector's history and observer.
class SearchContext {
public:
    SearchContext(const Selector& s, const ConvProblem& p, const FlagValues& f, std::string key, const ConvTensors* t,
                  const WorkspaceSource* ws)
        : selector(s), p(p), f(f), key(std::move(key)), tensors(t), workspace_source(ws), list(s.backend(), p, f) {}
    const Backend& backend() const { return selector.backend_; }
    SearchHistory& history() const { return selector.history_; }
    SelectorObserver* observer() const { return selector.observer_; }
    DeviceBuffer workspace(std::size_t bytes) const { return selector.workspace(bytes, workspace_source); }
    // The error that no candidate can run the problem, with the list finished.
    Error no_candidate();
    // The decision that chooses the candidate at list position i untimed (`source`, `reason`),
    // the list finished.
    Decision choose_untimed(std::size_t i, Source source, const std::string& reason);

    const Selector& selector;
    const ConvProblem& p;
    const FlagValues& f;
    const std::string key;
    const ConvTensors* tensors;
    const WorkspaceSource* workspace_source;
    CandidateList list;
};

// The device side of one timed search: the tensors it times on (the caller's, as PyTorch's
// benchmark mode does, or scratch ones with real-looking data, none on a device that needs none;
// their preparation is not search time), one workspace buffer for the whole search, grown when a
// candidate needs more (allocating and freeing one per candidate costs a device synchronisation
// each on a GPU), and the observer told of the search and of each timed call.
class SearchTimer {
public:
    explicit SearchTimer(SearchContext& ctx);
    // Enters list item i into m (its workspace first; on host memory within the budget); true when
    // it ran. `repeats` further warm-up and timed call pairs follow an entry that ran, outside the
    // measurement, as PyTorch times a plan it lists again.
    bool time(std::size_t i, Measurement& m, int repeats = 0);
    // The searched decision: what m found onto the candidates (its rounds first), the history
    // told, the list finished. Throws when no candidate ran.
    Decision finish(Measurement& m);

private:
    SearchContext& ctx_;
    std::optional<DeviceTensors> scratch_;
    ConvTensors t_;
    DeviceBuffer ws_;
    std::chrono::steady_clock::time_point t0_;
};

// A call of a shape under an in-band policy (SelectionPolicy::run_in_band) and the selector's
// tools for it.
class InBandCall {
public:
    InBandCall(Selector& s, const ConvProblem& p, const ConvTensors& t, const FlagValues& f, const std::string& key,
               const WorkspaceSource* ws, PolicyState* state)
        : selector(s), p(p), t(t), f(f), key(key), workspace_source(ws), state(state) {}
    const Backend& backend() const { return selector.backend_; }
    SearchHistory& history() const { return selector.history_; }
    ExplorationBudget& exploration() const { return selector.exploration_; }
    // Runs a on the call's tensors, timed on the device's clock into *ms (an execution: the
    // selector's observer is told, Selector::execute).
    Status execute(const Algorithm& a, double* ms) const { return selector.execute(a, p, t, ms, workspace_source); }
    // Pins the shape: stores the searched decision d in the tuning database (when the policy
    // persists) and in the selector's memory.
    void pin(Decision d) const;

    Selector& selector;
    const ConvProblem& p;
    const ConvTensors& t;
    const FlagValues& f;
    const std::string& key;
    const WorkspaceSource* workspace_source;
    PolicyState* state;  // the policy's own (SelectionPolicy::make_state)
};

}  // namespace convtune
