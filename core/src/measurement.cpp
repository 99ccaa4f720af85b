#include "convtune/measurement.hpp"

#include <cmath>

#include "convtune/stats.hpp"

namespace convtune {

MeasureStrategy MeasureStrategy::sample_once() { return {}; }

MeasureStrategy MeasureStrategy::robust(const FlagValues& f) {
    MeasureStrategy s;
    s.name = "till-stable";
    s.min_samples = f.min_samples;
    s.max_samples = f.max_samples;
    s.stable_rel = f.stable_rel;
    s.budget_ms = f.search_budget_ms;
    s.drop_ratio = 3;
    return s;
}

double Measurement::call(Trial& t) {
    const double ms = t.call(t.status);
    spent_ += ms;
    return ms;
}

const Trial& Measurement::enter(std::size_t order, TimedCall fn) {
    Trial& t = trials_.emplace_back();
    t.order = order;
    t.call = std::move(fn);
    t.first_ms = call(t);  // warm-up
    if (!t.status.ok()) return t;
    const int max_samples = spent_ > s_.budget_ms ? 1 : s_.max_samples;
    double prev_median = -1;
    for (int k = 0; k < max_samples; ++k) {
        t.samples_ms.push_back(call(t));
        if (!t.status.ok()) break;
        const double m = median(t.samples_ms);
        // A candidate drop_ratio x slower than the best so far cannot win: stop paying for it.
        if (s_.drop_ratio > 0 && best_ > 0 && m > s_.drop_ratio * best_) {
            t.reason = "stopped early: over " + std::to_string(static_cast<int>(s_.drop_ratio)) + "x the best median";
            break;
        }
        const int n = static_cast<int>(t.samples_ms.size());
        if (n >= s_.min_samples && prev_median > 0 && std::abs(m - prev_median) <= s_.stable_rel * m) break;
        prev_median = m;
        if (spent_ > s_.budget_ms) {
            t.reason = "search budget spent";
            break;
        }
    }
    if (!t.status.ok()) {
        t.samples_ms.clear();
        return t;
    }
    t.median_ms = median(t.samples_ms);
    t.spread = relative_spread(t.samples_ms);
    if (best_ == 0 || t.median_ms < best_) best_ = t.median_ms;
    return t;
}

int Measurement::choose() const {
    int win = -1;
    for (std::size_t i = 0; i < trials_.size(); ++i) {
        const Trial& t = trials_[i];
        if (!t.status.ok()) continue;
        const Trial* w = win < 0 ? nullptr : &trials_[static_cast<std::size_t>(win)];
        if (!w || t.median_ms < w->median_ms || (t.median_ms == w->median_ms && t.order < w->order)) win = static_cast<int>(i);
    }
    return win;
}

}  // namespace convtune
