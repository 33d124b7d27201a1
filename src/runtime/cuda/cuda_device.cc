#include "runtime/cuda/cuda_device.h"

#include "runtime/budget.h"
#include "support/error.h"

namespace kiln::runtime::cuda {
namespace {

constexpr CUresult kOutOfMemoryResult = 2;  // CUDA_ERROR_OUT_OF_MEMORY

struct DeviceOnce {
    CudaDevice* dev = nullptr;
    std::string why;
};

}  // namespace

void check_cuda(CUresult r, const std::string& what) {
    if (r == 0) return;
    Status s = cuda_status(r, what);
    throw Error(s.kind(), s.message());
}

Status cuda_status(CUresult r, const std::string& what) {
    if (r == 0) return Status();
    return Status(r == kOutOfMemoryResult ? ErrorKind::kOutOfMemory : ErrorKind::kUnsupported,
                  what + ": " + driver_error_text(r));
}

void* CudaRawAllocator::allocate(size_t bytes, const std::string& what) {
    CUdeviceptr p = 0;
    CUresult r = api_.cuMemAlloc(&p, bytes ? bytes : 1);
    KILN_CHECK(r == 0, kOutOfMemory) << "cannot allocate " << bytes << " bytes of GPU memory for '" << what
                                     << "': " << driver_error_text(r);
    std::lock_guard<std::mutex> lock(mu_);
    in_use_ += bytes;
    peak_ = std::max(peak_, in_use_);
    return reinterpret_cast<void*>(p);
}

void CudaRawAllocator::deallocate(void* p, size_t bytes) {
    if (!p) return;
    api_.cuMemFree(dptr(p));
    std::lock_guard<std::mutex> lock(mu_);
    in_use_ -= std::min(in_use_, bytes);
}

size_t CudaRawAllocator::bytes_in_use() const {
    std::lock_guard<std::mutex> lock(mu_);
    return in_use_;
}

size_t CudaRawAllocator::peak_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return peak_;
}

CudaDevice::CudaDevice(const DriverApi& api, CUcontext ctx, std::string name, int arch, int sms, size_t total)
    : api_(api), ctx_(ctx), name_(std::move(name)), arch_(arch), sms_(sms), total_(total),
      raw_(std::make_shared<CudaRawAllocator>(api)) {}

CudaDevice* CudaDevice::get(std::string* why) {
    static const DeviceOnce once = [] {
        DeviceOnce o;
        const DriverApi* api = driver_api(&o.why);
        if (!api) return o;
        int count = 0;
        CUresult r = api->cuInit(0);
        if (r == 0) r = api->cuDeviceGetCount(&count);
        if (r != 0 || count == 0) {
            o.why = r != 0 ? "cuInit failed: " + driver_error_text(r) : "the CUDA driver sees no GPU";
            return o;
        }
        CUdevice d = 0;
        CUcontext ctx = nullptr;
        char name[256] = {0};
        int major = 0, minor = 0, sms = 0;
        size_t total = 0;
        r = api->cuDeviceGet(&d, 0);
        if (r == 0) r = api->cuDevicePrimaryCtxRetain(&ctx, d);
        if (r == 0) r = api->cuCtxSetCurrent(ctx);
        if (r == 0) r = api->cuDeviceGetName(name, sizeof(name) - 1, d);
        if (r == 0) r = api->cuDeviceGetAttribute(&major, kAttrComputeCapabilityMajor, d);
        if (r == 0) r = api->cuDeviceGetAttribute(&minor, kAttrComputeCapabilityMinor, d);
        if (r == 0) r = api->cuDeviceGetAttribute(&sms, kAttrMultiprocessorCount, d);
        if (r == 0) r = api->cuDeviceTotalMem(&total, d);
        if (r != 0) {
            o.why = "cannot open GPU 0: " + driver_error_text(r);
            return o;
        }
        o.dev = new CudaDevice(*api, ctx, std::string("cuda:0 (") + name + ")", major * 10 + minor, sms, total);
        return o;
    }();
    if (!once.dev && why) *why = once.why;
    if (once.dev) once.dev->make_current();
    return once.dev;
}

void CudaDevice::copy(void* dst, const void* src, size_t bytes) {
    if (bytes) check_cuda(api_.cuMemcpy(dptr(dst), dptr(src), bytes), "cuMemcpy of " + std::to_string(bytes) + " bytes");
}

void CudaDevice::make_current() const { api_.cuCtxSetCurrent(ctx_); }

std::shared_ptr<CachingAllocator> make_cuda_session_allocator(CudaDevice& dev, size_t budget_bytes) {
    std::shared_ptr<Allocator> parent = dev.raw_allocator();
    if (budget_bytes > 0) parent = std::make_shared<BudgetAllocator>(parent, budget_bytes);
    return std::make_shared<CachingAllocator>(parent);
}

}  // namespace kiln::runtime::cuda
