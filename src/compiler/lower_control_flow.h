// lower_control_flow: a graph whose top level compiles except for its If/Loop/Scan nodes becomes
// a VM program (runtime/vm/program.h) for one set of input shapes.
//
// Each function (the top level, an If branch, a Loop or Scan body) is cut at its control-flow
// nodes: every maximal run of other nodes between them is one segment, compiled with compile()
// into one Executable (fused kernels, planned memory) and called by a kCall; an Identity of a
// value already in a register is a kMove. A branch or body is lowered the same way, recursively,
// for the shapes it sees: If branches for the shapes of the values they capture, a Loop body
// for its carried values' shapes (compiled once when its carried outputs keep those shapes),
// a Scan body for one slice. Values a body reads from enclosing scopes are passed as its
// params, except constants, which are baked into its segments (weights packed at compile).
//
// What does not compile stays correct, in the graph interpreter: a segment compile() refuses (a
// Slice whose starts come from the loop counter, a shape known only at run time) runs as an
// interpreted segment, with the types the model declares; an If branch that compile()
// refuses (or that cannot be compiled at these shapes, e.g. the untaken side of a shape test)
// runs in the interpreter when taken; a Loop/Scan whose body changes its carried shapes, or
// holds what the lowering cannot take, runs whole in the interpreter. Each such fallback is
// counted and explained in ControlFlowLowering::notes. A segment that reads a value whose shape
// is not known at lowering time (a fallback's output, a scan output of a loop that may stop
// early) is interpreted too; a Loop body whose carried output shape is unknown at lowering time
// is checked at run time, every iteration.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "ir/graph.h"
#include "runtime/allocator.h"
#include "runtime/thread_pool.h"
#include "runtime/vm/program.h"

namespace kiln::compiler {

struct ControlFlowLowering {
    std::shared_ptr<runtime::vm::Program> program;
    int segments = 0;            // straight-line pieces compiled to executables
    int bodies_compiled = 0;     // If branches, Loop and Scan bodies compiled
    int bodies_interpreted = 0;  // ... left to the graph interpreter
    int segments_interpreted = 0;  // straight-line pieces compile() refused, in the interpreter
    int kernels = 0;             // kernels (steps) of all executables
    std::vector<std::string> notes;  // one line per interpreted body: which and why
};

struct LowerContext {
    CompileOptions compile;
    runtime::ThreadPool* pool = nullptr;  // the executables' intra-op pool (must outlive the program)
    runtime::Allocator* alloc = nullptr;
};

/// Why the VM cannot take `g` ("" when it can): what host_only_reason() says of the top level
/// leaving If/Loop/Scan nodes aside, or a control-flow node producing a non-tensor.
std::string vm_refusal(const ir::Graph& g);

/// Lowers `g` (not modified) for inputs of these shapes (in graph-input order); the inputs named
/// in `frozen` are constants of the program with those values (shape-deciding inputs: the
/// caller keeps one program per value). Throws kiln::Error when a top-level piece cannot be
/// compiled.
ControlFlowLowering lower_control_flow(const ir::Graph& g, const std::vector<Shape>& input_shapes,
                                       const LowerContext& ctx, const std::map<std::string, Tensor>& frozen = {});

/// Graph inputs whose data decides a shape: reaching, through the top level's nodes (not through
/// Shape or Size), an input a node reads as a value (ConstantOfShape's shape, Reshape's target).
std::set<std::string> shape_deciding_inputs(const ir::Graph& g);

/// Whether `op` is lowered to a VM control-flow instruction.
bool is_control_flow_op(const std::string& op);

}  // namespace kiln::compiler
