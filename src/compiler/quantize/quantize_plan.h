// Which nodes of a model are quantized, and which of their tensors: the rules of ONNX Runtime's
// QDQ quantizer for Conv, MatMul, Gemm, Add and MaxPool, decided on the ONNX graph before
// calibration (calibration then tells the ranges, and drops a node whose tensors turn out not
// to be float).
#pragma once

#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "frontend/onnx/qdq_model.h"

namespace kiln::compiler {

/// One quantized node.
struct QuantNodePlan {
    int node = -1;
    std::vector<std::string> act_inputs;     // activations read (quantized before the node)
    std::vector<std::pair<int, int>> weights;  // (input index, per-channel axis or -1) of const weights
    int bias_input = -1;                     // a const float bias quantized to int32 (Conv, Gemm)
    std::string output;                      // the tensor quantized after the node
    /// A Relu / Clip(0, clip_max) that is the node's sole consumer: `output` is its output, and
    /// it is dropped when the output's zero point makes the QuantizeLinear saturate the same way.
    int activation = -1;
    double clip_max = std::numeric_limits<double>::infinity();
    bool same_scale = false;  // MaxPool: the output takes the input's scale and zero point
};

struct QuantPlan {
    std::vector<QuantNodePlan> nodes;  // model order
    /// Every activation tensor of the plan, in first-use order.
    std::vector<std::string> tensors() const;
};

/// Options of plan_quantization (from QuantizeOptions).
struct PlanRules {
    std::vector<std::string> op_types, exclude;
    bool per_channel = true;
};

/// The quantization plan of `g`. `clip_bounds` gives each Clip's (min, max) read from its
/// constant inputs or attributes (absent: not a removable activation).
QuantPlan plan_quantization(const frontend::OnnxGraphView& g, const PlanRules& rules,
                            const std::map<int, std::pair<double, double>>& clip_bounds);

/// kInvalidArgument naming the first node when `g` is quantized already (QuantizeLinear,
/// DequantizeLinear, DynamicQuantizeLinear, QLinear*, *Integer ops).
void check_not_quantized(const frontend::OnnxGraphView& g, const std::string& path);

/// The constant inputs of `g`'s Clip nodes whose bounds plan_quantization needs.
std::set<std::string> clip_bound_inputs(const frontend::OnnxGraphView& g);

}  // namespace kiln::compiler
