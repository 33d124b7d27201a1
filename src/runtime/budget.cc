// BudgetAllocator: reserve under the lock, allocate from the parent outside it, roll the
// reservation back if the parent fails (its error propagates unchanged).
#include "runtime/budget.h"

#include "support/error.h"

namespace kiln::runtime {

BudgetAllocator::BudgetAllocator(std::shared_ptr<Allocator> parent, size_t budget_bytes)
    : parent_(std::move(parent)), budget_(budget_bytes) {
    KILN_ICHECK(parent_ != nullptr) << "BudgetAllocator needs a parent allocator";
}

void* BudgetAllocator::allocate(size_t bytes, const std::string& what) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (budget_ != 0 && (bytes > budget_ || in_use_ > budget_ - bytes)) {
            ++refusals_;
            KILN_THROW(kOutOfMemory) << "out of memory budget: allocating " << bytes << " bytes for '" << what
                                     << "' with " << in_use_ << " bytes in use exceeds the budget of " << budget_
                                     << " bytes";
        }
        in_use_ += bytes;
        if (in_use_ > peak_) peak_ = in_use_;
    }
    try {
        return parent_->allocate(bytes, what);
    } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        in_use_ -= bytes;
        throw;
    }
}

void BudgetAllocator::deallocate(void* p, size_t bytes) {
    if (p == nullptr) return;
    parent_->deallocate(p, bytes);
    std::lock_guard<std::mutex> lock(mu_);
    in_use_ = bytes <= in_use_ ? in_use_ - bytes : 0;
}

size_t BudgetAllocator::bytes_in_use() const {
    std::lock_guard<std::mutex> lock(mu_);
    return in_use_;
}

size_t BudgetAllocator::peak_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return peak_;
}

size_t BudgetAllocator::refusals() const {
    std::lock_guard<std::mutex> lock(mu_);
    return refusals_;
}

}  // namespace kiln::runtime
