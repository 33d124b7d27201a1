// CudaProgram: a model compiled for the GPU, as data (the GPU counterpart of runtime/executable.h):
// buffers (inputs, outputs, constants, intermediates), one cubin per kernel, and the steps in
// order. A step launches its kernel's entries in order on one stream; its arguments are buffer
// ids (inputs, then outputs) followed by the kernel's scratch buffers (the stages between its
// entries). Built by compiler/cuda_compile.h, run by CudaRunner (runtime/cuda/cuda_runner.h).
#pragma once

#include <string>
#include <vector>

#include "runtime/executable.h"

namespace kiln::runtime::cuda {

struct CudaEntry {
    std::string name;  // __global__ function in the kernel's cubin
    unsigned grid = 1, block = 1;
};

struct CudaKernelDesc {
    std::string cubin;        // ELF image for cuModuleLoadData
    std::vector<CudaEntry> entries;
    std::vector<size_t> scratch_bytes;
    std::vector<std::string> scratch_names;
    std::string description;  // "MatMul+Add+Relu"
};

/// A product cuBLAS computes (the vendor candidate): out = alpha * A op(B) (+ the `init` buffer's
/// values, copied into out first: a Gemm's beta*C broadcast, materialized at compile time), all
/// row-major FP32; `batch` products at the given element strides.
struct CudaGemmDesc {
    int m = 0, n = 0, k = 0, batch = 1;
    long long stride_a = 0, stride_b = 0, stride_c = 0;
    bool trans_b = false;  // B is [N, K]
    float alpha = 1;
    int init = -1;  // buffer id of out's initial value (-1: none, beta 0)
};

struct CudaStepDesc {
    int kernel = -1;  // -1: a cuBLAS step (gemm), or a host step (host_extern)
    CudaGemmDesc gemm;  // args: A, B, then out
    /// Placement on the CPU: a runtime extern kernel (runtime/extern_kernel.h: TopK, CumSum,
    /// ScatterND) run on the host between copies of its inputs from and outputs to the device.
    std::string host_extern, host_params;
    int num_inputs = -1;  // of a host step
    std::vector<int> args;  // buffer ids: inputs, then outputs
    std::string node_name;
    double flops = 0;
};

struct CudaProgram {
    /// BufferDesc::arena_offset is unused: each buffer is its own allocation. A view (Reshape,
    /// Flatten...) has no buffer: its value maps to its input's id.
    std::vector<BufferDesc> buffers;
    std::vector<CudaKernelDesc> kernels;
    std::vector<CudaStepDesc> steps;
    std::vector<int> inputs, outputs;  // buffer ids in model order
    int arch = 90;                     // the sm_ the cubins are built for
};

}  // namespace kiln::runtime::cuda
