// Row kernels for the GPU: a LayerNormalization or Softmax over the last axis as one launch, one
// block per row, instead of the generated kernel's six stage launches (partial sums, sums,
// statistics, normalization: each a grid-wide barrier). The block reduces its row with warp
// shuffles and a shared-memory step, reading the row three times (max or mean, then the
// centred sum, then the output): the two-pass arithmetic of op/defs/norm.cc and
// softmax_family.cc, so the results match the CPU's kernels to rounding. FP32 or FP16 storage,
// FP32 arithmetic; exp is the prelude's kiln_exp_f32, as in generated kernels.
//
// The source is CUDA C over the same prelude as generated kernels (codegen/cuda_prelude.h), one
// __global__ entry, arguments as a generated kernel's: inputs (X, Scale[, B]) then the output.
// The shuffles need a warp's lanes at once, so the CUDA emulation test cannot run them: the GPU
// tests compare them with the CPU.
#pragma once

#include <cstdint>

#include "codegen/cuda_emitter.h"
#include "support/dtype.h"

namespace kiln::codegen {

struct RowKernelSpec {
    enum class Kind { kLayerNorm, kSoftmax } kind = Kind::kSoftmax;
    int64_t rows = 0, cols = 0;
    DType dtype = DType::kFloat32;  // of X, Scale, B and Y
    double epsilon = 1e-5;          // LayerNormalization
    bool has_bias = false;          // LayerNormalization's B
};

/// Threads per block for rows of `cols`: one per element up to 256, in whole warps.
int64_t row_kernel_block(int64_t cols);

CudaKernel emit_row_kernel(const RowKernelSpec& s);

}  // namespace kiln::codegen
