// Streams, events and pinned host staging on the CUDA device. A run enqueues its copies and
// kernels on one stream and synchronizes once at the end; events time it on the GPU.
#pragma once

#include <cstddef>

#include "runtime/cuda/cuda_device.h"
#include "support/status.h"

namespace kiln::runtime::cuda {

class CudaStream {
public:
    /// The GPU's scheduling class of a stream's work: its blocks go first (real-time), after
    /// everything else (best-effort), or as any stream's.
    enum class Priority { kDefault, kHigh, kLow };
    /// A non-blocking stream of `dev` (throws kiln::Error if the driver refuses). A priority
    /// the driver cannot give (no cuStreamCreateWithPriority) is the default.
    explicit CudaStream(CudaDevice& dev, Priority priority = Priority::kDefault);
    ~CudaStream();
    CudaStream(const CudaStream&) = delete;
    CudaStream& operator=(const CudaStream&) = delete;
    CUstream get() const { return s_; }
    Status synchronize() const;

private:
    CudaDevice& dev_;
    CUstream s_ = nullptr;
};

class CudaEvent {
public:
    explicit CudaEvent(CudaDevice& dev);
    ~CudaEvent();
    CudaEvent(const CudaEvent&) = delete;
    CudaEvent& operator=(const CudaEvent&) = delete;
    CUevent get() const { return e_; }
    Status record(const CudaStream& s);
    Status synchronize() const;
    /// Milliseconds between two recorded (and completed) events.
    static float elapsed_ms(const CudaEvent& start, const CudaEvent& end);

private:
    CudaDevice& dev_;
    CUevent e_ = nullptr;
};

/// Page-locked host memory that grows on demand: asynchronous copies go through it (a copy from
/// pageable memory would make the driver stage it synchronously).
class PinnedBuffer {
public:
    explicit PinnedBuffer(CudaDevice& dev) : dev_(dev) {}
    ~PinnedBuffer();
    PinnedBuffer(const PinnedBuffer&) = delete;
    PinnedBuffer& operator=(const PinnedBuffer&) = delete;
    /// At least `bytes` of pinned memory (previous contents lost when it grows).
    void* reserve(size_t bytes);

private:
    CudaDevice& dev_;
    void* p_ = nullptr;
    size_t bytes_ = 0;
};

/// Enqueues host -> device / device -> host copies on `s` (host memory should be pinned to be
/// truly asynchronous; the caller keeps it alive until the stream reaches the copy).
Status copy_to_device_async(CudaDevice& dev, void* dst, const void* src, size_t bytes, const CudaStream& s);
Status copy_to_host_async(CudaDevice& dev, void* dst, const void* src, size_t bytes, const CudaStream& s);

}  // namespace kiln::runtime::cuda
