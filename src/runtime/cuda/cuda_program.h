// CudaProgram: a model compiled for the GPU, as data (the GPU counterpart of runtime/executable.h):
// buffers (inputs, outputs, constants, intermediates), one cubin per kernel, and the steps in
// order. A step launches its kernel's entries in order on one stream; its arguments are buffer
// ids (inputs, then outputs) followed by the kernel's scratch buffers (the stages between its
// entries). Built by compiler/cuda_compile.h, run by CudaRunner (runtime/cuda/cuda_runner.h).
#pragma once

#include <memory>
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
    /// Its entries take the stop flag and their cut flag after the scratch buffers
    /// (codegen::CudaEmitOptions::stop_flag).
    bool stoppable = false;
};

/// A product cuBLAS computes (the vendor candidate): out = alpha * A op(B) (+ the `init` buffer's
/// values, copied into out first: a Gemm's beta*C broadcast, materialized at compile time), all
/// row-major FP32 or FP16; `batch` products at the given element strides.
struct CudaGemmDesc {
    int m = 0, n = 0, k = 0, batch = 1;
    long long stride_a = 0, stride_b = 0, stride_c = 0;
    bool trans_b = false;  // B is [N, K]
    float alpha = 1;
    DType dtype = DType::kFloat32;  // of A, B and out: FP32, or FP16 (FP32 accumulation)
    int init = -1;  // buffer id of out's initial value (-1: none, beta 0)
};

/// A 2-D convolution cuDNN computes (the vendor candidate for Conv): NCHW input [n, c, h, w],
/// weights [k, c / group, kh, kw], output [n, k, oh, ow], symmetric pads; no bias (the compiler
/// moves a Conv's bias into the generated epilogue). A 1-D convolution is one with h = kh = 1.
struct CudaConvDesc {
    int n = 0, c = 0, h = 0, w = 0, k = 0, kh = 0, kw = 0, oh = 0, ow = 0;
    int pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1, group = 1;
    DType dtype = DType::kFloat32;  // of X, W and Y: FP32, or FP16 (FP32 accumulation)
    double flops() const { return 2.0 * n * k * oh * ow * (static_cast<double>(c) / group) * kh * kw; }
};

struct CudaStepDesc {
    int kernel = -1;  // -1: a cuBLAS step (gemm), a cuDNN step (conv) or a host step (host_extern/_program)
    CudaGemmDesc gemm;  // args: A, B, then out
    bool is_conv = false;
    CudaConvDesc conv;  // a cuDNN step: args X, W, then Y
    /// Placement on the CPU: a runtime extern kernel (runtime/extern_kernel.h: TopK, CumSum,
    /// ScatterND) run on the host between copies of its inputs from and outputs to the device.
    std::string host_extern, host_params;
    /// Or a CPU program of the step's nodes (a unit pinned to the CPU): its inputs and outputs
    /// are the step's args in order.
    std::shared_ptr<Executable> host_program;
    int num_inputs = -1;  // args[0, num_inputs) are read, the rest written
    std::vector<int> args;  // buffer ids: inputs, then outputs
    std::string node_name;
    double flops = 0;
};

struct CudaProgram {
    /// An intermediate with BufferDesc::arena_offset >= 0 lives at that offset in one device
    /// arena of arena_bytes (the compiler's static plan); every other buffer is its own
    /// allocation. A view (Reshape,
    /// Flatten...) has no buffer: its value maps to its input's id.
    std::vector<BufferDesc> buffers;
    std::vector<CudaKernelDesc> kernels;
    std::vector<CudaStepDesc> steps;
    std::vector<int> inputs, outputs;  // buffer ids in model order
    size_t arena_bytes = 0;
    int arch = 90;                     // the sm_ the cubins are built for
    /// cuBLAS and cuDNN may use TF32 tensor cores for FP32 products (PyTorch's
    /// allow_tf32): ~10 mantissa bits per product; false: FP32 arithmetic throughout.
    bool tf32 = false;
};

}  // namespace kiln::runtime::cuda
