// Measurement: how a search times its candidates and picks the winner, as data (MeasureStrategy)
// and one engine that follows it (Measurement). The selector decides which candidates a search
// reaches and enters them in its order; the measurement times them and chooses. Statistics come
// from stats.hpp. Two strategies, after cudnn-frontend's sample-once / till-stable:
//
//   sample-once  (the pytorch policies, PyTorch's own): per candidate one warm-up and one timed
//                call, taken as it is entered; the fastest call wins, however lucky.
//   robust       (the convtune policies): every candidate's warm-up as it is entered, then
//                interleaved rounds, one timed call of each remaining candidate per round, so that
//                a change in the machine's load falls on all of them alike. Racing: a warm
//                candidate (Trial::warm: its kernel has run in this process, so its first call is
//                no cold start) whose first call is over drop_ratio x the fastest call of any
//                candidate so far stops after that one call; before round min_samples, a
//                candidate whose calls (warm-up included) were all over early_drop x the leader's
//                slowest call (warm-up included: one lucky call of the leader drops nothing; from
//                round 2 on, once the leader has two samples, its slowest sample, so that its cold
//                warm-up no longer shields a candidate 1.5x slower than every sample) stops
//                (after round 1 only when its fastest call is at least early_drop_min_ms, else
//                from round 2, so that one jittery sample of a short call drops nothing);
//                from round min_samples on, one whose median is
//                above the leader's beyond the noise (stats.hpp: slower_beyond_noise, z and
//                lead_floor) is dropped. Rounds stop when one candidate is left, when the ones
//                left are within lead_floor of each other with stable medians (moved by at most
//                stable_rel over the last round), at max_samples, or, after the first round, once
//                budget_ms is spent. The fastest median of the candidates left wins. With
//                keep_heuristic_within_noise (off in robust(), see docs/autotuning.md) it wins
//                only when its lead over the heuristic's pick (the first candidate entered)
//                exceeds the noise, otherwise the heuristic's pick stays. A decision whose
//                winner's robust spread (relative_noise, over at least 3 samples) is above
//                persist_max_noise is not stored in a tuning database.
//
// In-band (the incremental policy): the same robust rule, but the caller makes the calls, which
// are the shape's real executions. It adds candidates without calling them (add), asks which
// call is due (due: a candidate's first call is its warm-up, then the rounds as above) and
// reports each call's time (record). finish() is the same rounds with the calls made here.
//
// Pacing (in-band, with an ExplorationBudget shared by every shape of a selector): a call that
// explores, one of a candidate other than the shape's provisional pick (the first candidate whose
// warm-up ran, the heuristic's pick unless it failed), is due only while the budget affords it:
// the extra time exploration has cost the selector so far (each exploring call's time minus the
// provisional pick's median at that moment), plus the call's own estimated extra, stays within
// explore_fraction of the time the selector's calls would have taken without exploring. A
// candidate's first call (cold: plan build, kernel load) is assumed to take as long as the
// largest first call the selector has seen (any candidate's, the very first call of the process
// included, which carries the backend's start-up), any other call its median (its warm-up before
// it has one); its extra is that less the pick's median (its first call before it has one).
// When it is not affordable, the call runs the candidate with the fastest median so far among
// those already called (the provisional pick until another is faster), timed: one more sample of
// it, outside the rounds. So exploration is spread over the calls, a first iteration full of new
// shapes runs mostly their picks, and the shape is pinned later. The bound can be passed by one
// call's misestimate (a first call costlier than any before it).
#pragma once

#include <cstddef>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "convtune/algorithm.hpp"
#include "convtune/flags.hpp"

namespace convtune {

struct MeasureStrategy {
    const char* name = "sample-once";
    // Timed calls per candidate after its warm-up: at least min_samples (unless the candidate is
    // dropped or the budget is spent), at most max_samples.
    int min_samples = 1, max_samples = 1;
    // Rounds across the candidates (robust) instead of each candidate's samples as it is entered.
    bool interleaved = false;
    // Interleaved only: see the file comment.
    double stable_rel = 0;
    double budget_ms = std::numeric_limits<double>::infinity();
    double drop_ratio = 0;     // a warm candidate's first call over this x the fastest call: it stops (0: never)
    double early_drop = 0;     // before min_samples rounds: every call over this x the leader's slowest (0: never)
    // ... but after round 1 only when the candidate's fastest call is at least this long: a short
    // call's one sample is jitter-bound (measured on the H200: a 40 us kernel's sample at 107 us).
    double early_drop_min_ms = 0;
    bool racing = false;       // drop candidates slower than the leader beyond the noise
    double z = 3;              // standard errors a difference must exceed to count
    double lead_floor = 0;     // ... and this fraction of the faster median
    bool keep_heuristic_within_noise = false;
    // A winner whose kernel is compiled at first use (Trial::compiles) gives way to the fastest
    // candidate that is not, when it leads that one by no more than the noise (z, lead_floor): a
    // job that starts with an empty kernel cache then pays no compile for a speed-up that is not
    // there. convtune's strategies set it; PyTorch's sample-once does not.
    bool prefer_precompiled = false;
    double persist_max_noise = std::numeric_limits<double>::infinity();
    // In-band with an ExplorationBudget: the fraction of the selector's convolution time that
    // exploring calls may cost on top of it (see the file comment); infinity: unpaced.
    double explore_fraction = std::numeric_limits<double>::infinity();

