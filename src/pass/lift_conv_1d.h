// lift_conv_1d: a 1-D convolution (float32, static shapes, constant weights) becomes a 2-D one
// over a unit height, so that transform_layout runs it blocked like any 2-D conv:
//   Conv(x [N, C, W], W [M, C/G, K])  ->  Reshape(Conv(Reshape(x, [N, C, 1, W]),
//                                                      Reshape(W, [M, C/G, 1, K])), [N, M, W'])
// with kernel_shape [1, K], strides [1, s], dilations [1, d] and pads [0, p0, 0, p1]. Then, to a
// fixed point, the elementwise ops between lifted convs are lifted too (the squeezing Reshape
// moves below them: a unary op, or Add / Sub / Mul / Div whose other operand is lifted, a
// constant or a value reshaped to rank 4), and Reshape [N, C, 1, W] of a squeezed [N, C, 1, W]
// value is that value. A stack of 1-D convs with its activations, residual adds and GELUs is
// then one 2-D region between the graph's input and output reshapes.
//
// Why: oneDNN computes 1-D convs on nwc while Kiln keeps 1-D activations ncw, so every 1-D
// conv transposed its input and output (about 130 of a TCN layer's 750 us); lifted and blocked,
// a stack of them runs in nCw16c throughout (docs/kernels.md, "1-D convolutions").
#pragma once

#include "pass/pass.h"

namespace kiln::pass {

bool lift_conv_1d(ir::Graph& g, const PassContext& ctx);

}  // namespace kiln::pass
