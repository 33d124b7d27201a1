#include "runtime/cuda/cublas_gemm.h"

#include "support/error.h"

namespace kiln::runtime::cuda {

CublasGemm::CublasGemm(CudaDevice& dev, bool tf32) {
    std::string why;
    api_ = cublas_api(&why);
    KILN_CHECK(api_ != nullptr, kUnsupported) << "cuBLAS unavailable: " << why;
    dev.make_current();
    const cublasStatus_t s = api_->cublasCreate(&handle_);
    KILN_CHECK(s == 0, kUnsupported) << "cublasCreate failed with status " << s;
    const cublasStatus_t m = api_->cublasSetMathMode(handle_, tf32 ? kCublasTf32TensorOpMath : kCublasDefaultMath);
    KILN_CHECK(m == 0, kUnsupported) << "cublasSetMathMode failed with status " << m;
}

CublasGemm::~CublasGemm() {
    if (handle_) api_->cublasDestroy(handle_);
}

Status CublasGemm::sgemm_row_major(const CudaStream& stream, int m, int n, int k, const float* a, const float* b, float* c) {
    const float one = 1.f, zero = 0.f;
    cublasStatus_t s = api_->cublasSetStream(handle_, stream.get());
    // cuBLAS is column-major: row-major C = A B is column-major C^T = B^T A^T.
    if (s == 0) s = api_->cublasSgemm(handle_, kCublasOpN, kCublasOpN, n, m, k, &one, b, n, a, k, &zero, c, n);
    if (s != 0) return Status(ErrorKind::kUnsupported, "cublasSgemm failed with status " + std::to_string(s));
    return Status();
}

Status CublasGemm::gemm(const CudaStream& stream, const CudaGemmDesc& g, const void* a, const void* b, void* c) {
    const float beta = g.init >= 0 ? 1.f : 0.f;
    cublasStatus_t s = api_->cublasSetStream(handle_, stream.get());
    // Row-major C = A op(B) is column-major C^T = op(B)^T A^T: B's memory read column-major is
    // B^T (ld n) for transB=0, or the [K, N] matrix whose transpose we need (ld k) for transB=1.
    const int op_b = g.trans_b ? kCublasOpT : kCublasOpN, ldb = g.trans_b ? g.k : g.n;
    if (s != 0) return Status(ErrorKind::kUnsupported, "cublasSetStream failed with status " + std::to_string(s));
    if (g.dtype == DType::kFloat16) {  // FP16 operands, FP32 accumulation (tensor cores)
        s = api_->cublasGemmStridedBatchedEx(handle_, op_b, kCublasOpN, g.n, g.m, g.k, &g.alpha, b, kCudaR16F, ldb, g.stride_b,
                                             a, kCudaR16F, g.k, g.stride_a, &beta, c, kCudaR16F, g.n, g.stride_c, g.batch,
                                             kCublasCompute32F, kCublasGemmDefault);
        if (s != 0) return Status(ErrorKind::kUnsupported, "cublasGemmStridedBatchedEx (FP16) failed with status " + std::to_string(s));
        return Status();
    }
    auto f = [](const void* p) { return static_cast<const float*>(p); };
    s = api_->cublasSgemmStridedBatched(handle_, op_b, kCublasOpN, g.n, g.m, g.k, &g.alpha, f(b), ldb, g.stride_b, f(a), g.k,
                                        g.stride_a, &beta, static_cast<float*>(c), g.n, g.stride_c, g.batch);
    if (s != 0) return Status(ErrorKind::kUnsupported, "cublasSgemmStridedBatched failed with status " + std::to_string(s));
    return Status();
}

}  // namespace kiln::runtime::cuda
