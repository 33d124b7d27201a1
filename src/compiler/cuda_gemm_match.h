// cuBLAS for matrix products (the vendor candidate on the GPU, as oneDNN is on the CPU): which
// MatMul/Gemm nodes cuBLAS takes, and taking them out of their fusion groups so that the
// product runs on cuBLAS and its epilogue (bias, activation) stays one generated kernel.
//
// Taken: FP32 or FP16 MatMul with a 2-D B (A's leading dims flattened into M) or with equal batch dims
// (strided batched), and Gemm with transA=0 whose C, if any, is a constant (beta*C
// broadcast to [M, N] is precomputed and copied into the output before the product).
#pragma once

#include <optional>

#include "ir/graph.h"
#include "runtime/cuda/cuda_program.h"

namespace kiln::compiler {

struct CublasChoice {
    runtime::cuda::CudaGemmDesc gemm;  // gemm.init is set by the caller (the buffer of `init`)
    Tensor init;                       // beta * C broadcast to the output (undefined: none)
};

/// The cuBLAS form of node `n`, or nullopt when cuBLAS does not take it.
std::optional<CublasChoice> cublas_choice(const ir::Node& n);

/// Gives every MatMul/Gemm that cuBLAS takes, and that no member of its group feeds, a unit of
/// its own (group -1).
void detach_cublas_anchors(ir::Graph& g);

}  // namespace kiln::compiler
