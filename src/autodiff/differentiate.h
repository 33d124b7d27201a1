// differentiate(): reverse-mode automatic differentiation of an ir::Graph.
//
// Given a scalar `loss` value of the graph and the values to differentiate with respect to
// (`wrt`, by default every float initializer), appends to the same graph the nodes computing
// d loss / d w for each w, built by chaining the ops' gradient entries (OpDef::gradient,
// op/gradient.h) in reverse topological order and summing the contributions of values used more
// than once. The forward nodes are untouched; the result is one graph that the pass pipeline
// fuses and the planner lays out.
//
// Preconditions: the graph's shapes are static (inputs bound, types inferred); `loss` is a
// float scalar (rank 0 or one element).
// Which paths are differentiated: a value is differentiable when its dtype is floating point;
// integer and bool values (indices, shapes, masks) stop a path, so Shape -> Reshape target is
// recognized as non-differentiable, not guessed. A node on a path from a `wrt` value to the
// loss whose op has no gradient entry is a kUnsupported error naming the node and the op.
//
// Control flow: If, Loop and Scan are differentiated by autodiff/control_flow_gradient.h (their
// gradients are sub-graphs differentiated with vjp()); the values their regions read from the
// enclosing scope count as inputs of the node and receive gradients. A Loop or Scan on a path is
// replaced by a copy that also outputs the per-iteration state its backward loop reads: its
// outputs keep their names and uses (graph outputs included), but a Value* of them held from
// before the call is stale (the old node is erased): look such values up again by name.
//
// Naming: every node differentiate() adds is named "grad/<forward node name or op>", and every
// gradient value "grad/<value name>" where it is the final gradient of a wrt value. The names are
// for people reading the graph: the nodes' role (ir::NodeRole::kBackward) is what the recompute
// pass (autodiff/recompute.h) and the pipeline's split tell forward from backward nodes by.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::autodiff {

/// The prefix of the names of nodes and values differentiate() adds.
inline constexpr const char* kGradPrefix = "grad/";

/// What the backward of a Loop or Scan reads of its forward's per-iteration values
/// (autodiff/loop_values.h).
enum class LoopValues {
    kKeep,       // the forward stacks every value the backward reads: memory for speed
    kRecompute,  // the forward stacks the carried values only; the backward runs the body again
};

struct GradientOptions {
    /// The gradient seed (d loss / d loss): 1 by default; a loss scale multiplies it.
    double seed = 1.0;
    LoopValues loop_values = LoopValues::kKeep;
};

struct Gradients {
    /// d loss / d w for each requested w, in `wrt` order (a zero constant when w does not reach
    /// the loss).
    std::vector<ir::Value*> grads;
};

/// Appends the backward nodes of `loss` with respect to `wrt` to `g` (see the file comment).
Gradients differentiate(ir::Graph& g, ir::Value* loss, const std::vector<ir::Value*>& wrt,
                        const GradientOptions& opts = {});

/// Vector-Jacobian product: appends to `g` the nodes of sum_k dys[k] . d ys[k] / d w for each w
/// in `wrt` (dys[k] has ys[k]'s type; nullptr: ys[k] carries no gradient). A w that no seeded
/// y depends on gets nullptr. Node names as differentiate(); values keep their fresh names. The
/// building block of differentiate() and of the gradients of control-flow regions.
std::vector<ir::Value*> vjp(ir::Graph& g, const std::vector<ir::Value*>& ys, const std::vector<ir::Value*>& dys,
                            const std::vector<ir::Value*>& wrt, LoopValues loop_values = LoopValues::kKeep);

/// Every floating-point constant of `g` (the trainable parameters by default), in order.
std::vector<ir::Value*> float_constants(const ir::Graph& g);

/// Whether a node was added by differentiate() (its role, ir::NodeRole::kBackward; the name
/// prefix is for people reading the graph).
bool is_backward_node(const ir::Node& n);

}  // namespace kiln::autodiff
