#include "convtune/measurement.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/core.h>

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
    s.persist_max_noise = 0.5;
    return s;
}

double Measurement::call(Trial& t) {
    const double ms = t.call(t.status);
    spent_ += ms;
    return ms;
}

void Measurement::drop(Trial& t, std::string why) {
    t.racing = false;
    t.reason = std::move(why);
}

const Trial& Measurement::enter(std::size_t order, TimedCall fn) {
    Trial& t = trials_.emplace_back();
    t.order = order;
    t.call = std::move(fn);
    t.first_ms = call(t);  // warm-up
    if (t.status.ok() && !s_.interleaved)
        for (int k = 0; k < s_.max_samples && t.status.ok(); ++k) t.samples_ms.push_back(call(t));
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

void Measurement::finish() {
    if (!s_.interleaved) return;
    std::vector<Trial*> left;
    for (Trial& t : trials_)
        if (t.status.ok()) left.push_back(&t);
    std::vector<double> previous(trials_.size(), -1);
    for (int round = 1; round <= s_.max_samples && !left.empty(); ++round) {
        if (round > 1 && spent_ > s_.budget_ms) {
            for (Trial* t : left) t->reason = "search budget spent";
            break;
        }
        for (Trial* t : left) {
            t->samples_ms.push_back(call(*t));
            if (!t->status.ok()) t->racing = false;
        }
        std::erase_if(left, [](const Trial* t) { return !t->racing; });
        if (left.empty()) break;
        for (Trial* t : left) t->median_ms = median(t->samples_ms);
        const Trial* leader = *std::min_element(left.begin(), left.end(), [](const Trial* a, const Trial* b) {
            return a->median_ms < b->median_ms || (a->median_ms == b->median_ms && a->order < b->order);
        });
        auto slowest = [](const Trial& t) { return std::max(t.first_ms, *std::max_element(t.samples_ms.begin(), t.samples_ms.end())); };
        auto fastest = [](const Trial& t) { return std::min(t.first_ms, *std::min_element(t.samples_ms.begin(), t.samples_ms.end())); };
        for (Trial* t : left) {
            if (t == leader) continue;
            if (round == 1 && s_.drop_ratio > 0 && fastest(*t) > s_.drop_ratio * slowest(*leader))
                drop(*t, fmt::format("stopped early: every call over {:g}x the leader's slowest", s_.drop_ratio));
            else if (s_.racing && round >= s_.min_samples && slower_beyond_noise(leader->samples_ms, t->samples_ms, s_.z, s_.lead_floor))
                drop(*t, fmt::format("dropped after {} samples: slower than the leader beyond the noise", t->samples_ms.size()));
        }
        std::erase_if(left, [](const Trial* t) { return !t->racing; });
        if (round < s_.min_samples) continue;
        if (left.size() == 1) break;
        // The ones left are tied: within lead_floor of the leader, their medians stable.
        bool tied = true;
        for (Trial* t : left) {
            const std::size_t i = static_cast<std::size_t>(t - trials_.data());
            tied = tied && t->median_ms <= (1 + s_.lead_floor) * leader->median_ms && previous[i] > 0 &&
                   std::abs(t->median_ms - previous[i]) <= s_.stable_rel * t->median_ms;
            previous[i] = t->median_ms;
        }
        if (tied) break;
    }
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
    return c;
}

}  // namespace convtune