    // PyTorch's: one warm-up, one timed call, the fastest wins.
    static MeasureStrategy sample_once();
    // convtune's, from the flags' knobs (min_samples, max_samples, stable_rel, search_budget_ms).
    static MeasureStrategy robust(const FlagValues& f);
    // The incremental policy's: robust on the shape's real calls, with
    // keep_heuristic_within_noise (a pinned shape keeps the heuristic's pick unless the fastest
    // median leads it beyond the noise) and explore_fraction kInBandExploreFraction.
    static MeasureStrategy in_band(const FlagValues& f);
};

// The in-band policy's exploration budget: exploring may cost at most 20% on top of the
// convolution time the selector's calls would have taken without it.
inline constexpr double kInBandExploreFraction = 0.2;

// What exploring has cost a selector so far, shared by its in-band shapes (thread-safe).
class ExplorationBudget {
public:
    // Whether a call whose extra over the provisional pick is estimated at extra_ms keeps the
    // extra within `fraction` of the base.
    bool affords(double fraction, double extra_ms) const;
    // A call that did not explore (a provisional pick's, a pinned shape's): its time.
    void ran(double ms);
    // A call that explored: its time and what the provisional pick would have taken instead (0
    // for a call that failed: it computed nothing).
    void explored(double ms, double pick_ms);
    // A candidate's first call (any candidate's, a provisional pick's included) took ms.
    void first_call(double ms);
    // What a candidate's next first call is assumed to cost: the largest first call seen so far.
    double largest_first_call_ms() const;

private:
    mutable std::mutex mutex_;
    double base_ = 0, extra_ = 0, largest_first_call_ = 0;
};

// One timed call of a candidate: runs it, sets the status, returns its time in ms on the
// device's clock.
using TimedCall = std::function<double(Status&)>;

// One candidate as measured.
struct Trial {
    std::size_t order = 0;  // its position in heuristic order: ties go to the earlier one
    TimedCall call;
    double first_ms = 0;             // the warm-up
    std::vector<double> samples_ms;  // the timed calls after it
    Status status;                   // not ok: it failed (samples cleared)
    bool racing = true;              // still sampled in the next round
    std::string reason;              // why its sampling stopped early, when it did
    double median_ms = 0, spread = 0;
    bool warmed_up = false;          // its warm-up was made
    bool compiles = false;           // its kernel is compiled at first use (Algorithm::compiles_at_first_use)
    bool warm = false;               // its kernel has run in this process (SearchHistory::warm)
};

// What a measurement decided.
struct Choice {
    int trial = -1;      // the winning trial, -1 when none ran
    std::string reason;  // why, when the rule was not "the fastest median"
};

// Empty when a decision whose winner took these samples may be stored in a tuning database under
// strategy s, else why not.
std::string persist_refusal(const MeasureStrategy& s, const std::vector<double>& winner_samples);

class Measurement {
public:
    // `budget`, when given (in-band), paces the calls due() asks for (see the file comment).
    explicit Measurement(MeasureStrategy s, ExplorationBudget* budget = nullptr) : s_(std::move(s)), budget_(budget) {}
    const MeasureStrategy& strategy() const { return s_; }

    // Adds a candidate and runs its warm-up (and, unless interleaved, its samples). Returns its
    // trial; the candidate ran when trial.status is ok.
    const Trial& enter(std::size_t order, TimedCall call, bool compiles = false, bool warm = false);
    // Interleaved: the rounds over the entered candidates (nothing otherwise).
    void finish();

    // In-band (interleaved strategies only): adds a candidate without calling it; returns its
    // trial's index.
    std::size_t add(std::size_t order, bool compiles = false, bool warm = false);
    // The trial whose call is due next: the first added one without its warm-up, else the
    // rounds' next sample; -1 once the rounds have ended (the measurement has decided). Paced
    // (a budget that does not afford that call): the fastest trial called so far instead.
    int due();
    // Records the due call of trial i (its warm-up, its sample or a paced sample): its time and
    // status.
    void record(std::size_t i, double ms, const Status& st);
    // A trial was added and its warm-up is not made yet.
    bool awaiting_warm_up() const;
    // Every call made so far, warm-ups and paced calls included.
    int calls() const { return calls_; }
    // The calls that ran the fastest trial instead of the one due, for want of budget.
    int paced_calls() const { return paced_calls_; }
    // The trials, in the order they were entered.
    const std::vector<Trial>& trials() const { return trials_; }
    // Device time spent so far by the calls due, warm-ups included (paced calls are not).
    double spent_ms() const { return spent_; }
    // The decision (after finish()).
    Choice choose() const;

private:
    void invoke(std::size_t i);  // calls trial i through its TimedCall and records it
    int natural_due();           // due() without pacing
    int provisional() const;     // the provisional pick's trial, -1 before one ran
    int fastest_called() const;  // the trial with the fastest median (warm-up before samples) so far
    double estimate_ms(std::size_t i) const;
    double fastest_call_ms(std::size_t except) const;  // the fastest call of the other trials so far (0: none)
    void account(std::size_t i, double ms, const Status& st);  // the call's cost to the budget
    void drop(Trial& t, std::string why);
    void begin_rounds();
    void end_round();
    void settle();
    MeasureStrategy s_;
    ExplorationBudget* budget_ = nullptr;
    std::vector<Trial> trials_;
    double spent_ = 0;
    int calls_ = 0, paced_calls_ = 0;
    int paced_ = -1;  // the trial due() returned for want of budget, until its call is recorded
    // The rounds (interleaved): started, ended, the current round (from 1), the trials racing
    // in it, the next of them to call, and each trial's median after the previous round.
    bool rounds_started_ = false, rounds_ended_ = false;
    int round_ = 0;
    std::vector<std::size_t> left_;
    std::size_t next_ = 0;
    std::vector<double> previous_;
};

}  // namespace convtune
