// The CUDA libraries as tables of function pointers, loaded at run time (dlopen): Kiln links no
// CUDA library, so a machine without a driver runs on the CPU as before and only asking for the
// cuda device fails (with the reason). The types are the ABI types of cuda.h / nvrtc.h /
// cublas_api.h (opaque handles, int results), declared here so the build needs no CUDA headers;
// the symbols are the versioned ones cuda.h maps to (cuMemAlloc -> cuMemAlloc_v2 ...).
#pragma once

#include <cstddef>
#include <string>

namespace kiln::runtime::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;

inline constexpr int kAttrComputeCapabilityMajor = 75;  // CU_DEVICE_ATTRIBUTE_*
inline constexpr int kAttrComputeCapabilityMinor = 76;
inline constexpr int kAttrMultiprocessorCount = 16;
inline constexpr int kFuncAttrNumRegs = 4;              // CU_FUNC_ATTRIBUTE_NUM_REGS
inline constexpr int kFuncAttrSharedSizeBytes = 1;      // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
inline constexpr unsigned kStreamNonBlocking = 1;       // CU_STREAM_NON_BLOCKING
inline constexpr int kCaptureModeThreadLocal = 1;       // CU_STREAM_CAPTURE_MODE_THREAD_LOCAL

struct DriverApi {
    CUresult (*cuInit)(unsigned);
    CUresult (*cuDriverGetVersion)(int*);
    CUresult (*cuDeviceGetCount)(int*);
    CUresult (*cuDeviceGet)(CUdevice*, int);
    CUresult (*cuDeviceGetName)(char*, int, CUdevice);
    CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
    CUresult (*cuDeviceTotalMem)(size_t*, CUdevice);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuCtxSynchronize)();
    CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
    CUresult (*cuMemFree)(CUdeviceptr);
    CUresult (*cuMemAllocHost)(void**, size_t);
    CUresult (*cuMemFreeHost)(void*);
    CUresult (*cuMemcpy)(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);
    CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream);
    CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*cuStreamCreate)(CUstream*, unsigned);
    CUresult (*cuStreamDestroy)(CUstream);
    CUresult (*cuStreamSynchronize)(CUstream);
    CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned);
    CUresult (*cuEventCreate)(CUevent*, unsigned);
    CUresult (*cuEventDestroy)(CUevent);
    CUresult (*cuEventRecord)(CUevent, CUstream);
    CUresult (*cuEventSynchronize)(CUevent);
    CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
    CUresult (*cuModuleLoadData)(CUmodule*, const void*);
    CUresult (*cuModuleUnload)(CUmodule);
    CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
    CUresult (*cuFuncGetAttribute)(int*, int, CUfunction);
    CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                               CUstream, void**, void**);
    CUresult (*cuGetErrorString)(CUresult, const char**);
    // CUDA graphs (optional: null when the driver lacks them).
    CUresult (*cuStreamBeginCapture)(CUstream, int);
    CUresult (*cuStreamEndCapture)(CUstream, CUgraph*);
    CUresult (*cuGraphInstantiate)(CUgraphExec*, CUgraph, unsigned long long);
    CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
    CUresult (*cuGraphExecDestroy)(CUgraphExec);
    CUresult (*cuGraphDestroy)(CUgraph);
    // Stream priorities (optional: null means every stream has the default priority).
    CUresult (*cuStreamCreateWithPriority)(CUstream*, unsigned, int);
    CUresult (*cuCtxGetStreamPriorityRange)(int*, int*);
    bool has_graphs() const { return cuStreamBeginCapture && cuStreamEndCapture && cuGraphInstantiate && cuGraphLaunch; }
};

using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram*;

struct NvrtcApi {
    nvrtcResult (*nvrtcVersion)(int*, int*);
    nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                                      const char* const*);
    nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram*);
    nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char* const*);
    nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t*);
    nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char*);
    nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram, size_t*);
    nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram, char*);
    const char* (*nvrtcGetErrorString)(nvrtcResult);
    std::string library;  // the path dlopen found
};

using cublasHandle_t = struct cublasContext*;
using cublasStatus_t = int;
inline constexpr int kCublasOpN = 0, kCublasOpT = 1;

struct CublasApi {
    cublasStatus_t (*cublasCreate)(cublasHandle_t*);
    cublasStatus_t (*cublasDestroy)(cublasHandle_t);
    cublasStatus_t (*cublasSetStream)(cublasHandle_t, CUstream);
    cublasStatus_t (*cublasSgemm)(cublasHandle_t, int, int, int, int, int, const float*, const float*, int,
                                  const float*, int, const float*, float*, int);
    cublasStatus_t (*cublasSgemmStridedBatched)(cublasHandle_t, int, int, int, int, int, const float*,
                                                const float*, int, long long, const float*, int, long long,
                                                const float*, float*, int, long long, int);
    cublasStatus_t (*cublasSetMathMode)(cublasHandle_t, int);
    cublasStatus_t (*cublasGemmStridedBatchedEx)(cublasHandle_t, int, int, int, int, int, const void*, const void*, int,
                                                 int, long long, const void*, int, int, long long, const void*, void*,
                                                 int, int, long long, int, int, int);
};
inline constexpr int kCublasDefaultMath = 0, kCublasTf32TensorOpMath = 3;  // cublasMath_t
inline constexpr int kCudaR16F = 2, kCudaR32F = 0;                          // cudaDataType
inline constexpr int kCublasCompute32F = 68, kCublasGemmDefault = -1;

