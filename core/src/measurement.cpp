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
    return fmt::format("not stored in the tuning database: its spread (1.4826 MAD / median) {:.0f}% is above {:.0f}%",
                       100 * noise, 100 * s.persist_max_noise);
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
    s.early_drop = 1.5;
    s.early_drop_min_ms = 0.25;
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
    s.explore_fraction = kInBandExploreFraction;
    return s;
}

bool ExplorationBudget::affords(double fraction, double extra_ms) const {
    std::lock_guard lock(mutex_);
    return extra_ + extra_ms <= fraction * base_;
}

void ExplorationBudget::ran(double ms) {
    std::lock_guard lock(mutex_);
    base_ += ms;
}

void ExplorationBudget::explored(double ms, double pick_ms) {
    std::lock_guard lock(mutex_);
    base_ += pick_ms;
    extra_ += ms - pick_ms;
}

void ExplorationBudget::first_call(double ms) {
    std::lock_guard lock(mutex_);
    largest_first_call_ = std::max(largest_first_call_, ms);
}

double ExplorationBudget::largest_first_call_ms() const {
    std::lock_guard lock(mutex_);
    return largest_first_call_;
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

const Trial& Measurement::enter(std::size_t order, TimedCall fn, bool compiles, bool warm) {
    const std::size_t i = add(order, compiles, warm);
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

std::size_t Measurement::add(std::size_t order, bool compiles, bool warm) {
    if (rounds_started_) throw std::logic_error("Measurement::add after the rounds began");
    Trial& t = trials_.emplace_back();
    t.order = order;
    t.compiles = compiles;
    t.warm = warm;
    return trials_.size() - 1;
}

int Measurement::natural_due() {
    for (std::size_t i = 0; i < trials_.size(); ++i)
        if (!trials_[i].warmed_up) return static_cast<int>(i);
    if (!s_.interleaved) return -1;
    if (!rounds_started_) begin_rounds();
    // A trial that stopped racing on a paced call takes no more samples in this round.
    while (!rounds_ended_ && !trials_[left_[next_]].racing)
        if (++next_ == left_.size()) end_round();
    return rounds_ended_ ? -1 : static_cast<int>(left_[next_]);
}

bool Measurement::awaiting_warm_up() const {
    return std::any_of(trials_.begin(), trials_.end(), [](const Trial& t) { return !t.warmed_up; });
}

int Measurement::provisional() const {
    for (std::size_t i = 0; i < trials_.size(); ++i)
        if (trials_[i].warmed_up && trials_[i].status.ok()) return static_cast<int>(i);
    return -1;
}

double Measurement::estimate_ms(std::size_t i) const {
    const Trial& t = trials_[i];
    return t.samples_ms.empty() ? t.first_ms : median(t.samples_ms);
}

namespace {

// A trial's slowest sample (precondition: it has one), and its fastest and slowest call, its
// warm-up included (precondition: the warm-up was made).
double slowest_sample(const Trial& t) { return *std::max_element(t.samples_ms.begin(), t.samples_ms.end()); }
double fastest_call(const Trial& t) {
    return t.samples_ms.empty() ? t.first_ms
                                : std::min(t.first_ms, *std::min_element(t.samples_ms.begin(), t.samples_ms.end()));
}
double slowest_call(const Trial& t) {
    return t.samples_ms.empty() ? t.first_ms : std::max(t.first_ms, slowest_sample(t));
}

}  // namespace

double Measurement::fastest_call_ms(std::size_t except) const {
    double best = 0;
    for (std::size_t i = 0; i < trials_.size(); ++i) {
        const Trial& t = trials_[i];
        if (i == except || !t.warmed_up || !t.status.ok()) continue;
        const double m = fastest_call(t);
        if (best == 0 || m < best) best = m;
    }
    return best;
}

int Measurement::fastest_called() const {
    int best = -1;
    for (std::size_t i = 0; i < trials_.size(); ++i) {
        const Trial& t = trials_[i];
        if (!t.warmed_up || !t.status.ok()) continue;
        if (best < 0 || estimate_ms(i) < estimate_ms(static_cast<std::size_t>(best))) best = static_cast<int>(i);
    }
    return best;
}

int Measurement::due() {
    paced_ = -1;
    const int i = natural_due();
    if (i < 0 || !budget_ || !(s_.explore_fraction < std::numeric_limits<double>::infinity())) return i;
    const int pick = provisional();
    if (pick < 0 || i == pick) return i;  // nothing to compare with yet, or not exploring
    const std::size_t pi = static_cast<std::size_t>(pick);
    if (trials_[pi].samples_ms.empty()) {
        // The pick's first call was cold: exploring waits for a sample of what the pick takes.
        paced_ = pick;
        return pick;
    }
    const Trial& t = trials_[static_cast<std::size_t>(i)];
    const double extra = (t.warmed_up ? estimate_ms(static_cast<std::size_t>(i)) : budget_->largest_first_call_ms()) -
                         estimate_ms(static_cast<std::size_t>(pick));
    if (budget_->affords(s_.explore_fraction, extra)) return i;
    const int fastest = fastest_called();
    if (fastest != i) paced_ = fastest;
    return fastest;
}

// The call's cost to the budget: a call of the provisional pick (or before there is one) is
// base; any other explores, its extra measured against the pick's median so far (a failed call
// computed nothing: all its time is extra). Every first call updates the largest one seen.
void Measurement::account(std::size_t i, double ms, const Status& st) {
    if (!budget_) return;
    if (!trials_[i].warmed_up) budget_->first_call(ms);
    const int pick = provisional();
    if (!st.ok()) budget_->explored(ms, 0);
    else if (pick < 0 || static_cast<std::size_t>(pick) == i) budget_->ran(ms);
    else budget_->explored(ms, estimate_ms(static_cast<std::size_t>(pick)));
}

void Measurement::record(std::size_t i, double ms, const Status& st) {
    account(i, ms, st);
    Trial& t = trials_[i];
    ++calls_;
    if (paced_ >= 0 && static_cast<std::size_t>(paced_) == i) {
        // A paced call: one more sample of a trial already called, outside the rounds.
        paced_ = -1;
        ++paced_calls_;
        t.status = st;
        if (st.ok()) t.samples_ms.push_back(ms);
        else t.racing = false;
        return;
    }
    spent_ += ms;
    t.status = st;
    if (!t.warmed_up) {
        t.warmed_up = true;
        t.first_ms = ms;
        if (!st.ok()) t.racing = false;
        // A warm candidate's first call is no cold start: one far above the fastest call so far
        // is enough to stop it.
        const double fastest = fastest_call_ms(i);
        if (st.ok() && t.warm && s_.interleaved && s_.drop_ratio > 0 && fastest > 0 && ms > s_.drop_ratio * fastest)
            drop(
                t,
                fmt::format(
                    "stopped after its first call: {:.4g} ms, over {:g}x the fastest call so far (its kernel was "
                    "loaded)",
                    ms, s_.drop_ratio));
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
        if (trials_[i].status.ok() && trials_[i].racing) left_.push_back(i);
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
    for (std::size_t i : left_) {
        if (i == leader) continue;
        Trial& t = trials_[i];
        const double fastest = fastest_call(t);
        // The leader's slowest call: its warm-up included in round 1 (one lucky sample drops
        // nothing), its samples alone from round 2 on, once it has two (a cold warm-up no longer
        // shields candidates 1.5x slower than every sample of the leader).
        const bool by_samples = round_ >= 2 && lead.samples_ms.size() >= 2;
        const double lead_ref = by_samples ? slowest_sample(lead) : slowest_call(lead);
        if (round_ < std::max(2, s_.min_samples) && s_.early_drop > 0 && fastest > s_.early_drop * lead_ref &&
            (round_ >= 2 || fastest >= s_.early_drop_min_ms))
            drop(t, fmt::format("stopped early: every call over {:g}x the leader's slowest {} after {} round{}",
                                s_.early_drop, by_samples ? "sample" : "call", round_, round_ == 1 ? "" : "s"));
        else if (s_.racing && round_ >= s_.min_samples &&
                 slower_beyond_noise(lead.samples_ms, t.samples_ms, s_.z, s_.lead_floor))
            drop(t,
                 fmt::format("dropped after {} samples: slower than the leader beyond the noise", t.samples_ms.size()));
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
        if (t.samples_ms.empty()) {  // stopped after its first call: that call is all there is
            t.median_ms = t.first_ms;
            t.spread = 0;
            continue;
        }
        t.median_ms = median(t.samples_ms);
        t.spread = relative_spread(t.samples_ms);
    }
}

Choice Measurement::choose() const {
    Choice c;
    auto better = [](const Trial& a, const Trial& b) {
        return a.median_ms < b.median_ms || (a.median_ms == b.median_ms && a.order < b.order);
    };
    for (std::size_t i = 0; i < trials_.size(); ++i) {
        const Trial& t = trials_[i];
        if (!t.status.ok() || (s_.interleaved && !t.racing)) continue;
        if (c.trial < 0 || better(t, trials_[static_cast<std::size_t>(c.trial)])) c.trial = static_cast<int>(i);
    }
    if (c.trial < 0) return c;
    // The heuristic's pick: the first candidate entered (the selector enters it first).
    const Trial& h = trials_.front();
    if (s_.keep_heuristic_within_noise && c.trial != 0 && h.status.ok() && h.racing &&
        !slower_beyond_noise(trials_[static_cast<std::size_t>(c.trial)].samples_ms, h.samples_ms, s_.z,
                             s_.lead_floor)) {
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
            c.reason = fmt::format(
                "not compiled at first use: the fastest median ({:.4g} ms, whose kernel is compiled at first use) "
                "leads this one by no more than the noise",
                w.median_ms);
            c.trial = best;
        }
    }
    return c;
}

}  // namespace convtune
