// OpDef: one table row per operator (STYLE rule 3). Every layer reads the row; none owns a
// per-op switch. Fields:
//  - schema: name, claimed ONNX since-versions, input/output arity, attribute specs;
//  - infer: output types from input types, attributes and constant inputs;
//  - pattern: the fusion pattern (TVM's OpPatternKind);
//  - compute: the op's meaning as tensor expressions over placeholders of its inputs;
//  - schedule: the default CPU schedule for the op's stages (optional; a generic one is used);
//  - host: a host kernel (op/host.h) for what compute cannot express; the graph interpreter runs it;
//  - gradient: the op's reverse-mode derivative as a graph of existing ops (op/gradient.h).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "op/gradient.h"
#include "op/host.h"
#include "te/schedule.h"

namespace kiln::op {

/// TVM's fusion patterns, ordered: a smaller value fuses more freely.
enum class OpPattern { kElemWise = 0, kBroadcast = 1, kInjective = 2, kCommReduce = 3, kOutEWiseFusable = 4, kTuple = 7, kOpaque = 8 };
const char* op_pattern_name(OpPattern p);
/// A fusion group's anchor: the one non-injective op (conv/matmul/pooling or a reduction) whose
/// elementwise prologue/epilogue the group gathers; a group holds at most one.
inline bool is_fusion_anchor(OpPattern p) { return p == OpPattern::kOutEWiseFusable || p == OpPattern::kCommReduce; }

enum class AttrKind { kInt, kFloat, kString, kInts, kFloats, kStrings, kTensor, kGraph };

struct AttrSpec {
    std::string name;
    AttrKind kind;
    std::optional<ir::Attr> default_value;  // nullopt + !required: optional without default
    bool required = false;
};

/// What compute receives for one node.
struct ComputeArgs {
    const ir::Node& node;
    /// One placeholder per node input (nullptr for an omitted optional input). Shapes are static.
    std::vector<te::Tensor> inputs;
    /// Static output types (after inference).
    std::vector<ir::TensorType> output_types;
    /// Symbolic compiles only (docs/dynamic_shapes.md): each output's dims as expressions of
    /// the kernel's dim Vars; empty when every shape is static. Ops whose compute reads
    /// out_dims() build over these (te::sym_compute); others see only static shapes.
    std::vector<std::vector<te::Expr>> output_dims;

    const te::Tensor& in(size_t i) const { return inputs.at(i); }
    bool has_input(size_t i) const { return i < inputs.size() && inputs[i] != nullptr; }
    /// Constant data of input i, or nullptr if it is not a constant.
    const Tensor* constant_input(size_t i) const;
    Shape out_shape(size_t i = 0) const { return output_types.at(i).static_shape(); }
    DType out_dtype(size_t i = 0) const { return output_types.at(i).dtype; }
    /// Output i's dims as expressions: output_dims[i], else the static shape as IntImms.
    std::vector<te::Expr> out_dims(size_t i = 0) const;
};

using InferFn = std::function<std::vector<ir::TensorType>(const ir::Node&)>;
using ComputeFn = std::function<std::vector<te::Tensor>(const ComputeArgs&)>;
/// Schedules the stages computing `outputs` (and their intermediate stages) in `s`.
using ScheduleFn = std::function<void(te::Schedule& s, const std::vector<te::Tensor>& outputs)>;

struct OpDef {
    std::string name;
    /// ONNX since-versions Kiln implements, ascending (e.g. {1, 6, 13, 14} for Relu). A model
    /// opset selects the largest entry <= it; none selectable is an Unsupported error.
    std::vector<int> onnx_versions;
    /// ONNX operator domain: "" is ai.onnx; "ai.onnx.ml" for the traditional-ML ops. A node's
    /// domain must match; onnx_versions count in that domain's opset.
    std::string domain;
    /// An op the passes introduce (KilnConv2dNCHWc, the layout transforms), not an ONNX op: it has
    /// no onnx_versions and the importer rejects it by name.
    bool internal = false;
    int min_inputs = 1, max_inputs = 1;
    int min_outputs = 1, max_outputs = 1;
    std::vector<AttrSpec> attrs;
    /// Input slots whose *values* shape the output (Reshape's shape): they must be constants
    /// at compile time (the session specializes on them when they are graph inputs).
    std::vector<int> value_inputs;
    InferFn infer;
    OpPattern pattern = OpPattern::kOpaque;
    ComputeFn compute;
    ScheduleFn schedule;  // may be empty: compiler uses default_schedule()
    /// Host kernel (op/host.h). An op without compute runs only in the graph interpreter
    /// (Session picks it for such models); an op with both uses host for what compute cannot
    /// take (string tensors, sequences: see compiler/graph_interpreter.cc).
    HostFn host;
    /// Estimated floating-point operations of one evaluation with static types (2 per
    /// multiply-accumulate); empty: one per output element. Feeds the profiler's GFLOP/s.
    std::function<double(const ir::Node&)> flops;
    /// A TF1 control-flow primitive (Switch, Merge, Enter, Exit, NextIteration; defs/tf_control_flow.cc):
    /// no compute; compile() makes it a control step that only the frames executor runs
    /// (runtime/frame_executor.h).
    bool frame_control = false;
    /// Dead-code elimination keeps the node though no IR edge reads its outputs (NextIteration
    /// feeds its Merge through the executor's frame, not through an edge).
    bool has_side_effect = false;
    /// Reverse-mode gradient (op/gradient.h; src/autodiff calls it). Empty: the op has no
    /// gradient, and differentiating through it is a kUnsupported error naming the node.
    GradientFn gradient;
};

/// Generic CPU schedule: for each non-inlined stage, fuse outer data-parallel axes and run them
/// in parallel; vectorize the innermost axis when contiguous and long enough.
void default_schedule(te::Schedule& s, const std::vector<te::Tensor>& outputs);

}  // namespace kiln::op
