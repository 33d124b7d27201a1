// GraphPlan: what the graph interpreter (compiler/graph_interpreter.h) needs to run one graph,
// worked out once per graph, since an If branch or a Loop body runs many times: the nodes in
// order with their OpDefs, a slot per value, the slots dead after each node, and which nodes
// see the same inputs on every run (memoized).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "op/op_def.h"
#include "support/datum.h"

namespace kiln::compiler {

/// One graph's plan. Slots [0, constants.size()) are the graph's constants, read from here (never
/// copied into a frame); the others are the graph's inputs, outer inputs and node outputs.
struct GraphPlan {
    std::vector<const ir::Node*> nodes;
    std::vector<const op::OpDef*> defs;                   // per node; nullptr: unknown op
    std::vector<std::vector<int>> inputs, outputs, release;  // per node (input -1: omitted)
    std::vector<int> graph_inputs, graph_outputs;
    std::vector<std::pair<int, const ir::Value*>> outer;  // bound by name from enclosing frames
    std::vector<Datum> constants;
    std::unordered_map<const ir::Value*, int> slot;
    int num_slots = 0;
    // Per node: which inputs hold the same data on every run (constants and the outputs of
    // memoized nodes), and whether the node is memoized: a compute (pure) whose inputs are all
    // fixed, so its outputs, computed on the first run, are reused (a VAD branch reshapes its
    // LSTM weights on every call otherwise).
    std::vector<std::vector<char>> fixed;
    std::vector<char> fixed_slot;  // by slot
    std::vector<char> memoize;
    std::vector<std::optional<std::vector<Datum>>> memo;

    int slot_of(const ir::Value* v) {
        auto [it, fresh] = slot.emplace(v, num_slots);
        if (fresh) ++num_slots;
        return it->second;
    }
};

/// The plan of `g`. `outer_is_fixed(name)`: whether the outer-scope value `name` (an outer input
/// of `g`) has the same data on every run in its own graph (a constant there, or memoized).
std::unique_ptr<GraphPlan> make_graph_plan(const ir::Graph& g,
                                           const std::function<bool(const std::string&)>& outer_is_fixed);

/// Whether `n` has a sub-graph attribute.
bool has_graph_attr(const ir::Node& n);

/// Adds the names `n`'s sub-graphs (and theirs, recursively) read from enclosing scopes.
void captured_names(const ir::Node& n, std::set<std::string>& out);

}  // namespace kiln::compiler
