// Allocators behind one interface. CpuAllocator: 64-byte aligned host memory with an optional
// budget; exceeding it is an OutOfMemory error naming the tensor, never a crash. The others:
// ArenaAllocator (runtime/arena.h), CachingAllocator (runtime/caching_allocator.h),
// BudgetAllocator (runtime/budget.h); docs/memory.md shows how a session stacks them.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

#include "support/status.h"
#include "support/tensor.h"

namespace kiln::runtime {

class Allocator : public std::enable_shared_from_this<Allocator> {
public:
    virtual ~Allocator() = default;
    /// Returns 64-byte-aligned memory or throws kiln::Error(kOutOfMemory) naming `what`.
    virtual void* allocate(size_t bytes, const std::string& what) = 0;
    /// Gives back memory from allocate(); `bytes` is the size asked for. Never throws.
    virtual void deallocate(void* p, size_t bytes) = 0;
    virtual size_t bytes_in_use() const = 0;
    virtual size_t peak_bytes() const = 0;
    /// A tensor (contents unspecified) whose storage comes from allocate() and goes back through
    /// deallocate() when its last reference dies. An allocator owned by a std::shared_ptr stays
    /// alive as long as such a tensor; otherwise it must outlive the tensors it made.
    /// Throws kiln::Error(kOutOfMemory) naming `what`.
    virtual Tensor allocate_tensor(DType dtype, Shape shape, const std::string& what);
};

class CpuAllocator : public Allocator {
public:
    /// budget_bytes == 0 means unlimited.
    explicit CpuAllocator(size_t budget_bytes = 0) : budget_(budget_bytes) {}
    void* allocate(size_t bytes, const std::string& what) override;
    void deallocate(void* p, size_t bytes) override;
    size_t bytes_in_use() const override;
    size_t peak_bytes() const override;
    size_t budget() const { return budget_; }

private:
    size_t budget_;
    mutable std::mutex mu_;
    size_t in_use_ = 0;
    size_t peak_ = 0;
};

}  // namespace kiln::runtime
