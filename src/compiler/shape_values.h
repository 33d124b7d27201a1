// Shape arithmetic on the symbolic path (issue 23, docs/dynamic_shapes.md): exporters compute
// Reshape / Expand / Slice / Range operands from Shape(x) (Shape -> Gather -> Unsqueeze ->
// Concat -> Reshape, `x.size()[:-1] + (12, 32)`, Expand's -1 convention through Equal/Where).
// With symbolic dims those values are no constants the compiler can fold; this pass tracks them
// as dim expressions instead and rewrites their consumers so that no shape value is left:
//
//   Reshape(x, s)   -> Reshape(x, constant): an entry equal to x's dim there becomes 0 (copy),
//                      one other symbolic entry -1 (inferred as a dim expression: batch*seq)
//   Expand(x, s)    -> Expand(x, constant): a symbolic entry equal to x's dim there becomes 1
//   Slice(c, 0, d)  -> Gather(c, KilnDimRange(input){axis}) along the sliced axis, d a dim of an
//                      input (position ids sliced from a buffer); Range(0, d, 1) -> KilnDimRange
//   anything whose inputs are then constants folds (ConstantOfShape, the -1 masks)
//
// then drops the dead Shape chains. A shape value it cannot follow stays, and the compile that
// follows refuses it (the session then compiles per shape).
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "ir/graph.h"
#include "support/dim_poly.h"

namespace kiln::compiler {

/// The elements of a small integer (or bool) tensor as dim expressions, row-major.
struct ShapeValue {
    DType dtype = DType::kInt64;
    Shape shape;
    std::vector<DimPoly> v;
    bool is_constant() const;
};

/// What `n` computes as a shape value from its inputs' shape values (`of` gives them; nullopt
/// for an input that is none): Shape, Gather, Unsqueeze/Squeeze/Reshape/Flatten/Identity,
/// Concat, Slice (constant operands), Cast, Add/Sub/Mul/Div, Equal, Where; nullopt otherwise.
std::optional<ShapeValue> eval_shape_value(const ir::Node& n,
                                           const std::function<std::optional<ShapeValue>(const ir::Value*)>& of);

/// Runs the rewrites above on a graph whose inputs carry their symbolic dims. Returns the
/// number of nodes rewritten.
int fold_shape_values(ir::Graph& g);

}  // namespace kiln::compiler
