#include "convtune/tuning_cache.hpp"

namespace convtune {

TuningCache::TuningCache(std::size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

void TuningCache::insert_locked(const std::string& key, std::shared_ptr<const Decision> d) {
    auto it = map_.find(key);
    if (it != map_.end()) {
        it->second.decision = std::move(d);
        lru_.splice(lru_.begin(), lru_, it->second.pos);
        return;
    }
    lru_.push_front(key);
    map_.emplace(key, Entry{std::move(d), lru_.begin()});
    while (map_.size() > capacity_) {
        map_.erase(lru_.back());
        lru_.pop_back();
        ++stats_.evictions;
    }
}

std::shared_ptr<const Decision> TuningCache::get_or_compute(const std::string& key, const Compute& compute, bool* hit) {
    std::unique_lock lock(mutex_);
    while (true) {
        auto it = map_.find(key);
        if (it != map_.end()) {
            lru_.splice(lru_.begin(), lru_, it->second.pos);
            ++stats_.hits;
            if (hit) *hit = true;
            return it->second.decision;
        }
        if (!in_flight_.count(key)) break;
        done_.wait(lock);  // another thread is computing this key
    }
    in_flight_[key] = true;
    ++stats_.misses;
    if (hit) *hit = false;
    lock.unlock();
    std::shared_ptr<const Decision> d;
    try {
        d = std::make_shared<const Decision>(compute());
    } catch (...) {
        lock.lock();
        in_flight_.erase(key);
        done_.notify_all();
        throw;
    }
    lock.lock();
    insert_locked(key, d);
    in_flight_.erase(key);
    done_.notify_all();
    return d;
}

std::shared_ptr<const Decision> TuningCache::find(const std::string& key) {
    std::lock_guard lock(mutex_);
    auto it = map_.find(key);
    if (it == map_.end()) {
        ++stats_.misses;
        return nullptr;
    }
    ++stats_.hits;
    lru_.splice(lru_.begin(), lru_, it->second.pos);
    return it->second.decision;
}

void TuningCache::put(const std::string& key, Decision d) {
    std::lock_guard lock(mutex_);
    insert_locked(key, std::make_shared<const Decision>(std::move(d)));
}

void TuningCache::erase(const std::string& key) {
    std::lock_guard lock(mutex_);
    auto it = map_.find(key);
    if (it == map_.end()) return;
    lru_.erase(it->second.pos);
    map_.erase(it);
}

void TuningCache::clear() {
    std::lock_guard lock(mutex_);
    map_.clear();
    lru_.clear();
    occurrences_.clear();
    stats_ = {};
}

int64_t TuningCache::note_occurrence(const std::string& key) {
    std::lock_guard lock(mutex_);
    return ++occurrences_[key];
}

TuningCache::Stats TuningCache::stats() const {
    std::lock_guard lock(mutex_);
    Stats s = stats_;
    s.size = map_.size();
    s.capacity = capacity_;
    return s;
}

}  // namespace convtune
