// Compile-time evaluation of one node whose result does not depend on runtime data.
//
// A node folds when every tensor its compute reads is a constant (Shape and Size read no
// tensor at all: their result is the input's static shape) and its outputs are small. It is
// evaluated through the op's own TE compute, lowered unscheduled and run by the tir interpreter
// (STYLE rule 7: no second evaluator) or, for large results, compiled as a kernel (at -O1); a
// reshape-like node (is_view_op) is what the runtime makes of it, a view of its input's bytes.
// Its outputs become graph constants that keep the outputs' names. This is what makes Shape -> Gather -> Concat -> Reshape chains (PyTorch
// exports) compile: the Reshape target becomes a constant before Reshape is inferred.
// The pass pipeline's evaluator (PassContext::evaluate, src/pass) is this function.
#pragma once

#include "ir/graph.h"

namespace kiln::compiler {

/// Largest output (elements, all outputs together) folded: bigger results stay kernels so
/// weights are not duplicated into new constants.
constexpr int64_t kMaxFoldedElements = 1 << 16;

/// From this many output elements a fold runs as a compiled kernel (cached like every kernel)
/// instead of the tir interpreter: ResNet-50's BatchNorm folding and weight packing take 1.7 s
/// interpreted.
constexpr int64_t kCompiledFoldElements = 1 << 15;

/// Folds `n` if it qualifies (types must be inferred). Returns true if the node was replaced
/// by constants and erased.
bool fold_constant_node(ir::Graph& g, ir::Node* n, int64_t max_elements = kMaxFoldedElements);

/// Folds each node of `nodes` that qualifies, as fold_constant_node, with the kernels of the
/// compiled ones built together (codegen::compile_c_kernels: a cold compile runs one compiler
/// process per few kernels instead of one per kernel). No node of `nodes` may read another's
/// output. Returns how many were folded.
int fold_constant_nodes(ir::Graph& g, const std::vector<ir::Node*>& nodes, int64_t max_elements = kMaxFoldedElements);

}  // namespace kiln::compiler
