// A 2-D convolution's forward pass as one GEMM over the whole batch, for the layers where
// oneDNN 2.6's jit forward kernel is slow: small output planes (ResNet-18's 512 channels on 4x4
// ran at 59 GFLOP/s per thread in a training step, its weights reordered into a blocked layout
// on every call since a training step's weights change).
//
//   Yt[M, N*OH*OW] = W[M, C*KH*KW] . colT[C*KH*KW, N*OH*OW]
//
// colT is the input's im2col transposed (row (c, kh, kw), column (n, oh, ow): zero where a
// window reads padding), packed by all threads first (its rows split across them); then each
// thread runs oneDNN's single-threaded sgemm ('N','N': the fast form, conv_weight_gemm.cc) on
// its own block of W's rows, reading the plain [M, C, KH, KW] weights in place, and copies its
// rows of Yt into Y [N, M, OH, OW] (adding the bias). DnnlConv (dnnl_kernels.cc) chooses it;
// tests/runtime/conv_forward_gemm_test.cc checks it against a direct loop.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/conv_weight_gemm.h"
#include "runtime/kernel_abi.h"
#include "support/status.h"

namespace kiln::runtime {

/// Whether the GEMM form is the faster forward convolution for `s` (plain layouts, one group):
/// output planes of at most 36 points of at least 16 MFLOP, as for the weight gradient.
/// KILN_CONV_FWD=gemm|dnnl forces one or the other (for A/B measurements).
bool conv_forward_gemm_preferred(const ConvWeightGemmShape& s);

class ConvForwardGemm {
public:
    explicit ConvForwardGemm(const ConvWeightGemmShape& s);
    /// y = conv(x, w) + bias (bias may be null), on env's pool in up to `threads` blocks of
    /// output channels. w is plain [M, C, KH, KW].
    Status run(const float* x, const float* w, const float* bias, float* y, const kiln_kernel_env& env, int threads);

    /// The packing alone, for the tests: rows [r0, r1) of colT [C*KH*KW, N*OH*OW].
    void im2col_t_rows(const float* x, float* col_t, int64_t r0, int64_t r1) const;

private:
    std::vector<float>* take();
    void give(std::vector<float>* b);

    ConvWeightGemmShape s_;
    int64_t depth_ = 0, cols_ = 0;  // the GEMM's depth C*KH*KW, its columns N*OH*OW
    std::mutex mu_;
    std::vector<std::unique_ptr<std::vector<float>>> all_;  // one colT + Yt buffer per concurrent call
    std::vector<std::vector<float>*> free_;
};

}  // namespace kiln::runtime
