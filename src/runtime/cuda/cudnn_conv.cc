#include "runtime/cuda/cudnn_conv.h"

#include "support/error.h"

namespace kiln::runtime::cuda {
namespace {

std::string cudnn_text(const CudnnApi& api, cudnnStatus_t s) {
    const char* t = api.cudnnGetErrorString ? api.cudnnGetErrorString(s) : nullptr;
    return "cuDNN status " + std::to_string(s) + (t ? std::string(" (") + t + ")" : std::string());
}

void check_cudnn(const CudnnApi& api, cudnnStatus_t s, const std::string& what) {
    KILN_CHECK(s == 0, kUnsupported) << what << " failed: " << cudnn_text(api, s);
}

bool accurate_in_fp32(int algo) {
    return algo == kCudnnFwdImplicitGemm || algo == kCudnnFwdImplicitPrecompGemm || algo == kCudnnFwdGemm ||
           algo == kCudnnFwdDirect;
}

}  // namespace

CudnnHandle::CudnnHandle(CudaDevice& dev) {
    std::string why;
    api_ = cudnn_api(&why);
    KILN_CHECK(api_ != nullptr, kUnsupported) << "cuDNN unavailable: " << why;
    dev.make_current();
    check_cudnn(*api_, api_->cudnnCreate(&handle_), "cudnnCreate");
}

CudnnHandle::~CudnnHandle() {
    if (handle_) api_->cudnnDestroy(handle_);
}

Status CudnnHandle::set_stream(const CudaStream& s) const {
    const cudnnStatus_t r = api_->cudnnSetStream(handle_, s.get());
    if (r != 0) return Status(ErrorKind::kUnsupported, "cudnnSetStream failed: " + cudnn_text(*api_, r));
    return Status();
}

CudnnConv::CudnnConv(const CudnnHandle& handle, const CudaConvDesc& d, bool tf32, size_t max_workspace,
                     const std::string& what)
    : h_(handle), what_(what) {
    const CudnnApi& a = h_.api();
    const bool half = d.dtype == DType::kFloat16;
    const int data = half ? kCudnnDataHalf : kCudnnDataFloat;
    const bool fp32_only = !half && !tf32;  // FMA arithmetic and the accurate algorithms
    try {
        check_cudnn(a, a.cudnnCreateTensorDescriptor(&x_), what + ": input descriptor");
        check_cudnn(a, a.cudnnCreateTensorDescriptor(&y_), what + ": output descriptor");
        check_cudnn(a, a.cudnnCreateFilterDescriptor(&w_), what + ": filter descriptor");
        check_cudnn(a, a.cudnnCreateConvolutionDescriptor(&conv_), what + ": convolution descriptor");
        check_cudnn(a, a.cudnnSetTensor4dDescriptor(x_, kCudnnTensorNchw, data, d.n, d.c, d.h, d.w),
                    what + ": input [" + std::to_string(d.n) + "," + std::to_string(d.c) + "," + std::to_string(d.h) + "," +
                        std::to_string(d.w) + "]");
        check_cudnn(a, a.cudnnSetTensor4dDescriptor(y_, kCudnnTensorNchw, data, d.n, d.k, d.oh, d.ow),
                    what + ": output descriptor");
        check_cudnn(a, a.cudnnSetFilter4dDescriptor(w_, data, kCudnnTensorNchw, d.k, d.c / d.group, d.kh, d.kw),
                    what + ": filter");
        check_cudnn(a, a.cudnnSetConvolution2dDescriptor(conv_, d.pad_h, d.pad_w, d.stride_h, d.stride_w, d.dil_h, d.dil_w,
                                                         kCudnnCrossCorrelation, kCudnnDataFloat),
                    what + ": convolution");
        check_cudnn(a, a.cudnnSetConvolutionGroupCount(conv_, d.group), what + ": group count");
        const int math = half ? kCudnnTensorOpMath : tf32 ? kCudnnDefaultMath : kCudnnFmaMath;
        check_cudnn(a, a.cudnnSetConvolutionMathType(conv_, math), what + ": math type");
        CudnnFwdAlgoPerf perf[kCudnnFwdAlgoCount] = {};
        int returned = 0;
        check_cudnn(a, a.cudnnGetConvolutionForwardAlgorithm_v7(h_.get(), x_, w_, conv_, y_, kCudnnFwdAlgoCount, &returned, perf),
                    what + ": algorithm heuristics");
        for (int i = 0; i < returned && algo_ < 0; ++i) {
            if (perf[i].status != 0 || (fp32_only && !accurate_in_fp32(perf[i].algo))) continue;
            size_t bytes = 0;
            if (a.cudnnGetConvolutionForwardWorkspaceSize(h_.get(), x_, w_, conv_, y_, perf[i].algo, &bytes) != 0) continue;
            if (bytes > max_workspace) continue;
            algo_ = perf[i].algo;
            workspace_ = bytes;
        }
        KILN_CHECK(algo_ >= 0, kUnsupported) << what << ": cuDNN offers no " << (fp32_only ? "FP32-accurate " : "")
                                             << "algorithm within a workspace of " << max_workspace << " bytes ("
                                             << returned << " ranked)";
    } catch (...) {
        release();  // the destructor does not run for a constructor that throws
        throw;
    }
}

CudnnConv::~CudnnConv() { release(); }

void CudnnConv::release() {
    const CudnnApi& a = h_.api();
    if (conv_) a.cudnnDestroyConvolutionDescriptor(conv_);
    if (w_) a.cudnnDestroyFilterDescriptor(w_);
    if (y_) a.cudnnDestroyTensorDescriptor(y_);
    if (x_) a.cudnnDestroyTensorDescriptor(x_);
    conv_ = nullptr;
    w_ = nullptr;
    x_ = y_ = nullptr;
}

Status CudnnConv::enqueue(const void* x, const void* w, void* y, void* workspace) const {
    const float one = 1.f, zero = 0.f;
    const CudnnApi& a = h_.api();
    const cudnnStatus_t s =
        a.cudnnConvolutionForward(h_.get(), &one, x_, x, w_, w, conv_, algo_, workspace, workspace_, &zero, y_, y);
    if (s != 0) return Status(ErrorKind::kUnsupported, "cudnnConvolutionForward of " + what_ + " failed: " + cudnn_text(a, s));
    return Status();
}

}  // namespace kiln::runtime::cuda
