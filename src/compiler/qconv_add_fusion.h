// fuse_qconv_residual_adds: a quantized residual add joins the int8 conv that feeds it.
//
// A QDQ ResNet's block ends QLinearConv -> DequantizeLinear -> Add(+ the dequantized residual)
// -> QuantizeLinear: the conv one unit (dnnl_qconv), the add another (kiln_qadd, 16 of them
// 0.69 ms of ResNet-50's 10 at one thread), with the conv's 8-bit output written and read back
// in between. Where the conv's output feeds only that add (and is no graph output), the conv
// joins the add's group, and the unit runs as one dnnl_qconv with the add as oneDNN post-ops
// (topi::match_qconv_add: the conv's rounding kept exactly, the add's as ONNX Runtime's
// QLinearAdd computes it). Only where that match and oneDNN accept the merged unit; at most one
// conv per add (the later in the graph's order: its residual is then computed already).
#pragma once

#include "compiler/compile.h"

namespace kiln::compiler {

/// Merges such convs into their adds' groups (ir::Node::group). Needs oneDNN and a kernel
/// source other than generated; does nothing otherwise, nor with KILN_INT8_FUSE_ADD=0 (the
/// separate kiln_qadd, for comparisons).
void fuse_qconv_residual_adds(ir::Graph& g, KernelSource source, int threads);

}  // namespace kiln::compiler
