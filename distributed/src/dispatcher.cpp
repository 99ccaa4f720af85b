#include "dispatcher.hpp"

#include <algorithm>

namespace convtune::dist {

Dispatcher::Dispatcher(int64_t count, int ranks, int max_attempts, int retire_after)
    : count_(count), ranks_(ranks), max_attempts_(std::max(1, max_attempts)), retire_after_(std::max(1, retire_after)),
      blame_(static_cast<std::size_t>(ranks), 0), decided_(static_cast<std::size_t>(ranks), 0) {
    for (int64_t i = 0; i < count; ++i) pending_.push_back(i);
}

bool Dispatcher::eligible(int rank, int64_t i) const {
    auto it = failed_by_.find(i);
    return it == failed_by_.end() || it->second.count(rank) == 0;
}

std::optional<int64_t> Dispatcher::take(int rank) {
    if (retired(rank)) return std::nullopt;
    for (auto it = pending_.begin(); it != pending_.end(); ++it)
        if (eligible(rank, *it)) {
            const int64_t i = *it;
            pending_.erase(it);
            in_flight_[i] = rank;
            return i;
        }
    return std::nullopt;
}

bool Dispatcher::holds(int rank) const {
    for (const auto& [i, r] : in_flight_)
        if (r == rank) return true;
    return false;
}

std::vector<int64_t> Dispatcher::lose(int rank) {
    lost_.insert(rank);
    std::vector<int64_t> back;
    for (auto it = in_flight_.begin(); it != in_flight_.end();) {
        if (it->second == rank) {
            back.push_back(it->first);
            it = in_flight_.erase(it);
        } else {
            ++it;
        }
    }
    for (auto it = back.rbegin(); it != back.rend(); ++it) pending_.push_front(*it);
    give_up_orphans();
    return back;
}

void Dispatcher::done(int rank, int64_t i) {
    in_flight_.erase(i);
    ++done_;
    ++decided_[static_cast<std::size_t>(rank)];
    auto it = failed_by_.find(i);
    if (it == failed_by_.end()) return;
    // Decided here after failing elsewhere: the ranks that failed it are at fault, not the problem.
    ++retried_;
    for (int other : it->second)
        if (++blame_[static_cast<std::size_t>(other)] >= retire_after_) retired_.insert(other);
    failed_by_.erase(it);
    reasons_.erase(i);
    give_up_orphans();
}

void Dispatcher::failed(int rank, int64_t i, const std::string& why) {
    in_flight_.erase(i);
    failed_by_[i].insert(rank);
    reasons_[i].push_back("rank " + std::to_string(rank) + ": " + why);
    if (static_cast<int>(failed_by_[i].size()) >= max_attempts_) {
        given_up_[i] = std::move(reasons_[i]);
        reasons_.erase(i);
    } else {
        pending_.push_front(i);  // retried first, by the next rank that may take it
    }
    give_up_orphans();
}

void Dispatcher::give_up_orphans() {
    for (auto it = pending_.begin(); it != pending_.end();) {
        bool someone = false;
        for (int r = 0; r < ranks_ && !someone; ++r) someone = !retired(r) && eligible(r, *it);
        if (someone) {
            ++it;
            continue;
        }
        std::vector<std::string> why = reasons_[*it];
        why.push_back(why.empty() ? "no rank left to decide it (every rank was retired)"
                                  : "no other rank left to retry it");
        given_up_[*it] = std::move(why);
        reasons_.erase(*it);
        it = pending_.erase(it);
    }
}

}  // namespace convtune::dist
