#include "convtune/search_history.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace convtune {

namespace {

std::string slot(std::string_view id, std::string_view kind) {
    std::string s(kind);
    s += '|';
    s += id;
    return s;
}

}  // namespace

void SearchHistory::ran(const Algorithm& a) {
    std::lock_guard lock(mutex_);
    warm_.insert(&a);
}

bool SearchHistory::warm(const Algorithm& a) const {
    std::lock_guard lock(mutex_);
    return warm_.count(&a) > 0;
}

void SearchHistory::judged(std::string_view id, std::string_view kind, double ms, double winner_ms, const Demotion& d) {
    if (!(d.ratio > 0) || !(winner_ms > 0) || !(ms > 0)) return;
    const double ratio = ms / winner_ms;
    std::lock_guard lock(mutex_);
    Standing& s = standing_[slot(id, kind)];
    if (ratio <= d.competitive) s.competitive = true;
    if (ratio >= d.ratio) {
        ++s.losses;
        s.worst = std::max(s.worst, ratio);
    }
}

std::string SearchHistory::demoted(std::string_view id, std::string_view kind, const Demotion& d) const {
    if (!(d.ratio > 0) || d.after <= 0) return {};
    std::lock_guard lock(mutex_);
    const auto it = standing_.find(slot(id, kind));
    if (it == standing_.end() || it->second.competitive || it->second.losses < d.after) return {};
    return fmt::format(
        "demoted: over {:g}x slower than the winner in {} earlier searches of this process (up to {:.0f}x) and never "
        "within {:g}x of one",
        d.ratio, it->second.losses, it->second.worst, d.competitive);
}

}  // namespace convtune
