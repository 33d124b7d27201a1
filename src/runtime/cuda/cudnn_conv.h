// cuDNN as the vendor candidate for convolutions (the GPU counterpart of oneDNN's convolution on
// the CPU): one CudnnConv per Conv step, its descriptors made and its algorithm chosen once (by
// cuDNN's heuristics, in its order), then enqueued on a Kiln stream. Loaded at run time
// (runtime/cuda/cuda_api.h).
#pragma once

#include "runtime/cuda/cuda_program.h"
#include "runtime/cuda/cuda_stream.h"

namespace kiln::runtime::cuda {

/// A cuDNN handle on the device (throws kUnsupported when cuDNN cannot be loaded or initialized).
class CudnnHandle {
public:
    explicit CudnnHandle(CudaDevice& dev);
    ~CudnnHandle();
    CudnnHandle(const CudnnHandle&) = delete;
    CudnnHandle& operator=(const CudnnHandle&) = delete;
    const CudnnApi& api() const { return *api_; }
    cudnnHandle_t get() const { return handle_; }
    Status set_stream(const CudaStream& s) const;

private:
    const CudnnApi* api_ = nullptr;
    cudnnHandle_t handle_ = nullptr;
};

class CudnnConv {
public:
    /// Chooses the algorithm: the first of cuDNN's heuristic ranking that runs with a workspace
    /// of at most `max_workspace` bytes; in FP32 (tf32 false) only FMA arithmetic and the
    /// GEMM-like algorithms, whose results are as accurate as a direct sum (FFT and Winograd
    /// lose bits); FP16 data (d.dtype) with tensor cores, accumulating in FP32. Throws
    /// kUnsupported naming `what` when none qualifies.
    CudnnConv(const CudnnHandle& handle, const CudaConvDesc& d, bool tf32, size_t max_workspace, const std::string& what);
    ~CudnnConv();
    CudnnConv(const CudnnConv&) = delete;
    CudnnConv& operator=(const CudnnConv&) = delete;

    size_t workspace_bytes() const { return workspace_; }
    int algorithm() const { return algo_; }
    /// y = conv(x, w) on the handle's stream (asynchronous); `workspace` has workspace_bytes().
    Status enqueue(const void* x, const void* w, void* y, void* workspace) const;

private:
    void release();

    const CudnnHandle& h_;
    cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
    cudnnFilterDescriptor_t w_ = nullptr;
    cudnnConvolutionDescriptor_t conv_ = nullptr;
    int algo_ = -1;
    size_t workspace_ = 0;
    std::string what_;
};

}  // namespace kiln::runtime::cuda
