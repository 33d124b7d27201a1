// polyphase_conv_transpose: a ConvTranspose whose kernel is a multiple of its stride along every
// axis (HiFi-GAN's k = 2s, DCGAN's 4x4 stride 2), float32, static shapes, constant weights, one
// group, no dilation, explicit pads, a stride above 1, 1-D or with at most 64 output channels
// (2-D deconvolutions of more run as fast in oneDNN), becomes a stride-1 Conv producing every output phase as
// channels, a pixel shuffle and a crop:
//   y_full[s*t + p] = sum_j x[t - j] W[:, :, p + j*s]   (p < s, j < m = K/s, t < L + m - 1)
// is a cross-correlation of x (padded by m - 1 both sides) with the flipped taps of phase p:
//   Conv(x, Wc [M*S, C, m..], pads m-1)  [N, M*S, T..]     Wc[co*S + p, c, j] = W[c, co, p + (m-1-j)*s]
//   -> Reshape [N, M, s1, (s2,) T1, (T2)] -> Transpose (phases inside their positions)
//   -> Reshape [N, M, s1*T1, (s2*T2)] -> Slice [pads_begin, pads_begin + out)
// (S = s1*s2, p = p1*s2 + p2; the bias B[co] moves to Wc's channels co*S + p). Only where
// output_padding stays within pads_end (the crop never reaches past y_full, where the output
// would be the bias alone).
//
// Why: oneDNN 2.6's deconvolution of few channels over long signals ran at 10-50 GFLOP/s (a
// HiFi-GAN upsampler 32 -> 16 channels, k 4 s 2, to 16384 samples: 845 us, ORT 329); as a conv
// it takes Kiln's conv paths (blocked, generated or oneDNN) and the shuffle is a transpose.
// A kernel equal to the stride (m = 1) is left to the matmul-and-shuffle kernel
// (runtime/dnnl_deconv_shuffle.h).
#pragma once

#include "pass/pass.h"

namespace kiln::pass {

bool polyphase_conv_transpose(ir::Graph& g, const PassContext& ctx);

}  // namespace kiln::pass
