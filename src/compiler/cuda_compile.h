// compile_cuda(Graph) -> CudaProgram: the GPU slice of compile() (compiler/compile.h). The same
// pass pipeline and fusion groups as on the CPU; each unit lowered with the default GPU schedule
// (compiler/cuda_lower.h) and compiled by NVRTC into the kernel cache; views (Reshape, Flatten,
// ...) alias their input's buffer; matrix products cuBLAS takes run there (their epilogues
// stay generated kernels); units only the CPU runtime's own kernels compute (TopK, CumSum,
// ScatterND) are placed on the host with copies around them (cpu_fallback). A node with no CUDA
// kernel and no such placement (an op without a TE compute) is a kUnsupported error naming it.
// Static shapes only (symbolic dims must be bound).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/cuda/cuda_program.h"

namespace kiln::compiler {

struct CudaCompileOptions {
    std::map<std::string, int64_t> dims;  // values of symbolic dims
    int opt_level = 3;
    int arch = 90;  // sm_<arch>: the GPU's compute capability (an H100 is 90)
    /// Matrix products on cuBLAS where it takes them (compiler/cuda_gemm_match.h) when cuBLAS
    /// loads on this machine; false: every kernel generated.
    bool use_cublas = true;
    /// Units the CPU runtime computes with its own kernel (TopK, CumSum, ScatterND) run on the
    /// host between device copies (the runner waits for the GPU there); false: kUnsupported.
    bool cpu_fallback = true;
};

struct CudaCompiledModel {
    std::shared_ptr<runtime::cuda::CudaProgram> program;
    int kernels = 0, compiled = 0;  // compiled: NVRTC runs (the rest came from the cache)
    int cublas_steps = 0;           // products on cuBLAS
    int host_steps = 0;             // steps placed on the CPU
    double seconds = 0;
    std::vector<std::string> kernel_sources;  // per kernel, the CUDA C (for inspection)
};

CudaCompiledModel compile_cuda(ir::Graph& g, const CudaCompileOptions& opts = {});

}  // namespace kiln::compiler
