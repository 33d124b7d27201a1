// transform_layout: rewrites 2-D float32 convolutions (static shapes, constant weights) into the
// blocked NCHW{c} layout (c = 16 when it divides the channels, else 8, or with
// PassContext::nhwc_8_channel_blocks c = C, NHWC; an operand that is already blocked keeps its block):
//   Conv(x, W, B)  ->  FromBlocked(KilnConv2dNCHWc(ToBlocked(x, ci), W', B'))     (group 1)
// with W' = Transpose(Reshape(W, [M/co, co, C/ci, ci, KH, KW]), [0, 2, 4, 5, 3, 1]) (OIHW{i}{o})
// and B' = Reshape(B, [M/co, co]); fewer than 8 input channels (an image's colours) are one
// block (ci = C). A depthwise Conv (group = C = M, W [C, 1, KH, KW]) becomes
//   FromBlocked(KilnDepthwiseConv2dNCHWc(ToBlocked(x, c), Transpose(Reshape(W, [C/c, c, KH, KW]),
//   [0, 2, 3, 1]), Reshape(B, [C/c, c])))
// The packing nodes are constant-only: fold_constants evaluates them (weights are packed at
// compile time). Then, to a fixed point, FromBlocked moves below the ops that can run blocked:
//  - ToBlocked(FromBlocked(t)) with the same block is t (a chain of convs stays blocked);
//  - an elementwise op (Relu, Clip, LeakyRelu, Sigmoid, Tanh, HardSigmoid, HardSwish, Erf; Add, Sub,
//    Mul, Div) whose tensor operands are FromBlocked values of the same block, constants that
//    are scalars or per-channel, or (for a binary op with a blocked operand) NCHW values of the
//    output's type, runs in the blocked layout (per-channel constants become
//    Reshape(c, [C/c, 1, 1, c]) nodes, folded later; NCHW values get a shared ToBlocked);
//  - MaxPool (Indices unused), AveragePool, GlobalAveragePool, GlobalMaxPool of a FromBlocked
//    value become Kiln<op>NCHWc (op/defs/blocked_ops.cc);
//  - Concat on axis 1 with a FromBlocked operand, every operand's channels a multiple of its
//    block, concatenates the 5-D blocked tensors on axis 1 (NCHW operands get a ToBlocked).
// So layout transforms remain only at the graph boundary and before ops that need NCHW.
#pragma once

#include "pass/pass.h"

namespace kiln::pass {

bool transform_layout(ir::Graph& g, const PassContext& ctx);

}  // namespace kiln::pass
