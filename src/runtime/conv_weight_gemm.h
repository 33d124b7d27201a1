// A 2-D convolution's weight gradient as one GEMM over the whole batch, for the layers where
// oneDNN 2.6's jit backward-weights kernel is slow: small output planes (ResNet-18's 512
// channels on 4x4 ran at 17-30 GFLOP/s per thread, and each thread's blocked 9.4 MB result was
// reordered to plain and then added to the others').
//
//   dW[M, C*KH*KW] = dYp[M, N*OH*OW] . col[N*OH*OW, C*KH*KW]
//
// col is the input's im2col (row (n, oh, ow), column (c, kh, kw): zero where a window reads
// padding), dYp the output gradient with the batch moved next to the plane. Both are packed
// by all threads first (col's rows, dYp's channels split across them), then each
// thread runs oneDNN's single-threaded sgemm on its own block of dW's rows: the batch is
// reduced inside the GEMM, no partial sums, dW written once in Kiln's plain layout.
// DnnlConvBackward (dnnl_conv_backward.cc) chooses it; tests/runtime/conv_weight_gemm_test.cc
// checks it against a direct loop.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/kernel_abi.h"
#include "support/status.h"

namespace kiln::runtime {

struct ConvWeightGemmShape {
    int64_t n = 0, c = 0, h = 0, w = 0;  // X [N, C, H, W] (the buffer's H, W)
    int64_t crop_h = 0, crop_w = 0;      // rows / columns the windows read (<= h, w)
    int64_t m = 0, kh = 0, kw = 0;       // dW [M, C, KH, KW]
    int64_t oh = 0, ow = 0;              // dY [N, M, OH, OW]
    int64_t stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1, pad_t = 0, pad_l = 0;  // dil: ONNX's (1 = dense)
};

/// Whether the GEMM form is the faster weight gradient for `s` (measured on ResNet-18's layers):
/// output planes of at most 36 points, and strided 1x1 windows, of at least 16 MFLOP. KILN_CONV_WGRAD=gemm|dnnl
/// forces one or the other (for A/B measurements).
bool conv_weight_gemm_preferred(const ConvWeightGemmShape& s);

/// Rows [m0, m1) of dYp [M, N * OH * OW]: dY [N, M, OH, OW] with each channel's planes of all
/// images side by side (the batch moved next to the plane, the depth of a weight-gradient GEMM).
void pack_dy_by_channel(const ConvWeightGemmShape& s, const float* dy, float* dyp, int64_t m0, int64_t m1);

class ConvWeightGemm {
public:
    explicit ConvWeightGemm(const ConvWeightGemmShape& s);
    /// dW = the weight gradient of X and dY, on env's pool in up to `threads` blocks of rows.
    Status run(const float* x, const float* dy, float* dw, const kiln_kernel_env& env, int threads);

    /// The packing alone, for the tests: rows [p0, p1) of col [N*OH*OW, C*KH*KW].
    void im2col_rows(const float* x, float* col, int64_t p0, int64_t p1) const;

private:
    std::vector<float>* take();
    void give(std::vector<float>* b);

    ConvWeightGemmShape s_;
    int64_t rows_ = 0, cols_ = 0;  // dW's row length C*KH*KW, the GEMM's depth N*OH*OW
    std::mutex mu_;
    std::vector<std::unique_ptr<std::vector<float>>> all_;  // one col + dYp buffer per concurrent call
    std::vector<std::vector<float>*> free_;
};

}  // namespace kiln::runtime
