#include "runtime/cuda/cuda_stream.h"

namespace kiln::runtime::cuda {

CudaStream::CudaStream(CudaDevice& dev, Priority priority) : dev_(dev) {
    dev.make_current();
    const DriverApi& api = dev.api();
    int least = 0, greatest = 0;  // CUDA: a smaller number is a higher priority
    if (priority != Priority::kDefault && api.cuStreamCreateWithPriority && api.cuCtxGetStreamPriorityRange &&
        api.cuCtxGetStreamPriorityRange(&least, &greatest) == 0) {
        check_cuda(api.cuStreamCreateWithPriority(&s_, kStreamNonBlocking, priority == Priority::kHigh ? greatest : least),
                   "cuStreamCreateWithPriority");
        return;
    }
    check_cuda(api.cuStreamCreate(&s_, kStreamNonBlocking), "cuStreamCreate");
}

CudaStream::~CudaStream() {
    if (s_) dev_.api().cuStreamDestroy(s_);
}

Status CudaStream::synchronize() const { return cuda_status(dev_.api().cuStreamSynchronize(s_), "cuStreamSynchronize"); }

CudaEvent::CudaEvent(CudaDevice& dev) : dev_(dev) {
    dev.make_current();
    check_cuda(dev.api().cuEventCreate(&e_, 0), "cuEventCreate");
}

CudaEvent::~CudaEvent() {
    if (e_) dev_.api().cuEventDestroy(e_);
}

Status CudaEvent::record(const CudaStream& s) { return cuda_status(dev_.api().cuEventRecord(e_, s.get()), "cuEventRecord"); }

Status CudaEvent::synchronize() const { return cuda_status(dev_.api().cuEventSynchronize(e_), "cuEventSynchronize"); }

float CudaEvent::elapsed_ms(const CudaEvent& start, const CudaEvent& end) {
    float ms = 0;
    if (start.dev_.api().cuEventElapsedTime(&ms, start.e_, end.e_) != 0) return -1;
    return ms;
}

PinnedBuffer::~PinnedBuffer() {
    if (p_) dev_.api().cuMemFreeHost(p_);
}

void* PinnedBuffer::reserve(size_t bytes) {
    if (bytes <= bytes_ && p_) return p_;
    if (p_) dev_.api().cuMemFreeHost(p_);
    p_ = nullptr;
    bytes_ = 0;
    check_cuda(dev_.api().cuMemAllocHost(&p_, bytes ? bytes : 1), "cuMemAllocHost of " + std::to_string(bytes) + " bytes");
    bytes_ = bytes;
    return p_;
}

Status copy_to_device_async(CudaDevice& dev, void* dst, const void* src, size_t bytes, const CudaStream& s) {
    if (!bytes) return Status();
    return cuda_status(dev.api().cuMemcpyHtoDAsync(dptr(dst), src, bytes, s.get()), "copy to GPU");
}

Status copy_to_host_async(CudaDevice& dev, void* dst, const void* src, size_t bytes, const CudaStream& s) {
    if (!bytes) return Status();
    return cuda_status(dev.api().cuMemcpyDtoHAsync(dst, dptr(src), bytes, s.get()), "copy from GPU");
}

}  // namespace kiln::runtime::cuda
