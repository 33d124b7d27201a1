// The gradients of a strided 1x1 convolution (ResNet's downsampling shortcuts) as one sgemm per
// image around a strided gather or scatter, for training steps on Kiln's plain NCHW buffers.
//
// With Xs[n, c, p] = X[n, c, oh*sh, ow*sw] (p = (oh, ow)), the forward conv is Y_n = W . Xs_n, so
//
//   dX_n = scatter(W^T . dY_n)            (zero at every pixel no window reads)
//   dW   = sum_n dY_n . Xs_n^T            (the batch reduced inside the sgemm calls, beta = 1)
//
// In ResNet-18's step on one Xeon thread the data gradients ran at 33-80 GFLOP/s in oneDNN 2.6's
// backward primitive and the weight gradients at 48-94 as im2col + sgemm (ConvWeightGemm, whose
// im2col reads one pixel per channel row); here the gather / scatter of a row of 2-stride pixels
// is one AVX-512 permute per 16 outputs, and each image's W^T . dY_n stays in L2 until spread.
// DnnlConvBackward (dnnl_conv_backward.cc) chooses it where conv_strided_1x1_applies;
// KILN_CONV_BWD_1X1=dnnl keeps oneDNN's primitive (A/B). tests/runtime/conv_strided_1x1_test.cc
// checks both gradients against float64 loops over the definition.
#pragma once

#include <cstdint>

#include "runtime/conv_weight_gemm.h"
#include "runtime/kernel_abi.h"
#include "support/status.h"

namespace kiln::runtime {

/// Whether `s` is a 2-D 1x1 conv with a stride above 1, no leading padding and every window
/// inside the read extents (crop_h, crop_w), its data gradient (`data`) or its weight gradient
/// on planes of at least 64 output points, and KILN_CONV_BWD_1X1 is not `dnnl`.
bool conv_strided_1x1_applies(const ConvWeightGemmShape& s, bool data);

class ConvStrided1x1 {
public:
    explicit ConvStrided1x1(const ConvWeightGemmShape& s) : s_(s) {}

    /// dX [N, C, H, W] of dY [N, M, OH, OW] and W [M, C]: parts of (image, block of channels);
    /// planes under 64 points pack dY first and split channels.
    Status run_data(const float* dy, const float* w, float* dx, const kiln_kernel_env& env, int threads) const;
    /// dW [M, C] of X [N, C, H, W] and dY: Xs packed by images, then blocks of dW's rows, one
    /// sgemm per image.
    Status run_weights(const float* x, const float* dy, float* dw, const kiln_kernel_env& env, int threads) const;

private:
    /// run_data for small planes: dY packed as [M, N * P], one sgemm per block of channels.
    Status run_data_packed(const float* dy, const float* w, float* dx, const kiln_kernel_env& env, int threads) const;
    /// dX[n, c] from one channel's W^T . dY_n (its plane of OH * OW points, contiguous).
    void spread_channel(const float* tmp_c, int64_t n, int64_t c, float* dx) const;

    ConvWeightGemmShape s_;
};

}  // namespace kiln::runtime
