// Lowering of one kernel: a fusion group (pass/fuse_operators.h) or a single node.
//
// The members' TE computes compose: each member's compute is called on the tensors of its
// producers inside the group (placeholders for values from outside), so the group is one TE
// program. Scheduling: every member's output stage that has no reduction and is not a group
// output is inlined into its consumers (the elementwise chain becomes the expression of one
// loop nest); the anchor (the group's conv/matmul/reduction, if any) gets its op's schedule;
// the remaining stages (the group outputs, stages an op keeps materialized such as a conv's
// padded input) get op::default_schedule. The result is one tir function, one C kernel.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "op/op_def.h"
#include "te/schedule_config.h"
#include "tir/stmt.h"

namespace kiln::compiler {

/// One step of the executable: the nodes it computes, in order.
struct KernelUnit {
    std::vector<ir::Node*> nodes;
    std::vector<ir::Value*> inputs;   // distinct values read from outside the unit, first-use order
    std::vector<ir::Value*> outputs;  // values read outside the unit or graph outputs
    std::string ops() const;          // "Conv+Add+Relu"
};

/// The graph's kernels in an execution order: nodes with the same group id >= 0 form one
/// unit, every other node its own; units are ordered topologically (ties by first node).
std::vector<KernelUnit> partition_kernels(const ir::Graph& g);

struct LoweredKernel {
    std::string description;  // ops of the unit
    std::string node_name;    // the anchor's (or first node's) name
    tir::PrimFunc func;
    std::string source;
    bool async_copy = false;  // the runtime's built-in async copy: no func, no source
    /// An extern kernel (runtime/extern_kernel.h): no func, no source.
    std::string extern_name, extern_params;
    /// A TF1 control step (runtime KernelDesc::control): no func, no source.
    std::string control, control_params;
    int num_inputs = -1;      // StepDesc::num_inputs
    double flops = 0;         // StepDesc::flops
    /// The schedule templates' knobs (te/schedule_config.h) and the values they took.
    std::vector<te::Knob> space;
    te::KnobValues knobs;
    /// Indices of the unit inputs the output may be computed in place of (the memory plan's
    /// candidates; the kernel is then emitted without `restrict`). Filled when lower_unit is
    /// asked (params_may_alias) and the schedule allows it.
    std::vector<int> inplace_inputs;
    /// A kernel of several outputs: (output, input) index pairs where the output may be written
    /// over the input's memory, the input donated by the caller (compiler/donation.h). Filled
    /// when lower_unit is asked (`donations`); the kernel is then emitted without `restrict`.
    std::vector<std::pair<int, int>> donatable;
};

/// The symbolic dims of a symbolic compile (docs/dynamic_shapes.md): each symbol of the
/// graph's shapes as a te dim Var, in Executable::dims order.
struct SymbolicDims {
    std::vector<std::string> names;
    std::vector<te::Var> vars;
    /// Adds `name` if new; its index.
    int add(const std::string& name);
    /// The dims of `t` as expressions (kInternal for a symbol not added).
    std::vector<te::Expr> of(const ir::TensorType& t) const;
    /// The index of a dim Var, -1 when it is none of them.
    int index_of(const te::VarNode* v) const;
};

/// A unit's members composed into one TE program (before any schedule).
struct ComposedUnit {
    std::vector<te::Tensor> params;  // placeholders of the unit's inputs, in order
    std::vector<te::Tensor> outs;    // the tensors of the unit's outputs, in order
    const ir::Node* anchor = nullptr;  // the conv/matmul/reduction member (or the single node)
    const op::OpDef* anchor_def = nullptr;
    std::vector<te::Tensor> anchor_outs;
    std::set<const te::TensorNode*> node_outputs;  // every member's returned tensors
    double flops = 0;
};
/// Calls each member's compute on its producers' tensors (placeholders for the unit's inputs).
ComposedUnit compose_unit(const KernelUnit& unit, const SymbolicDims* dims = nullptr);
/// Inlines every member output that is neither a unit output nor a reduction (nor a small
/// reduction epilogue): the elementwise chains become expressions of their consumers' nests.
void inline_unit_members(te::Schedule& sch, const KernelUnit& unit, const ComposedUnit& c);

/// Lowers a unit to one kernel whose parameters are the unit's inputs then its outputs.
/// `params_may_alias`: the memory plan may compute the output in place of an input: the kernel
/// lists the inputs its schedule allows (LoweredKernel::inplace_inputs; in a preemptible compile
/// only kernels of one stage) and, when there are any, is emitted without `restrict`.
/// `knobs`: the schedule templates' tunable choices (empty: the untuned defaults).
/// `dims`: a symbolic compile's dims; the unit's tensors are then built over them and the
/// kernel takes those it uses as parameters (tir PrimFunc::dims). `threads`: the intra-op
/// threads it will run on (te::ScheduleConfig::threads, a hint for the parallel split).
/// `preemptible`: its runs will be preempted (te::ScheduleConfig::preemptible).
/// `donations`: a kernel of several outputs lists the inputs each may be written over
/// (LoweredKernel::donatable).
LoweredKernel lower_unit(const KernelUnit& unit, bool params_may_alias, const te::KnobValues& knobs = {},
                         const SymbolicDims* dims = nullptr, int threads = 1, bool preemptible = false,
                         bool donations = false);

/// Estimated floating-point operations of one run of the unit (StepDesc::flops).
double unit_flops(const KernelUnit& unit);

}  // namespace kiln::compiler
