// fuse_operators: partitions the graph into fusion groups (ir::Node::group), each of which
// lowers to one generated kernel. TVM's algorithm (relay/transforms/fuse_ops.cc) on Kiln's
// node graph:
//  1. the post-dominator tree: a node's immediate post-dominator is the lowest common ancestor,
//     in the tree, of all its users; a node read by a graph output (or by nobody) hangs at the
//     root, since its value must be materialized anyway;
//  2. nodes are visited in topological order; a node joins the group of its immediate
//     post-dominator when every node on every path between them is fusable with it, by the
//     ops' patterns (op::OpPattern):
//       - out-elemwise-fusable (Conv, MatMul, Gemm, pooling): its elementwise/broadcast
//         epilogue (bias, activation, residual add) — paths of elemwise/broadcast ops;
//       - comm-reduce (reductions): an elementwise/broadcast epilogue likewise;
//       - elemwise/broadcast: paths of injective ops ending in an injective op or a reduction
//         (the prologue of a reduction is computed inside it);
//       - injective (Transpose, Reshape, Concat, ...): paths and target all injective;
//       - opaque: never fused.
//     A group holds at most one out-elemwise-fusable or comm-reduce op (its anchor) and at
//     most kMaxGroupSize nodes.
//  3. groups of one node get no id (group -1); the others are numbered in order.
// The ops' TE computes compose, so lowering a group (compiler/lower_group.h) calls each
// member's compute on its producers' tensors and inlines the elementwise stages into one loop
// nest after the anchor's.
#pragma once

#include "pass/pass.h"

namespace kiln::pass {

constexpr int kMaxGroupSize = 64;

bool fuse_operators(ir::Graph& g, const PassContext& ctx);

}  // namespace kiln::pass
