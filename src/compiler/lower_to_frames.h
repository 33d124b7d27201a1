// lower_to_frames: rewrites If and Loop into TF1's control-flow primitives (Switch, Merge, Enter,
// Exit, NextIteration; op/defs/tf_control_flow.cc) so that their sub-graphs' nodes become ordinary
// nodes of the one graph, compiled to ordinary (fused) kernels, which the frames executor
// (runtime/frame_executor.h) runs in frames with iteration ids.
//
// If(c) {then, else}: each outer value a branch reads goes through Switch(v, c) (the true side
// for then, the false side for else); each branch output y goes through a gating Switch too (y
// may be a constant or an outer value), and output k is Merge(then_k, else_k).
// Loop(M?, cond?, v...) in frame F (the node's name): a counter i (from 0), the cond (when given)
// and each v enter F through Enter -> Merge; p = (i < M) and cond; Switch(merge, p) sends each
// to Exit (false side: the Loop's outputs) or into the body (true side: iter_num, cond_in, v_in);
// outer values the body reads enter once as loop invariants (Enter constant=1); the body's
// results, gated by Switch(y, p), go to NextIteration, which feeds the Merge of the same slot in
// the next iteration. Nested If/Loop lower recursively into child frames.
// A scan output is a loop-carried stack [M, ...] of zeros whose row i iteration i writes with
// Where(iota == i, y, stack) (one fused elementwise kernel; like `acc +`, this cheap chain is all
// that links the iterations). Its length is compiled in, so the Loop must run exactly M times: M
// constant, and no cond or a constant true one the body passes on (else kUnsupported).
// Not taken: a Loop with neither M nor cond.
#pragma once

#include <cstdint>

#include "ir/graph.h"

namespace kiln::compiler {

struct FramesLoweringOptions {
    /// Iterations of one loop frame that may run at once (TF's parallel_iterations; >= 1).
    int parallel_iterations = 10;
    /// A loop that would start more iterations than this is an error naming it (0 = no bound).
    int64_t max_iterations = 0;
};

/// Replaces every If and Loop node of `g` (and those nested in their sub-graphs) by control-flow
/// primitives. Throws kiln::Error naming the node for what it does not take.
void lower_to_frames(ir::Graph& g, const FramesLoweringOptions& opts = {});

}  // namespace kiln::compiler
