// CpuAllocator: 64-byte aligned host memory with byte accounting and an optional budget.
// A request that would push bytes_in_use past the budget throws kOutOfMemory naming the tensor;
// the allocator's state is unchanged by a refused request, so it stays usable.
#include "runtime/allocator.h"

#include <cstdlib>

#include "support/error.h"
#include "support/huge_pages.h"

namespace kiln::runtime {

void* CpuAllocator::allocate(size_t bytes, const std::string& what) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        KILN_CHECK(budget_ == 0 || (bytes <= budget_ && in_use_ <= budget_ - bytes), kOutOfMemory)
            << "out of memory budget: allocating " << bytes << " bytes for '" << what << "' with "
            << in_use_ << " bytes in use exceeds the budget of " << budget_ << " bytes";
        in_use_ += bytes;
        if (in_use_ > peak_) peak_ = in_use_;
    }
    size_t rounded = (bytes + 63) / 64 * 64;
    if (rounded == 0) rounded = 64;
    void* p = std::aligned_alloc(64, rounded);
    if (p == nullptr) {
        std::lock_guard<std::mutex> lock(mu_);
        in_use_ -= bytes;
        KILN_THROW(kOutOfMemory) << "out of memory: the system refused " << bytes << " bytes for '" << what
                                 << "' (" << in_use_ << " bytes in use)";
    }
    advise_huge_pages(p, rounded);
    return p;
}

void CpuAllocator::deallocate(void* p, size_t bytes) {
    if (p == nullptr) return;
    std::free(p);
    std::lock_guard<std::mutex> lock(mu_);
    in_use_ = bytes <= in_use_ ? in_use_ - bytes : 0;
}

size_t CpuAllocator::bytes_in_use() const {
    std::lock_guard<std::mutex> lock(mu_);
    return in_use_;
}

Tensor Allocator::allocate_tensor(DType dtype, Shape shape, const std::string& what) {
    size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
    void* p = allocate(bytes, what);
    std::shared_ptr<Allocator> keep = weak_from_this().lock();
    Allocator* self = this;
    std::shared_ptr<void> storage(p, [keep, self, bytes](void* q) { self->deallocate(q, bytes); });
    return Tensor::from_storage(dtype, std::move(shape), std::move(storage));
}

size_t CpuAllocator::peak_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return peak_;
}

}  // namespace kiln::runtime
