// TuningCache: the in-memory cache of decisions, shared by all threads of a process.
//
// Thread-safe; a key that many threads ask for at once is computed by exactly one of them while
// the others wait for its result (single flight). Bounded with least-recently-used eviction
// (PyTorch's default bound is 10000 entries). Counts hits and misses, and how often each key
// was asked for (the adaptive policy's recurrence count).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "convtune/decision.hpp"

namespace convtune {

class TuningCache {
public:
    explicit TuningCache(std::size_t capacity = 10000);

    using Compute = std::function<Decision()>;
    // The cached decision for key, or compute() run once (by this thread) and cached.
    // `hit` tells which happened. If compute throws, waiting threads retry themselves.
    std::shared_ptr<const Decision> get_or_compute(const std::string& key, const Compute& compute, bool* hit = nullptr);
    std::shared_ptr<const Decision> find(const std::string& key);  // counts as a hit/miss
    void put(const std::string& key, Decision d);
    void erase(const std::string& key);
    void clear();
    // Increments and returns how many times key has been asked for (kept across evictions
    // of the decision itself; reset by clear()).
    int64_t note_occurrence(const std::string& key);

    struct Stats {
        int64_t hits = 0, misses = 0, evictions = 0;
        std::size_t size = 0, capacity = 0;
    };
    Stats stats() const;

private:
    void insert_locked(const std::string& key, std::shared_ptr<const Decision> d);

    mutable std::mutex mutex_;
    std::condition_variable done_;
    std::size_t capacity_;
    std::list<std::string> lru_;  // front = most recent
    struct Entry {
        std::shared_ptr<const Decision> decision;
        std::list<std::string>::iterator pos;
    };
    std::unordered_map<std::string, Entry> map_;
    std::unordered_map<std::string, bool> in_flight_;
    std::unordered_map<std::string, int64_t> occurrences_;
    Stats stats_;
};

}  // namespace convtune
