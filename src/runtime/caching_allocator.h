// CachingAllocator: a pool for tensors whose sizes repeat (per-run outputs, dynamic shapes):
// freed blocks stay cached and serve later requests of a similar size without a system call.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "runtime/allocator.h"

namespace kiln::runtime {

struct CachingStats {
    size_t hits = 0;          // requests served from the cache
    size_t misses = 0;        // requests that went to the parent allocator
    size_t bytes_in_use = 0;  // bytes of blocks handed out (block sizes, 64-byte granules)
    size_t bytes_cached = 0;  // bytes of free blocks held for reuse
    size_t peak_bytes = 0;    // peak of bytes_in_use
    size_t peak_held = 0;     // peak of bytes_in_use + bytes_cached (what the parent gave)
};

class CachingAllocator : public Allocator {
public:
    /// Blocks come from `parent` (kept alive by this allocator).
    explicit CachingAllocator(std::shared_ptr<Allocator> parent);
    ~CachingAllocator() override;
    CachingAllocator(const CachingAllocator&) = delete;
    CachingAllocator& operator=(const CachingAllocator&) = delete;

    /// Size classes are 64-byte granules; a request takes the smallest cached block of its class
    /// or up to 1/8 larger (a hit), else a new block of its class from the parent (a miss). When
    /// the parent refuses (a budget), the cache is released and the request tried once more.
    void* allocate(size_t bytes, const std::string& what) override;
    /// Keeps the block for reuse.
    void deallocate(void* p, size_t bytes) override;
    size_t bytes_in_use() const override;
    size_t peak_bytes() const override;

    /// Gives every cached block back to the parent; returns the bytes released.
    size_t release_cached();
    CachingStats stats() const;

private:
    std::shared_ptr<Allocator> parent_;
    mutable std::mutex mu_;
    std::multimap<size_t, void*> free_;         // block size -> cached block
    std::unordered_map<void*, size_t> in_use_;  // block -> block size
    CachingStats stats_;
};

/// The allocator stack a session uses: CachingAllocator over a BudgetAllocator (when
/// budget_bytes > 0) over a CpuAllocator. Cached blocks count against the budget.
std::shared_ptr<CachingAllocator> make_session_allocator(size_t budget_bytes);

}  // namespace kiln::runtime
