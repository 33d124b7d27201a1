// ONNX Runtime's MatMulNBits (com.microsoft): block-wise 2/4/8-bit weight-only quantized MatMul.
// Kiln dequantizes the constant weight once, at import, to a float (K, N) matrix in the scales'
// type; the node then imports as MatMul(A, W) [+ bias]. Memory and speed are those of the float
// model (no int kernel); the numbers are ORT's at accuracy_level 0/1 (A not quantized).
#pragma once

#include <string>

#include "support/tensor.h"

namespace kiln::frontend {

/// The quantized weight of one MatMulNBits node (its constant inputs and attributes).
struct NBitsWeight {
    const Tensor* b = nullptr;            // uint8 (N, k_blocks, blob_size), blob_size = block_size * bits / 8
    const Tensor* scales = nullptr;       // (N, k_blocks) or (N * k_blocks), float
    const Tensor* zero_points = nullptr;  // optional: uint8 packed (N, ceil(k_blocks * bits / 8)) or float (N, k_blocks)
    const Tensor* g_idx = nullptr;        // optional: int32 (K), the block of each k (default k / block_size)
    int64_t k = 0, n = 0, bits = 4, block_size = 0;
    std::string who;  // "node 'x' (MatMulNBits)", for errors
};

/// The dequantized (K, N) weight: W[k][n] = (q[n][k] - zero_point[n][block]) * scale[n][block],
/// zero point 2^(bits-1) when absent. Bad shapes or sizes are kInvalidModel naming `who`.
Tensor dequantize_nbits(const NBitsWeight& w);

}  // namespace kiln::frontend
