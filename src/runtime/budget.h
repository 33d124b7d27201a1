// BudgetAllocator: caps the bytes in use of any allocator. A request that would exceed the
// budget throws kOutOfMemory naming the tensor, its size, what is in use and the budget; the
// refused request changes nothing, so the process (and the allocator) stays usable.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "runtime/allocator.h"

namespace kiln::runtime {

class BudgetAllocator : public Allocator {
public:
    /// budget_bytes == 0 means unlimited. `parent` supplies the memory.
    BudgetAllocator(std::shared_ptr<Allocator> parent, size_t budget_bytes);
    void* allocate(size_t bytes, const std::string& what) override;
    void deallocate(void* p, size_t bytes) override;
    size_t bytes_in_use() const override;
    size_t peak_bytes() const override;
    size_t budget() const { return budget_; }
    /// Requests refused for the budget so far.
    size_t refusals() const;

private:
    std::shared_ptr<Allocator> parent_;
    size_t budget_;
    mutable std::mutex mu_;
    size_t in_use_ = 0;
    size_t peak_ = 0;
    size_t refusals_ = 0;
};

}  // namespace kiln::runtime
