// ArenaAllocator: see arena.h. A zero-capacity arena takes nothing from its parent.
#include "runtime/arena.h"

#include <algorithm>

#include "support/error.h"

namespace kiln::runtime {

namespace {
size_t align64(size_t b) { return (b + 63) / 64 * 64; }
}  // namespace

ArenaAllocator::ArenaAllocator(Allocator* parent, size_t capacity, const std::string& what)
    : parent_(parent), capacity_(capacity) {
    KILN_ICHECK(parent_ != nullptr) << "ArenaAllocator needs a parent allocator";
    if (capacity_ > 0) base_ = parent_->allocate(capacity_, what);
}

ArenaAllocator::~ArenaAllocator() {
    if (base_) parent_->deallocate(base_, capacity_);
}

void* ArenaAllocator::at(size_t offset, size_t bytes) const {
    if (offset > capacity_ || bytes > capacity_ - offset) return nullptr;
    return static_cast<char*>(base_) + offset;
}

void* ArenaAllocator::allocate(size_t bytes, const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    size_t need = align64(bytes);
    KILN_CHECK(need <= capacity_ && top_ <= capacity_ - need, kOutOfMemory)
        << "out of arena memory: allocating " << bytes << " bytes for '" << what << "' with " << top_
        << " bytes in use exceeds the arena of " << capacity_ << " bytes";
    void* p = static_cast<char*>(base_) + top_;
    last_ = top_;
    top_ += need;
    peak_ = std::max(peak_, top_);
    return p;
}

void ArenaAllocator::deallocate(void* p, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (p != nullptr && p == static_cast<char*>(base_) + last_ && last_ + align64(bytes) == top_) top_ = last_;
}

void ArenaAllocator::reset() {
    std::lock_guard<std::mutex> lock(mu_);
    top_ = last_ = 0;
}

size_t ArenaAllocator::bytes_in_use() const {
    std::lock_guard<std::mutex> lock(mu_);
    return top_;
}

size_t ArenaAllocator::peak_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return peak_;
}

}  // namespace kiln::runtime
