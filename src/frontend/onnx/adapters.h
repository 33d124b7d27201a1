// Opset adapters: rewrite old ONNX op forms into the canonical (latest) form the op layer
// implements, e.g. Clip-6's min/max attributes into Clip-11+'s constant inputs.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "op/op_def.h"

namespace kiln::frontend {

/// A node on its way into the graph: inputs resolved (nullptr = omitted), attributes
/// converted, output names ("" = unused output) and provisional output types known.
struct PendingNode {
    std::string op;
    std::string name;
    std::vector<ir::Value*> inputs;
    ir::AttrMap attrs;
    std::vector<std::string> output_names;
    std::vector<ir::TensorType> output_types;
};

/// What an adapter may use: the graph under construction, the model's default-domain opset,
/// and `emit`, which validates a node against its OpDef, appends it and infers its types.
struct AdapterContext {
    ir::Graph& graph;
    int opset;
    std::function<ir::Node*(PendingNode)> emit;
    /// True if v's type is real (graph input, constant, declared in value_info or inferred),
    /// false if it is the importer's rank-0 placeholder.
    std::function<bool(const ir::Value*)> type_known;
    /// A value name used neither in the graph nor anywhere in the model, built from `hint`.
    std::function<std::string(const std::string& hint)> fresh_name;
};

/// Rewrites `n` (an op `def` at model opset ctx.opset) into the canonical form. An adapter may
/// add constants and emit helper nodes before it; `n` is left as the node to emit last (its
/// outputs keep the model's names). A form Kiln cannot express is kUnsupported.
void adapt_node(PendingNode& n, const op::OpDef& def, AdapterContext& ctx);

}  // namespace kiln::frontend
