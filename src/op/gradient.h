// GradientBuilder: what an op's gradient entry (OpDef::gradient) sees and may do.
//
// Reverse-mode autodiff (src/autodiff/differentiate.h) walks the forward nodes backwards and,
// for each node on a path from a differentiated value to the loss, calls the node's op row's
// `gradient` with a builder. The entry returns one value per node input: the gradient of the
// loss with respect to that input (same type as the input), or nullptr where the input needs no
// gradient or is not differentiable (an integer index, a shape, a Reshape target). A gradient
// is a graph built from existing ops through emit(); never a hand-written kernel.
//
// Shapes are static: autodiff runs on a graph whose inputs are bound (compiler's
// bind_input_shapes + shape inference), so entries may read input(i)->type().static_shape().
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::op {

class GradientBuilder {
public:
    virtual ~GradientBuilder() = default;

    /// The forward node being differentiated.
    virtual const ir::Node& node() const = 0;
    ir::Value* input(size_t i) const { return node().input(i); }
    ir::Value* output(size_t i) const { return node().output(i); }
    size_t num_inputs() const { return node().num_inputs(); }

    /// The gradient flowing into output i (same type as the output), or nullptr when output i
    /// does not reach the loss (its gradient is zero).
    virtual ir::Value* output_grad(size_t i) const = 0;
    /// output_grad(i), or a zero tensor of the output's type when it is nullptr.
    ir::Value* output_grad_or_zeros(size_t i);
    /// Whether input i's gradient is wanted (a differentiated value reaches it). Entries may
    /// skip the work for inputs that are not.
    virtual bool needs_grad(size_t i) const = 0;

    /// Appends a node of a registered op (inputs: nullptr for an omitted optional input). Its
    /// outputs are typed by the op's inference; the node is named after the forward node.
    virtual std::vector<ir::Value*> emit(const std::string& op, const std::vector<ir::Value*>& inputs,
                                         ir::AttrMap attrs = {}, int num_outputs = 1) = 0;
    /// emit() of a one-output node.
    ir::Value* emit1(const std::string& op, const std::vector<ir::Value*>& inputs, ir::AttrMap attrs = {});
    /// A constant (initializer) of the gradient graph.
    virtual ir::Value* constant(Tensor data) = 0;

    /// A rank-0 constant of `dtype` holding v.
    ir::Value* scalar(double v, DType dtype);
    /// A 1-D int64 constant (axes, shapes, starts/ends).
    ir::Value* ints(const std::vector<int64_t>& v);
    /// A tensor of type `like` filled with v.
    ir::Value* filled(const ir::TensorType& like, double v);
    /// Sums `grad` (of a broadcast result) over the axes numpy broadcasting expanded, so it has
    /// `target`'s shape: the gradient of a broadcast operand. Returns grad when shapes match.
    ir::Value* reduce_to_shape(ir::Value* grad, const ir::TensorType& target);
    /// Reshape of v to a static shape.
    ir::Value* reshape(ir::Value* v, const Shape& shape);
};

/// An op's gradient entry: one value per node input (nullptr: no gradient for that input).
using GradientFn = std::function<std::vector<ir::Value*>(GradientBuilder&)>;

}  // namespace kiln::op
