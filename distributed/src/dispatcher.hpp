// Rank 0's bookkeeping of a distributed tune: which problems are pending, with whom, done or given
// up; who failed what. No MPI and no locking here (the caller holds its lock).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace convtune::dist {

class Dispatcher {
public:
    Dispatcher(int64_t count, int ranks, int max_attempts, int retire_after);

    // The next problem for rank (one it has not failed), or nullopt when none is available to it now.
    std::optional<int64_t> take(int rank);
    void done(int rank, int64_t i);
    void failed(int rank, int64_t i, const std::string& why);

    // A rank that stopped answering (stuck, stopped, gone): retired, and the problems it holds
    // are handed to others first, without counting as a failure of theirs. Returns them.
    std::vector<int64_t> lose(int rank);
    bool lost(int rank) const { return lost_.count(rank) != 0; }
    std::vector<int> lost_ranks() const { return {lost_.begin(), lost_.end()}; }
    // Whether rank holds a problem it has not answered yet.
    bool holds(int rank) const;

    // A rank that takes no work (rank 0 when it only coordinates).
    void exclude(int rank) {
        excluded_.insert(rank);
        give_up_orphans();
    }
    bool retired(int rank) const {
        return retired_.count(rank) != 0 || excluded_.count(rank) != 0 || lost_.count(rank) != 0;
    }
    bool finished() const { return done_ + static_cast<int64_t>(given_up_.size()) == count_; }
    int64_t done() const { return done_; }
    int64_t count() const { return count_; }
    int64_t retried() const { return retried_; }
    const std::vector<int64_t>& decided() const { return decided_; }
    std::vector<int> retired_ranks() const { return {retired_.begin(), retired_.end()}; }
    // Given-up problems and why ("rank R: message" per attempt), by index.
    const std::map<int64_t, std::vector<std::string>>& given_up() const { return given_up_; }
    bool is_given_up(int64_t i) const { return given_up_.count(i) != 0; }

private:
    bool eligible(int rank, int64_t i) const;
    void give_up_orphans();  // pending problems no live rank may take

    int64_t count_;
    int ranks_, max_attempts_, retire_after_;
    std::deque<int64_t> pending_;
    std::map<int64_t, std::set<int>> failed_by_;
    std::map<int64_t, std::vector<std::string>> reasons_;
    std::map<int64_t, std::vector<std::string>> given_up_;
    std::vector<int> blame_;  // per rank: failures of problems another rank then decided
    std::set<int> retired_, excluded_, lost_;
    std::map<int64_t, int> in_flight_;  // problem -> the rank deciding it
    std::vector<int64_t> decided_;
    int64_t done_ = 0, retried_ = 0;
};

}  // namespace convtune::dist
