#include "convtune/measurement.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/core.h>
#include <stdexcept>

#include "convtune/stats.hpp"

namespace convtune {

MeasureStrategy MeasureStrategy::sample_once() { return {}; }

std::string persist_refusal(const MeasureStrategy& s, const std::vector<double>& winner_samples) {
    const double noise = relative_noise(winner_samples);
    // A robust spread needs three samples: with two, the MAD is half their range.
    if (winner_samples.size() < 3 || !(noise > s.persist_max_noise)) return {};
    return fmt::format("not stored in the tuning database: its spread (1.4826 MAD / median) {:.0f}% is above {:.0f}%", 100 * noise,
                       100 * s.persist_max_noise);
}

MeasureStrategy MeasureStrategy::robust(const FlagValues& f) {
    MeasureStrategy s;
    s.name = "robust";
    s.min_samples = f.min_samples;
    s.max_samples = f.max_samples;
    s.interleaved = true;
    s.stable_rel = f.stable_rel;
    s.budget_ms = f.search_budget_ms;
    s.drop_ratio = 3;
    s.racing = true;
    s.z = 3;
    s.lead_floor = f.stable_rel;
    // Off: the selector's contract that a search never returns a candidate its own timing says
    // is slower (tests/test_policies_cpu.cpp) comes first; see docs/autotuning.md.
    s.keep_heuristic_within_noise = false;
    s.prefer_precompiled = true;
    s.persist_max_noise = 0.5;
    return s;
}

MeasureStrategy MeasureStrategy::in_band(const FlagValues& f) {
    MeasureStrategy s = robust(f);
    s.name = "in-band";
    // The calls are the shape's executions: nothing forces a faster pick, so the heuristic's
    // stays unless the measurement clearly beats it.
    s.keep_heuristic_within_noise = true;
    return s;
}

void Measurement::invoke(std::size_t i) {
    Status st;
    const double ms = trials_[i].call(st);
    record(i, ms, st);
}

void Measurement::drop(Trial& t, std::string why) {
    t.racing = false;
    t.reason = std::move(why);
}

const Trial& Measurement::enter(std::size_t order, TimedCall fn, bool compiles) {
    const std::size_t i = add(order, compiles);
    Trial& t = trials_[i];
    t.call = std::move(fn);
    invoke(i);  // warm-up
    if (t.status.ok() && !s_.interleaved)
        for (int k = 0; k < s_.max_samples && t.status.ok(); ++k) invoke(i);
    if (!t.status.ok()) {
        t.racing = false;
        t.samples_ms.clear();
        return t;
    }
    if (!s_.interleaved) {
        t.median_ms = median(t.samples_ms);
        t.spread = relative_spread(t.samples_ms);
    }
    return t;
}

std::size_t Measurement::add(std::size_t order, bool compiles) {
    if (rounds_started_) throw std::logic_error("Measurement::add after the rounds began");
    Trial& t = trials_.emplace_back();
    t.order = order;
    t.compiles = compiles;
    return trials_.size() - 1;
}

int Measurement::due() {
    for (std::size_t i = 0; i < trials_.size(); ++i)
        if (!trials_[i].warmed_up) return static_cast<int>(i);
    if (!s_.interleaved) return -1;
    if (!rounds_started_) begin_rounds();
    return rounds_ended_ ? -1 : static_cast<int>(left_[next_]);
}

void Measurement::record(std::size_t i, double ms, const Status& st) {
    Trial& t = trials_[i];
    spent_ += ms;
    ++calls_;
    t.status = st;
    if (!t.warmed_up) {
        t.warmed_up = true;
        t.first_ms = ms;
        if (!st.ok()) t.racing = false;
        return;
    }
    t.samples_ms.push_back(ms);
    if (!st.ok()) t.racing = false;
    if (rounds_started_ && !rounds_ended_ && ++next_ == left_.size()) end_round();
}

void Measurement::finish() {
    if (!s_.interleaved) return;
    for (int i = due(); i >= 0; i = due()) invoke(static_cast<std::size_t>(i));
}

void Measurement::begin_rounds() {
    rounds_started_ = true;
    round_ = 1;
    next_ = 0;
    previous_.assign(trials_.size(), -1);
    left_.clear();
    for (std::size_t i = 0; i < trials_.size(); ++i)
        if (trials_[i].status.ok()) left_.push_back(i);
    if (left_.empty()) settle();
}

// After every trial left has taken its sample of the round: racing, then whether the rounds stop.
void Measurement::end_round() {
    std::erase_if(left_, [&](std::size_t i) { return !trials_[i].racing; });
    if (left_.empty()) return settle();
    for (std::size_t i : left_) trials_[i].median_ms = median(trials_[i].samples_ms);
    const std::size_t leader = *std::min_element(left_.begin(), left_.end(), [&](std::size_t a, std::size_t b) {
        const Trial &x = trials_[a], &y = trials_[b];
        return x.median_ms < y.median_ms || (x.median_ms == y.median_ms && x.order < y.order);
    });
    const Trial& lead = trials_[leader];
    auto slowest = [](const Trial& t) { return std::max(t.first_ms, *std::max_element(t.samples_ms.begin(), t.samples_ms.end())); };
    auto fastest = [](const Trial& t) { return std::min(t.first_ms, *std::min_element(t.samples_ms.begin(), t.samples_ms.end())); };
    for (std::size_t i : left_) {
        if (i == leader) continue;
        Trial& t = trials_[i];
        if (round_ == 1 && s_.drop_ratio > 0 && fastest(t) > s_.drop_ratio * slowest(lead))
            drop(t, fmt::format("stopped early: every call over {:g}x the leader's slowest", s_.drop_ratio));
        else if (s_.racing && round_ >= s_.min_samples && slower_beyond_noise(lead.samples_ms, t.samples_ms, s_.z, s_.lead_floor))
            drop(t, fmt::format("dropped after {} samples: slower than the leader beyond the noise", t.samples_ms.size()));
    }
    std::erase_if(left_, [&](std::size_t i) { return !trials_[i].racing; });
    if (round_ >= s_.min_samples) {
        if (left_.size() == 1) return settle();
        // The ones left are tied: within lead_floor of the leader, their medians stable.
        bool tied = true;
        for (std::size_t i : left_) {
            const Trial& t = trials_[i];
            tied = tied && t.median_ms <= (1 + s_.lead_floor) * lead.median_ms && previous_[i] > 0 &&
                   std::abs(t.median_ms - previous_[i]) <= s_.stable_rel * t.median_ms;
            previous_[i] = t.median_ms;
        }
        if (tied) return settle();
    }
    ++round_;
    next_ = 0;
    if (round_ > s_.max_samples) return settle();
    if (spent_ > s_.budget_ms) {
        for (std::size_t i : left_) trials_[i].reason = "search budget spent";
        return settle();
    }
}

// The rounds have ended: every trial's median and spread from its samples.
void Measurement::settle() {
    rounds_ended_ = true;
    for (Trial& t : trials_) {
        if (!t.status.ok()) {
            t.samples_ms.clear();
            continue;
        }
        t.median_ms = median(t.samples_ms);
        t.spread = relative_spread(t.samples_ms);
    }
}

Choice Measurement::choose() const {
    Choice c;
    auto better = [](const Trial& a, const Trial& b) { return a.median_ms < b.median_ms || (a.median_ms == b.median_ms && a.order < b.order); };
    for (std::size_t i = 0; i < trials_.size(); ++i) {
        const Trial& t = trials_[i];
        if (!t.status.ok() || (s_.interleaved && !t.racing)) continue;
        if (c.trial < 0 || better(t, trials_[static_cast<std::size_t>(c.trial)])) c.trial = static_cast<int>(i);
    }
    if (c.trial < 0) return c;
    // The heuristic's pick: the first candidate entered (the selector enters it first).
    const Trial& h = trials_.front();
    if (s_.keep_heuristic_within_noise && c.trial != 0 && h.status.ok() && h.racing &&
        !slower_beyond_noise(trials_[static_cast<std::size_t>(c.trial)].samples_ms, h.samples_ms, s_.z, s_.lead_floor)) {
        c.reason = fmt::format("the heuristic's pick: the fastest median ({:.4g} ms) leads by no more than the noise",
                               trials_[static_cast<std::size_t>(c.trial)].median_ms);
        c.trial = 0;
    }
    const Trial& w = trials_[static_cast<std::size_t>(c.trial)];
    if (s_.prefer_precompiled && w.compiles) {
        int best = -1;
        for (std::size_t i = 0; i < trials_.size(); ++i) {
            const Trial& t = trials_[i];
            if (t.compiles || !t.status.ok() || (s_.interleaved && !t.racing)) continue;
            if (slower_beyond_noise(w.samples_ms, t.samples_ms, s_.z, s_.lead_floor)) continue;
            if (best < 0 || better(t, trials_[static_cast<std::size_t>(best)])) best = static_cast<int>(i);
        }
        if (best >= 0) {
            c.reason = fmt::format("not compiled at first use: the fastest median ({:.4g} ms, whose kernel is compiled at first use) "
                                   "leads this one by no more than the noise",
                                   w.median_ms);
            c.trial = best;
        }
    }
    return c;
}

}  // namespace convtune
