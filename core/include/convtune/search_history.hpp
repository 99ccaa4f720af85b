// SearchHistory: what a selector's searches have learnt so far in this process, shared by all its
// shapes (thread-safe), so that each search costs less than the one before:
//
//   warm       the algorithms that have run here: their kernels are loaded, so a first call of
//              one on a new shape is no cold start, and the measurement may judge a candidate on
//              it (Trial::warm, MeasureStrategy::drop_ratio: one call instead of a warm-up and a
//              sample for a candidate that is clearly slower)
//   demotion   how each algorithm fared against the winners of earlier searches of the same kind
//              of problem (data type, layout, TF32 allowed): one that was over Demotion::ratio x
//              the winner in `after` searches, and never within Demotion::competitive x of it, is
//              no longer timed (SelectionPolicy::demotion). On cuDNN this is what keeps the
//              generic fallback engine (eng0, 5-100x slower than the winner on every ResNet-50
//              layer, and a third of a full search's time) out of all but the first searches.
// Nothing here is persisted: a warm tuning database skips the searches altogether.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>

namespace convtune {

class Algorithm;

// A policy's rule for demoting candidates (ratio 0: never).
struct Demotion {
    double ratio = 0;          // a loss: slower than the winner by at least this factor
    int after = 0;             // losses before the algorithm is demoted
    double competitive = 1.5;  // within this factor of a winner once: never demoted for this kind
};

class SearchHistory {
public:
    // Algorithm a ran (successfully) in this process: told by searches, rotations and a decision's
    // first run, not by the calls the memory cache answers.
    void ran(const Algorithm& a);
    bool warm(const Algorithm& a) const;

    // After a decision on a problem of `kind`: algorithm `id` took `ms` (its median, or its one
    // call when it stopped after it) where the winner took `winner_ms`.
    void judged(std::string_view id, std::string_view kind, double ms, double winner_ms, const Demotion& d);
    // Why `id` is no longer timed on problems of `kind` under d; empty when it still is.
    std::string demoted(std::string_view id, std::string_view kind, const Demotion& d) const;

private:
    struct Standing {
        int losses = 0;
        double worst = 0;  // the largest ratio to the winner seen
        bool competitive = false;
    };
    mutable std::mutex mutex_;
    std::unordered_set<const Algorithm*> warm_;
    std::map<std::string, Standing, std::less<>> standing_;  // "kind|id"
};

}  // namespace convtune
