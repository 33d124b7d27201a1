// The CUDA device: GPU 0 of the machine through the driver API (runtime/cuda/cuda_api.h), its
// primary context, and a raw allocator (cuMemAlloc/cuMemFree). Sessions stack a cache and a
// budget on the raw allocator (make_cuda_session_allocator). Pointers the device's allocators
// hand out are device addresses (CUdeviceptr), never to be dereferenced on the host.
#pragma once

#include <memory>
#include <string>

#include "runtime/caching_allocator.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/device.h"

namespace kiln::runtime::cuda {

/// Device memory from cuMemAlloc; a refusal is kOutOfMemory naming the tensor and its bytes.
class CudaRawAllocator : public Allocator {
public:
    explicit CudaRawAllocator(const DriverApi& api) : api_(api) {}
    void* allocate(size_t bytes, const std::string& what) override;
    void deallocate(void* p, size_t bytes) override;
    size_t bytes_in_use() const override;
    size_t peak_bytes() const override;

private:
    const DriverApi& api_;
    mutable std::mutex mu_;
    size_t in_use_ = 0, peak_ = 0;
};

class CudaDevice : public Device {
public:
    /// The process's CUDA device 0 (initialized once), or nullptr with the reason in *why: no
    /// driver, no GPU, cuInit failed.
    static CudaDevice* get(std::string* why);

    DeviceType type() const override { return DeviceType::kCUDA; }
    std::string name() const override { return name_; }
    /// The raw allocator (no cache, no budget).
    Allocator& allocator() override { return *raw_; }
    /// A synchronous copy in any direction (unified addressing).
    void copy(void* dst, const void* src, size_t bytes) override;

    const DriverApi& api() const { return api_; }
    /// Makes the device's context current on the calling thread (each thread that calls the
    /// driver API must do this once; cheap).
    void make_current() const;
    /// Compute capability as major*10+minor, e.g. 90 for an H100.
    int arch() const { return arch_; }
    int multiprocessors() const { return sms_; }
    size_t total_memory() const { return total_; }
    std::shared_ptr<Allocator> raw_allocator() const { return raw_; }

private:
    CudaDevice(const DriverApi& api, CUcontext ctx, std::string name, int arch, int sms, size_t total);
    const DriverApi& api_;
    CUcontext ctx_;
    std::string name_;
    int arch_, sms_;
    size_t total_;
    std::shared_ptr<CudaRawAllocator> raw_;
};

/// Throws kiln::Error naming `what` when r is not CUDA_SUCCESS: kOutOfMemory for
/// CUDA_ERROR_OUT_OF_MEMORY, kUnsupported otherwise (the driver's text says which).
void check_cuda(CUresult r, const std::string& what);
/// The same as a Status (the run path never throws).
Status cuda_status(CUresult r, const std::string& what);

/// A session's device memory: CachingAllocator over a BudgetAllocator (budget_bytes > 0) over
/// the device's raw allocator; over budget is kOutOfMemory naming the tensor and its bytes.
std::shared_ptr<CachingAllocator> make_cuda_session_allocator(CudaDevice& dev, size_t budget_bytes);

/// The device pointer an allocator returned, as the driver's integer address.
inline CUdeviceptr dptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

}  // namespace kiln::runtime::cuda
