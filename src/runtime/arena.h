// ArenaAllocator: one block from a parent allocator, handed out by planned offset (at()) or by
// bumping (allocate()); the static arena of a planned Executable's intermediates.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "runtime/allocator.h"

namespace kiln::runtime {

class ArenaAllocator : public Allocator {
public:
    /// Takes `capacity` bytes from `parent` at once, named `what` (an OutOfMemory error from the
    /// parent names it). parent must outlive the arena.
    ArenaAllocator(Allocator* parent, size_t capacity, const std::string& what);
    ~ArenaAllocator() override;
    ArenaAllocator(const ArenaAllocator&) = delete;
    ArenaAllocator& operator=(const ArenaAllocator&) = delete;

    /// Planned placement: the address at `offset`; null when [offset, offset + bytes) does not
    /// fit in the capacity.
    void* at(size_t offset, size_t bytes) const;
    /// Bump allocation (64-byte aligned) after everything allocated so far; kOutOfMemory when full.
    void* allocate(size_t bytes, const std::string& what) override;
    /// Only the most recent bump allocation is given back; others wait for reset().
    void deallocate(void* p, size_t bytes) override;
    /// Forgets every bump allocation.
    void reset();
    size_t bytes_in_use() const override;
    size_t peak_bytes() const override;
    size_t capacity() const { return capacity_; }
    void* base() const { return base_; }

private:
    Allocator* parent_;
    size_t capacity_;
    void* base_ = nullptr;
    mutable std::mutex mu_;
    size_t top_ = 0, last_ = 0, peak_ = 0;
};

}  // namespace kiln::runtime
