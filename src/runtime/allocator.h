// Allocators behind one interface. CpuAllocator: 64-byte aligned host memory with an optional
// budget; exceeding it is an OutOfMemory error naming the tensor, never a crash.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>

#include "support/status.h"

namespace kiln::runtime {

class Allocator {
public:
    virtual ~Allocator() = default;
    /// Returns 64-byte-aligned memory or throws kiln::Error(kOutOfMemory) naming `what`.
    virtual void* allocate(size_t bytes, const std::string& what) = 0;
    virtual void deallocate(void* p, size_t bytes) = 0;
    virtual size_t bytes_in_use() const = 0;
    virtual size_t peak_bytes() const = 0;
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
