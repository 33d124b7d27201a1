// Host kernels: an op's meaning as C++ over run-time values, for what tensor expressions cannot
// say — outputs whose shapes depend on the data (NonZero, Unique, NonMaxSuppression), string
// tensors, sequences and optionals, control flow (If, Loop, Scan run their sub-graphs through
// HostArgs::run_graph), and the ai.onnx.ml ops. The graph interpreter
// (compiler/graph_interpreter.h) calls them; compiled executables never do. Each host kernel has
// its own tests against an independent reference (numpy / ONNX Runtime / the spec's examples).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/datum.h"

namespace kiln::op {

struct HostArgs {
    const ir::Node& node;
    /// One per node input slot; Datum::none() for an omitted optional input (and for an empty
    /// optional value).
    std::vector<Datum> inputs;
    /// Runs a sub-graph (a GraphAttr of this node) on `inputs` (its formal inputs, in order);
    /// the sub-graph's outer-scope values resolve in the scope of the graph running this node.
    /// Returns the sub-graph's outputs in order.
    std::function<std::vector<Datum>(const ir::Graph&, const std::vector<Datum>&)> run_graph;

    size_t num_inputs() const { return inputs.size(); }
    bool has_input(size_t i) const { return i < inputs.size() && !inputs[i].is_none(); }
    /// Input i as a tensor; a kInvalidArgument error naming the node and input otherwise.
    const Tensor& tensor(size_t i) const;
    /// Input i as a sequence's items; an error naming the node and input otherwise.
    const std::vector<Tensor>& sequence(size_t i) const;
    /// The sub-graph attribute `name`; a kInvalidModel error naming the node if absent.
    const ir::Graph& graph_attr(const std::string& name) const;
};

/// Computes every output of the node (as many Datums as the node has outputs).
using HostFn = std::function<std::vector<Datum>(const HostArgs&)>;

}  // namespace kiln::op
