// transform_layout: rewrites 2-D float32 Conv (group 1, static shapes, constant weights, channel
// counts divisible by 8) into the blocked NCHW{c} layout (c = 16 when it divides the channels,
// else 8):
//   Conv(x, W, B)  ->  FromBlocked(KilnConv2dNCHWc(ToBlocked(x, ci), W', B'))
// with W' = Transpose(Reshape(W, [M/co, co, C/ci, ci, KH, KW]), [0, 2, 4, 5, 3, 1]) (OIHW{i}{o})
// and B' = Reshape(B, [M/co, co]), written as constant-only nodes that fold_constants evaluates
// (weights are packed at compile time). Then, to a fixed point:
//  - ToBlocked(FromBlocked(t)) with the same block is t (a chain of convs stays blocked);
//  - an elementwise op (Relu, Clip, LeakyRelu, Sigmoid, Tanh, HardSigmoid, HardSwish; Add, Sub,
//    Mul, Div) whose tensor operands are FromBlocked values of the same block, constants that
//    are scalars or per-channel, or (for a binary op with a blocked operand) NCHW values of the
//    output's type, runs in the blocked layout and the FromBlocked moves below it (per-channel
//    constants become Reshape(c, [C/c, 1, 1, c]) nodes, folded later; NCHW values get a shared
//    ToBlocked).
// So layout transforms remain only at the graph boundary and before ops that need NCHW.
#pragma once

#include "pass/pass.h"

namespace kiln::pass {

bool transform_layout(ir::Graph& g, const PassContext& ctx);

}  // namespace kiln::pass