// cuDNN's legacy convolution API (cudnn_cnn.h / cudnn_ops.h of cuDNN 9: deprecated there but
// complete; the graph API would do the same with more code). Handles and descriptors are opaque.
using cudnnStatus_t = int;
using cudnnHandle_t = struct cudnnContext*;
using cudnnTensorDescriptor_t = struct cudnnTensorStruct*;
using cudnnFilterDescriptor_t = struct cudnnFilterStruct*;
using cudnnConvolutionDescriptor_t = struct cudnnConvolutionStruct*;
inline constexpr int kCudnnTensorNchw = 0, kCudnnDataFloat = 0, kCudnnDataHalf = 2, kCudnnCrossCorrelation = 1;
inline constexpr int kCudnnDefaultMath = 0, kCudnnTensorOpMath = 1, kCudnnFmaMath = 3;  // cudnnMathType_t
/// cudnnConvolutionFwdAlgo_t values Kiln names: the GEMM-like algorithms, whose FP32 results are
/// as accurate as a direct sum (FFT and Winograd trade accuracy for speed).
inline constexpr int kCudnnFwdImplicitGemm = 0, kCudnnFwdImplicitPrecompGemm = 1, kCudnnFwdGemm = 2,
                     kCudnnFwdDirect = 3, kCudnnFwdAlgoCount = 8;

struct CudnnFwdAlgoPerf {  // cudnnConvolutionFwdAlgoPerf_t
    int algo;
    cudnnStatus_t status;
    float time;
    size_t memory;
    int determinism;
    int math_type;
    int reserved[3];
};

struct CudnnApi {
    size_t (*cudnnGetVersion)();
    const char* (*cudnnGetErrorString)(cudnnStatus_t);
    cudnnStatus_t (*cudnnCreate)(cudnnHandle_t*);
    cudnnStatus_t (*cudnnDestroy)(cudnnHandle_t);
    cudnnStatus_t (*cudnnSetStream)(cudnnHandle_t, CUstream);
    cudnnStatus_t (*cudnnCreateTensorDescriptor)(cudnnTensorDescriptor_t*);
    cudnnStatus_t (*cudnnSetTensor4dDescriptor)(cudnnTensorDescriptor_t, int, int, int, int, int, int);
    cudnnStatus_t (*cudnnDestroyTensorDescriptor)(cudnnTensorDescriptor_t);
    cudnnStatus_t (*cudnnCreateFilterDescriptor)(cudnnFilterDescriptor_t*);
    cudnnStatus_t (*cudnnSetFilter4dDescriptor)(cudnnFilterDescriptor_t, int, int, int, int, int, int);
    cudnnStatus_t (*cudnnDestroyFilterDescriptor)(cudnnFilterDescriptor_t);
    cudnnStatus_t (*cudnnCreateConvolutionDescriptor)(cudnnConvolutionDescriptor_t*);
    cudnnStatus_t (*cudnnSetConvolution2dDescriptor)(cudnnConvolutionDescriptor_t, int, int, int, int, int, int, int, int);
    cudnnStatus_t (*cudnnSetConvolutionGroupCount)(cudnnConvolutionDescriptor_t, int);
    cudnnStatus_t (*cudnnSetConvolutionMathType)(cudnnConvolutionDescriptor_t, int);
    cudnnStatus_t (*cudnnDestroyConvolutionDescriptor)(cudnnConvolutionDescriptor_t);
    cudnnStatus_t (*cudnnGetConvolutionForwardAlgorithm_v7)(cudnnHandle_t, cudnnTensorDescriptor_t, cudnnFilterDescriptor_t,
                                                            cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t, int, int*,
                                                            CudnnFwdAlgoPerf*);
    cudnnStatus_t (*cudnnGetConvolutionForwardWorkspaceSize)(cudnnHandle_t, cudnnTensorDescriptor_t, cudnnFilterDescriptor_t,
                                                             cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t, int,
                                                             size_t*);
    cudnnStatus_t (*cudnnConvolutionForward)(cudnnHandle_t, const void*, cudnnTensorDescriptor_t, const void*,
                                             cudnnFilterDescriptor_t, const void*, cudnnConvolutionDescriptor_t, int, void*,
                                             size_t, const void*, cudnnTensorDescriptor_t, void*);
    std::string library;  // the path dlopen found
};

/// The driver API (libcuda.so.1), or nullptr with the reason in *why (no driver, a symbol missing).
const DriverApi* driver_api(std::string* why);
/// NVRTC (libnvrtc.so.13/.12/...), or nullptr with the reason. Needs no GPU and no driver.
const NvrtcApi* nvrtc_api(std::string* why);
/// cuBLAS (libcublas.so.13/.12/...), or nullptr with the reason.
const CublasApi* cublas_api(std::string* why);
/// cuDNN 9 (libcudnn.so.9, which loads its sub-libraries beside it), or nullptr with the reason.
/// Loading needs no GPU; creating a handle does.
const CudnnApi* cudnn_api(std::string* why);

/// "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory"-like text for a driver result.
std::string driver_error_text(CUresult r);

}  // namespace kiln::runtime::cuda
