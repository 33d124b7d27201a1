// Gradients of If, Loop and Scan (reverse mode through control flow).
//
// A control-flow node's gradient is itself control flow whose regions are the vector-Jacobian
// products (autodiff::vjp) of the forward regions. Those regions read, besides their formal
// inputs, values of the enclosing scope by name (autodiff/region.h); such captured values are
// inputs of the node for autodiff and receive gradients. Built from existing ops only, run by
// the graph interpreter like any graph with regions.
//
//  - If(cond): the gradient is If(cond) whose branches are copies of the forward branches with
//    their VJP appended: each returns the gradients of every captured value the If needs
//    (zeros for values that branch does not read).
//  - Loop(M, cond, v0...) with body(i, c, v...) -> (c', v'..., s...): the forward Loop is
//    replaced by a copy that also stacks, per iteration, i, every carried value as it entered
//    the iteration and (LoopValues::kKeep, the default) every body value the backward reads
//    (extra scan outputs; autodiff/loop_values.h). N, the number of iterations run, is the
//    length of the stacked i, so a loop that ends early on its condition is differentiated for
//    the iterations it ran. The backward is Loop(N) with body(j, c, dv..., dC...): t = N-1-j
//    (reverse order), row t of the stacks, what the kept values do not give recomputed (with
//    kRecompute: the whole body), and the body's VJP seeded with dv (carried gradients) and
//    row t of the scan outputs' gradients; it carries dv (-> dv0 at the end) and accumulates
//    dC, the gradients of captured values.
//  - Scan (opset 9+): the same, with a reverse Scan as the backward: its scan inputs are the
//    stacked states, the forward scan inputs and the output gradients read in the opposite
//    direction; its scan outputs are the gradients of the scan inputs, written in the opposite
//    direction so that they land where the forward read them.
// Not differentiable (kUnsupported naming the node): sequences or optionals carried, captured
// or returned on a path, Scan-8 (sequence_lens), a carried value whose type changes across
// iterations or is not static, and ops inside the regions without a gradient.
#pragma once

#include <vector>

#include "autodiff/differentiate.h"
#include "ir/graph.h"

namespace kiln::autodiff {

/// Whether differentiate() builds `n`'s gradient here (If, Loop, Scan).
bool is_control_flow(const ir::Node& n);

struct ControlFlowGradient {
    /// One per value the node reads (its inputs, then its captured values); nullptr: none.
    std::vector<ir::Value*> grads;
    /// A forward Loop/Scan replaced by its copy with the kept outputs; it has no users left and
    /// differentiate() erases it when the walk is done.
    ir::Node* superseded = nullptr;
};

/// Appends to `g` the backward of `n` (see the file comment). `reads`: n's inputs then captured
/// values; `needs`: which reads want a gradient; `out_grads`: the gradient of each output of n
/// (nullptr: none).
ControlFlowGradient control_flow_gradient(ir::Graph& g, ir::Node& n, const std::vector<ir::Value*>& reads,
                                          const std::vector<bool>& needs, const std::vector<ir::Value*>& out_grads,
                                          LoopValues mode);

}  // namespace kiln::autodiff
