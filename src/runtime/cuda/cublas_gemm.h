// cuBLAS as the vendor candidate for matrix products (the GPU counterpart of oneDNN's matmul on
// the CPU): FP32 sgemm on row-major operands, enqueued on a Kiln stream. Loaded at run time
// (runtime/cuda/cuda_api.h). Not yet chosen by the model compiler per workload (docs/gpu.md).
#pragma once

#include "runtime/cuda/cuda_program.h"
#include "runtime/cuda/cuda_stream.h"

namespace kiln::runtime::cuda {

class CublasGemm {
public:
    /// Throws kUnsupported when cuBLAS cannot be loaded or initialized. tf32: FP32 products may
    /// use TF32 tensor cores (CUBLAS_TF32_TENSOR_OP_MATH).
    explicit CublasGemm(CudaDevice& dev, bool tf32 = false);
    ~CublasGemm();
    CublasGemm(const CublasGemm&) = delete;
    CublasGemm& operator=(const CublasGemm&) = delete;

    /// C[m,n] = A[m,k] B[k,n], all row-major device arrays, on `stream` (asynchronous).
    Status sgemm_row_major(const CudaStream& stream, int m, int n, int k, const float* a, const float* b, float* c);
    /// The product `g` describes (beta 1 when g.init >= 0: the caller copied init into c), on
    /// arrays of g.dtype.
    Status gemm(const CudaStream& stream, const CudaGemmDesc& g, const void* a, const void* b, void* c);

private:
    const CublasApi* api_ = nullptr;
    cublasHandle_t handle_ = nullptr;
};

}  // namespace kiln::runtime::cuda
