// SpecializationCache: the compiled specializations a session holds, by key, least recently
// used first out.
//
// A key names one specialization (symbolic dims bound, value inputs frozen; compiler/session.cc).
// get() returns the cached value and marks it used, or compiles it: exactly one caller runs
// `make` for a key while others asking for the same key wait for its result (a failed compile
// reaches every waiter and caches nothing). Past `capacity` values the least recently used one is
// dropped from the cache; a run still using it keeps it alive through its shared_ptr. A hit takes
// one short lock (a hash lookup and a list splice), so warm runs of different shapes from many
// threads stay cheap; compiles run outside the lock.
#pragma once

#include <cstddef>
#include <functional>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "support/error.h"

namespace kiln::compiler {

/// What the cache did so far.
struct SpecializationCacheStats {
    int held = 0;       // values cached now
    int compiles = 0;   // calls of make that returned a value
    int hits = 0;       // get() calls answered from the cache (or by waiting for another's make)
    int evictions = 0;  // values dropped for capacity
};

template <typename T>
class SpecializationCache {
public:
    using Ptr = std::shared_ptr<const T>;

    /// capacity >= 1 (kInvalidArgument otherwise).
    explicit SpecializationCache(size_t capacity) : capacity_(capacity) {
        KILN_CHECK(capacity >= 1, kInvalidArgument) << "max_specializations must be >= 1, got " << capacity;
    }

    /// The value of `key`, made by `make` when absent (see the file comment).
    Ptr get(const std::string& key, const std::function<Ptr()>& make) {
        std::promise<Ptr> made;
        std::shared_future<Ptr> pending;
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (auto it = index_.find(key); it != index_.end()) {
                lru_.splice(lru_.begin(), lru_, it->second);
                ++stats_.hits;
                return it->second->second;
            }
            if (auto it = pending_.find(key); it != pending_.end()) {
                pending = it->second;
                ++stats_.hits;
            } else {
                pending_.emplace(key, made.get_future().share());
            }
        }
        if (pending.valid()) return pending.get();  // another caller compiles it; rethrows its error
        Ptr value;
        try {
            value = make();
            KILN_ICHECK(value != nullptr) << "a specialization compiled to nothing";
        } catch (...) {
            made.set_exception(std::current_exception());
            std::lock_guard<std::mutex> lock(mu_);
            pending_.erase(key);  // a later call tries again
            throw;
        }
        std::vector<Ptr> evicted;  // destroyed outside the lock
        {
            std::lock_guard<std::mutex> lock(mu_);
            lru_.emplace_front(key, value);
            index_[key] = lru_.begin();
            pending_.erase(key);
            ++stats_.compiles;
            while (lru_.size() > capacity_) {
                evicted.push_back(std::move(lru_.back().second));
                index_.erase(lru_.back().first);
                lru_.pop_back();
                ++stats_.evictions;
            }
        }
        made.set_value(value);
        return value;
    }

    /// The cached value of `key` (marked used), or null.
    Ptr find(const std::string& key) {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = index_.find(key);
        if (it == index_.end()) return nullptr;
        lru_.splice(lru_.begin(), lru_, it->second);
        return it->second->second;
    }

    /// The most recently used value, or null.
    Ptr most_recent() const {
        std::lock_guard<std::mutex> lock(mu_);
        return lru_.empty() ? nullptr : lru_.front().second;
    }

    /// The keys cached now, most recently used first.
    std::vector<std::string> keys() const {
        std::lock_guard<std::mutex> lock(mu_);
        std::vector<std::string> k;
        for (const auto& [key, value] : lru_) k.push_back(key);
        return k;
    }

    /// The values cached now, most recently used first.
    std::vector<Ptr> values() const {
        std::lock_guard<std::mutex> lock(mu_);
        std::vector<Ptr> v;
        for (const auto& [key, value] : lru_) v.push_back(value);
        return v;
    }

    SpecializationCacheStats stats() const {
        std::lock_guard<std::mutex> lock(mu_);
        SpecializationCacheStats s = stats_;
        s.held = static_cast<int>(lru_.size());
        return s;
    }

    size_t capacity() const { return capacity_; }

private:
    using Entry = std::pair<std::string, Ptr>;
    const size_t capacity_;
    mutable std::mutex mu_;
    std::list<Entry> lru_;  // front: most recently used
    std::unordered_map<std::string, typename std::list<Entry>::iterator> index_;
    std::unordered_map<std::string, std::shared_future<Ptr>> pending_;
    SpecializationCacheStats stats_;
};

}  // namespace kiln::compiler
