// Measurement: how a search times its candidates and picks the winner, as data (MeasureStrategy)
// and one engine that follows it (Measurement). The selector decides which candidates are
// reached; the measurement times them and chooses. Statistics come from stats.hpp.
#pragma once

#include <cstddef>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "convtune/algorithm.hpp"
#include "convtune/flags.hpp"

namespace convtune {

struct MeasureStrategy {
    const char* name = "sample-once";
    // Timed calls per candidate after its warm-up: at least min_samples (unless the candidate is
    // dropped), at most max_samples.
    int min_samples = 1, max_samples = 1;
    // A candidate's samples stop once its median moved by at most stable_rel (relative) over the
    // last sample, after min_samples (0: only max_samples stops them).
    double stable_rel = 0;
    // Time on the device's clock (warm-ups included) after which no candidate takes more than
    // one sample.
    double budget_ms = std::numeric_limits<double>::infinity();
    // A candidate whose median exceeds drop_ratio x the best median so far stops sampling
    // (0: never).
    double drop_ratio = 0;

    // PyTorch's: one warm-up, one timed call, the fastest wins.
    static MeasureStrategy sample_once();
    // convtune's, from the flags' knobs (min_samples, max_samples, stable_rel, search_budget_ms).
    static MeasureStrategy robust(const FlagValues& f);
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
    std::string reason;              // why its sampling stopped early, when it did
    double median_ms = 0, spread = 0;
};

class Measurement {
public:
    explicit Measurement(MeasureStrategy s) : s_(std::move(s)) {}
    const MeasureStrategy& strategy() const { return s_; }

    // Adds a candidate and measures it (its warm-up and its samples). Returns its trial; the
    // candidate ran when trial.status is ok.
    const Trial& enter(std::size_t order, TimedCall call);
    // The trials, in the order they were entered.
    const std::vector<Trial>& trials() const { return trials_; }
    // Device time spent so far, warm-ups included.
    double spent_ms() const { return spent_; }
    // The index of the winning trial, or -1 when none ran.
    int choose() const;

private:
    double call(Trial& t);
    MeasureStrategy s_;
    std::vector<Trial> trials_;
    double spent_ = 0, best_ = 0;
};

}  // namespace convtune
