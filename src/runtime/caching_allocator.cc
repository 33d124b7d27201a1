// CachingAllocator: a best-fit free list (multimap by block size). Blocks are exact 64-byte
// granules of the request, so the first run under a budget charges exactly the planned bytes;
// reuse tolerates up to 1/8 slack so that slightly different sizes (dynamic shapes) still hit.
#include "runtime/caching_allocator.h"

#include <algorithm>

#include "runtime/budget.h"
#include "support/error.h"

namespace kiln::runtime {

namespace {
size_t granule(size_t b) { return b == 0 ? 64 : (b + 63) / 64 * 64; }
}  // namespace

CachingAllocator::CachingAllocator(std::shared_ptr<Allocator> parent) : parent_(std::move(parent)) {
    KILN_ICHECK(parent_ != nullptr) << "CachingAllocator needs a parent allocator";
}

CachingAllocator::~CachingAllocator() {
    release_cached();
    // Blocks still handed out belong to tensors that keep this allocator alive through
    // allocate_tensor; anything left here was leaked by a caller, so give it back.
    for (auto& [p, size] : in_use_) parent_->deallocate(p, size);
}

void* CachingAllocator::allocate(size_t bytes, const std::string& what) {
    size_t need = granule(bytes);
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = free_.lower_bound(need);
        if (it != free_.end() && it->first <= need + need / 8) {
            void* p = it->second;
            size_t size = it->first;
            free_.erase(it);
            stats_.bytes_cached -= size;
            stats_.bytes_in_use += size;
            stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.bytes_in_use);
            ++stats_.hits;
            in_use_[p] = size;
            return p;
        }
    }
    void* p = nullptr;
    try {
        p = parent_->allocate(need, what);
    } catch (const Error& e) {
        if (e.kind() != ErrorKind::kOutOfMemory || release_cached() == 0) throw;
        p = parent_->allocate(need, what);
    }
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.misses;
    in_use_[p] = need;
    stats_.bytes_in_use += need;
    stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.bytes_in_use);
    stats_.peak_held = std::max(stats_.peak_held, stats_.bytes_in_use + stats_.bytes_cached);
    return p;
}

void CachingAllocator::deallocate(void* p, size_t /*bytes*/) {
    if (p == nullptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = in_use_.find(p);
    if (it == in_use_.end()) return;  // not ours: ignore rather than corrupt the pool
    size_t size = it->second;
    in_use_.erase(it);
    stats_.bytes_in_use -= size;
    stats_.bytes_cached += size;
    free_.emplace(size, p);
}

size_t CachingAllocator::release_cached() {
    std::multimap<size_t, void*> blocks;
    {
        std::lock_guard<std::mutex> lock(mu_);
        blocks.swap(free_);
        stats_.bytes_cached = 0;
    }
    size_t released = 0;
    for (auto& [size, p] : blocks) {
        parent_->deallocate(p, size);
        released += size;
    }
    return released;
}

size_t CachingAllocator::bytes_in_use() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_.bytes_in_use;
}

size_t CachingAllocator::peak_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_.peak_bytes;
}

CachingStats CachingAllocator::stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
}

std::shared_ptr<CachingAllocator> make_session_allocator(size_t budget_bytes) {
    std::shared_ptr<Allocator> base = std::make_shared<CpuAllocator>();
    if (budget_bytes > 0) base = std::make_shared<BudgetAllocator>(base, budget_bytes);
    return std::make_shared<CachingAllocator>(base);
}

}  // namespace kiln::runtime
