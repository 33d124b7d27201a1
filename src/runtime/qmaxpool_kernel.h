// A 2-D MaxPool on 8-bit tensors as a runtime kernel, "kiln_qmaxpool": what pass/fuse_qdq.h makes
// of QuantizeLinear(MaxPool(DequantizeLinear(x_q))) (a max commutes with the monotone maps), a
// ResNet's pool between its stem conv and its first block. Its point is the layout: between
// int8 kernels (compiler/int8_layout.h) x and y can be NHWC, where a pixel's channels are one
// contiguous run and the max is one byte-vector max per tap; the generated pool read and wrote
// NCHW, so dnnl_qconv reordered the stem's 64x112x112 output to NCHW for it (200 us at one
// thread) and each of the two convs after it reordered the pool's output back (50-60 us each).
// Padding never wins (ONNX pads a max pool with -inf: only the window's taps inside the input
// count); every window has one.
//
// Parameters: x, y (argument indices), src = N,C,H,W, out = OH,OW, kernel = KH,KW, strides,
// dilations, pads (begin; the end pads are implied by out), type = u8 | s8; x_layout, y_layout:
// nhwc (default: NCHW), each on its own.
#pragma once

#include <memory>
#include <vector>

#include "runtime/extern_kernel.h"

namespace kiln::runtime {

std::unique_ptr<ExternKernel> make_qmaxpool_kernel(const ExternParams& p, const std::vector<ExternArg>& args);

}  // namespace kiln::runtime
