// Loading the CUDA tables once per process (function-local statics: thread-safe, and a failure
// is remembered with its reason).
#include "runtime/cuda/cuda_api.h"

#include <dlfcn.h>

#include <memory>

#include "runtime/cuda/cuda_libs.h"

namespace kiln::runtime::cuda {
namespace {

/// Resolves `name` (or, if absent, `fallback`) into *fn; records the first miss in *missing.
template <typename Fn>
void resolve(void* lib, Fn*& fn, const char* name, std::string* missing, const char* fallback = nullptr) {
    void* p = dlsym(lib, name);
    if (!p && fallback) p = dlsym(lib, fallback);
    if (!p && missing->empty()) *missing = name;
    fn = reinterpret_cast<Fn*>(p);
}


std::unique_ptr<DriverApi> load_driver(std::string& why) {
    std::string tried, path, missing;
    void* lib = open_cuda_library({"libcuda.so.1", "libcuda.so"}, &tried, &path);
    if (!lib) {
        why = "no CUDA driver (libcuda.so.1 not found: is an NVIDIA driver installed?); tried " + tried;
        return nullptr;
    }
    auto a = std::make_unique<DriverApi>();
    resolve(lib, a->cuInit, "cuInit", &missing);
    resolve(lib, a->cuDriverGetVersion, "cuDriverGetVersion", &missing);
    resolve(lib, a->cuDeviceGetCount, "cuDeviceGetCount", &missing);
    resolve(lib, a->cuDeviceGet, "cuDeviceGet", &missing);
    resolve(lib, a->cuDeviceGetName, "cuDeviceGetName", &missing);
    resolve(lib, a->cuDeviceGetAttribute, "cuDeviceGetAttribute", &missing);
    resolve(lib, a->cuDeviceTotalMem, "cuDeviceTotalMem_v2", &missing);
    resolve(lib, a->cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", &missing);
    resolve(lib, a->cuCtxSetCurrent, "cuCtxSetCurrent", &missing);
    resolve(lib, a->cuCtxSynchronize, "cuCtxSynchronize", &missing);
    resolve(lib, a->cuMemAlloc, "cuMemAlloc_v2", &missing);
    resolve(lib, a->cuMemFree, "cuMemFree_v2", &missing);
    resolve(lib, a->cuMemAllocHost, "cuMemAllocHost_v2", &missing);
    resolve(lib, a->cuMemFreeHost, "cuMemFreeHost", &missing);
    resolve(lib, a->cuMemcpy, "cuMemcpy", &missing);
    resolve(lib, a->cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", &missing);
    resolve(lib, a->cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", &missing);
    resolve(lib, a->cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", &missing);
    resolve(lib, a->cuStreamCreate, "cuStreamCreate", &missing);
    resolve(lib, a->cuStreamDestroy, "cuStreamDestroy_v2", &missing);
    resolve(lib, a->cuStreamSynchronize, "cuStreamSynchronize", &missing);
    resolve(lib, a->cuStreamWaitEvent, "cuStreamWaitEvent", &missing);
    resolve(lib, a->cuEventCreate, "cuEventCreate", &missing);
    resolve(lib, a->cuEventDestroy, "cuEventDestroy_v2", &missing);
    resolve(lib, a->cuEventRecord, "cuEventRecord", &missing);
    resolve(lib, a->cuEventSynchronize, "cuEventSynchronize", &missing);
    resolve(lib, a->cuEventElapsedTime, "cuEventElapsedTime_v2", &missing, "cuEventElapsedTime");
    resolve(lib, a->cuModuleLoadData, "cuModuleLoadData", &missing);
    resolve(lib, a->cuModuleUnload, "cuModuleUnload", &missing);
    resolve(lib, a->cuModuleGetFunction, "cuModuleGetFunction", &missing);
    resolve(lib, a->cuFuncGetAttribute, "cuFuncGetAttribute", &missing);
    resolve(lib, a->cuLaunchKernel, "cuLaunchKernel", &missing);
    resolve(lib, a->cuGetErrorString, "cuGetErrorString", &missing);
    std::string optional;  // graphs: absent means no CUDA graph replay, not no GPU
    resolve(lib, a->cuStreamBeginCapture, "cuStreamBeginCapture_v2", &optional);
    resolve(lib, a->cuStreamEndCapture, "cuStreamEndCapture", &optional);
    resolve(lib, a->cuGraphInstantiate, "cuGraphInstantiateWithFlags", &optional);
    resolve(lib, a->cuGraphLaunch, "cuGraphLaunch", &optional);
    resolve(lib, a->cuGraphExecDestroy, "cuGraphExecDestroy", &optional);
    resolve(lib, a->cuGraphDestroy, "cuGraphDestroy", &optional);
    resolve(lib, a->cuStreamCreateWithPriority, "cuStreamCreateWithPriority", &optional);
    resolve(lib, a->cuCtxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange", &optional);
    if (!missing.empty()) {
        why = path + " lacks " + missing + " (driver too old?)";
        return nullptr;
    }
    return a;
}

std::unique_ptr<NvrtcApi> load_nvrtc(std::string& why) {
    std::string tried, path, missing;
    void* lib = open_cuda_library({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}, &tried, &path);
    if (!lib) {
        why = "NVRTC not found (set KILN_CUDA_LIB_DIRS to the directory of libnvrtc.so.*); tried " + tried;
        return nullptr;
    }
    auto a = std::make_unique<NvrtcApi>();
    resolve(lib, a->nvrtcVersion, "nvrtcVersion", &missing);
    resolve(lib, a->nvrtcCreateProgram, "nvrtcCreateProgram", &missing);
    resolve(lib, a->nvrtcDestroyProgram, "nvrtcDestroyProgram", &missing);
    resolve(lib, a->nvrtcCompileProgram, "nvrtcCompileProgram", &missing);
    resolve(lib, a->nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize", &missing);
    resolve(lib, a->nvrtcGetProgramLog, "nvrtcGetProgramLog", &missing);
    resolve(lib, a->nvrtcGetCUBINSize, "nvrtcGetCUBINSize", &missing);
    resolve(lib, a->nvrtcGetCUBIN, "nvrtcGetCUBIN", &missing);
    resolve(lib, a->nvrtcGetErrorString, "nvrtcGetErrorString", &missing);
    if (!missing.empty()) {
        why = path + " lacks " + missing;
        return nullptr;
    }
    a->library = path;
    return a;
}

std::unique_ptr<CublasApi> load_cublas(std::string& why) {
    std::string tried, path, missing;
    void* lib = open_cuda_library({"libcublas.so.13", "libcublas.so.12", "libcublas.so"}, &tried, &path);
    if (!lib) {
        why = "cuBLAS not found; tried " + tried;
        return nullptr;
    }
    auto a = std::make_unique<CublasApi>();
    resolve(lib, a->cublasCreate, "cublasCreate_v2", &missing);
    resolve(lib, a->cublasDestroy, "cublasDestroy_v2", &missing);
    resolve(lib, a->cublasSetStream, "cublasSetStream_v2", &missing);
    resolve(lib, a->cublasSgemm, "cublasSgemm_v2", &missing);
    resolve(lib, a->cublasSgemmStridedBatched, "cublasSgemmStridedBatched", &missing);
    resolve(lib, a->cublasSetMathMode, "cublasSetMathMode", &missing);
    resolve(lib, a->cublasGemmStridedBatchedEx, "cublasGemmStridedBatchedEx", &missing);
    if (!missing.empty()) {
        why = path + " lacks " + missing;
        return nullptr;
    }
    return a;
}

std::unique_ptr<CudnnApi> load_cudnn(std::string& why) {
    std::string tried, path, missing;
    void* lib = open_cuda_library({"libcudnn.so.9"}, &tried, &path);
    if (!lib) {
        why = "cuDNN 9 not found; tried " + tried;
        return nullptr;
    }
    auto a = std::make_unique<CudnnApi>();
    resolve(lib, a->cudnnGetVersion, "cudnnGetVersion", &missing);
    resolve(lib, a->cudnnGetErrorString, "cudnnGetErrorString", &missing);
    resolve(lib, a->cudnnCreate, "cudnnCreate", &missing);
    resolve(lib, a->cudnnDestroy, "cudnnDestroy", &missing);
    resolve(lib, a->cudnnSetStream, "cudnnSetStream", &missing);
    resolve(lib, a->cudnnCreateTensorDescriptor, "cudnnCreateTensorDescriptor", &missing);
    resolve(lib, a->cudnnSetTensor4dDescriptor, "cudnnSetTensor4dDescriptor", &missing);
    resolve(lib, a->cudnnDestroyTensorDescriptor, "cudnnDestroyTensorDescriptor", &missing);
    resolve(lib, a->cudnnCreateFilterDescriptor, "cudnnCreateFilterDescriptor", &missing);
    resolve(lib, a->cudnnSetFilter4dDescriptor, "cudnnSetFilter4dDescriptor", &missing);
    resolve(lib, a->cudnnDestroyFilterDescriptor, "cudnnDestroyFilterDescriptor", &missing);
    resolve(lib, a->cudnnCreateConvolutionDescriptor, "cudnnCreateConvolutionDescriptor", &missing);
    resolve(lib, a->cudnnSetConvolution2dDescriptor, "cudnnSetConvolution2dDescriptor", &missing);
    resolve(lib, a->cudnnSetConvolutionGroupCount, "cudnnSetConvolutionGroupCount", &missing);
    resolve(lib, a->cudnnSetConvolutionMathType, "cudnnSetConvolutionMathType", &missing);
    resolve(lib, a->cudnnDestroyConvolutionDescriptor, "cudnnDestroyConvolutionDescriptor", &missing);
    resolve(lib, a->cudnnGetConvolutionForwardAlgorithm_v7, "cudnnGetConvolutionForwardAlgorithm_v7", &missing);
    resolve(lib, a->cudnnGetConvolutionForwardWorkspaceSize, "cudnnGetConvolutionForwardWorkspaceSize", &missing);
    resolve(lib, a->cudnnConvolutionForward, "cudnnConvolutionForward", &missing);
    if (!missing.empty()) {
        why = path + " lacks " + missing;
        return nullptr;
    }
    a->library = path;
    return a;
}

template <typename Api>
const Api* remembered(std::unique_ptr<Api> (*load)(std::string&), std::string* why) {
    struct Once {
        std::unique_ptr<Api> api;
        std::string why;
    };
    static const Once once = [&] {
        Once o;
        o.api = load(o.why);
        return o;
    }();
    if (!once.api && why) *why = once.why;
    return once.api.get();
}

}  // namespace

const DriverApi* driver_api(std::string* why) { return remembered<DriverApi>(load_driver, why); }
const NvrtcApi* nvrtc_api(std::string* why) { return remembered<NvrtcApi>(load_nvrtc, why); }
const CublasApi* cublas_api(std::string* why) { return remembered<CublasApi>(load_cublas, why); }
const CudnnApi* cudnn_api(std::string* why) { return remembered<CudnnApi>(load_cudnn, why); }

std::string driver_error_text(CUresult r) {
    const char* s = nullptr;
    if (const DriverApi* a = driver_api(nullptr); a && a->cuGetErrorString) a->cuGetErrorString(r, &s);
    return "CUDA error " + std::to_string(r) + (s ? std::string(": ") + s : std::string());
}

}  // namespace kiln::runtime::cuda
