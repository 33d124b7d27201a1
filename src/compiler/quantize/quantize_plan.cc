// Choosing what to quantize (quantize_plan.h).
//
// Conv: input 0 an activation, input 1 a constant weight (per channel: axis 0), input 2 a
// constant bias (int32). MatMul: input 0 an activation; input 1 a constant 2-D weight (per
// channel: axis 1, the output columns) or a second activation. Gemm: input 0 an activation,
// input 1 a constant weight (per channel along the output axis: 0 with transB, else 1), a 1-D
// bias with alpha = beta = 1. Add: both inputs activations already quantized (a CNN's residual
// add; a constant operand such as a bias, or an operand computed in float, stays float).
// MaxPool: only after a quantized tensor, at the same scale.
// A node whose weight is computed, or that is excluded, stays float.
#include "compiler/quantize/quantize_plan.h"

#include <algorithm>
#include <map>
#include <set>

#include "support/error.h"

namespace kiln::compiler {

namespace {

using frontend::OnnxGraphView;
using frontend::OnnxNodeView;

bool listed(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

double attr(const OnnxNodeView& n, const std::string& name, double dflt) {
    auto it = n.float_attrs.find(name);
    return it == n.float_attrs.end() ? dflt : it->second;
}

/// The node's inputs and weights by its op's rule; false when it stays float.
bool plan_inputs(const OnnxGraphView& g, const OnnxNodeView& n, bool per_channel, QuantNodePlan& p) {
    auto is_const = [&](int i) { return i < static_cast<int>(n.inputs.size()) && g.initializers.count(n.inputs[i]); };
    auto present = [&](int i) { return i < static_cast<int>(n.inputs.size()) && !n.inputs[i].empty(); };
    if (n.inputs.empty() || is_const(0)) return false;
    p.act_inputs.push_back(n.inputs[0]);
    if (n.op_type == "Conv") {
        if (!is_const(1)) return false;
        p.weights.push_back({1, per_channel ? 0 : -1});
        if (present(2) && is_const(2)) p.bias_input = 2;
    } else if (n.op_type == "MatMul") {
        if (is_const(1)) p.weights.push_back({1, per_channel ? 1 : -1});
        else p.act_inputs.push_back(n.inputs[1]);
    } else if (n.op_type == "Gemm") {
        if (!is_const(1)) return false;
        p.weights.push_back({1, per_channel ? (attr(n, "transB", 0) != 0 ? 0 : 1) : -1});
        if (present(2) && is_const(2) && attr(n, "alpha", 1) == 1 && attr(n, "beta", 1) == 1) p.bias_input = 2;
    } else if (n.op_type == "Add") {
        if (n.inputs.size() != 2 || is_const(1) || n.inputs[0] == n.inputs[1]) return false;
        p.act_inputs.push_back(n.inputs[1]);
    } else if (n.op_type == "MaxPool") {
        if (n.outputs.size() != 1) return false;  // the Indices output is not quantized
        p.same_scale = true;
    } else {
        return false;
    }
    return n.outputs.size() == 1;
}

}  // namespace

std::vector<std::string> QuantPlan::tensors() const {
    std::vector<std::string> out;
    std::set<std::string> seen;
    for (const auto& n : nodes) {
        for (const auto& t : n.act_inputs)
            if (seen.insert(t).second) out.push_back(t);
        if (seen.insert(n.output).second) out.push_back(n.output);
    }
    return out;
}

void check_not_quantized(const OnnxGraphView& g, const std::string& path) {
    for (const auto& n : g.nodes) {
        const std::string& op = n.op_type;
        const bool quantized = op == "QuantizeLinear" || op == "DequantizeLinear" || op == "DynamicQuantizeLinear" ||
                               op.rfind("QLinear", 0) == 0 || op == "MatMulInteger" || op == "ConvInteger";
        KILN_CHECK(!quantized, kInvalidArgument) << "'" << path << "' is quantized already: node '" << n.name
                                                 << "' is a " << op << "; quantize the fp32 model";
    }
}

std::set<std::string> clip_bound_inputs(const OnnxGraphView& g) {
    std::set<std::string> names;
    for (const auto& n : g.nodes)
        if (n.op_type == "Clip")
            for (size_t i = 1; i < n.inputs.size(); ++i)
                if (g.initializers.count(n.inputs[i])) names.insert(n.inputs[i]);
    return names;
}

QuantPlan plan_quantization(const OnnxGraphView& g, const PlanRules& rules,
                            const std::map<int, std::pair<double, double>>& clip_bounds) {
    std::map<std::string, std::vector<int>> consumers;
    for (int k = 0; k < static_cast<int>(g.nodes.size()); ++k)
        for (const auto& i : g.nodes[k].inputs) consumers[i].push_back(k);
    std::set<std::string> quantized;  // tensors quantized so far (MaxPool follows only those)
    QuantPlan plan;
    for (int k = 0; k < static_cast<int>(g.nodes.size()); ++k) {
        const OnnxNodeView& n = g.nodes[k];
        if (!listed(rules.op_types, n.op_type) || listed(rules.exclude, n.name) || listed(rules.exclude, n.op_type))
            continue;
        QuantNodePlan p;
        p.node = k;
        if (!plan_inputs(g, n, rules.per_channel, p)) continue;
        // MaxPool and Add run in int8 only on 8-bit operands: after quantized tensors. (An Add of
        // float results -- a transformer's residual before LayerNorm, an attention mask -- would
        // only add a rounding, and a mask's -3.4e38 would flatten the scores' int8 grid.)
        if ((p.same_scale || n.op_type == "Add") &&
            !std::all_of(p.act_inputs.begin(), p.act_inputs.end(), [&](const std::string& t) { return quantized.count(t) > 0; }))
            continue;
        p.output = n.outputs[0];
        const std::vector<int>& users = consumers[p.output];
        const bool graph_output = listed(g.outputs, p.output);
        if (!p.same_scale && users.size() == 1 && !graph_output) {
            const OnnxNodeView& a = g.nodes[users[0]];
            auto clip = clip_bounds.find(users[0]);
            const bool relu = a.op_type == "Relu";
            const bool clip0 = a.op_type == "Clip" && clip != clip_bounds.end() && clip->second.first == 0;
            if ((relu || clip0) && !listed(rules.exclude, a.name) && a.outputs.size() == 1) {
                p.activation = users[0];
                p.output = a.outputs[0];
                if (clip0) p.clip_max = clip->second.second;
            }
        }
        for (const auto& t : p.act_inputs) quantized.insert(t);
        quantized.insert(p.output);
        plan.nodes.push_back(std::move(p));
    }
    return plan;
}

}  // namespace kiln::compiler
