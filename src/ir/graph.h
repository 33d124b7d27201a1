// The Kiln IR: a typed SSA dataflow graph.
//
// Semantics contract:
//  - A Value is defined exactly once: as a graph input, as a constant (initializer, with data),
//    or as output `index` of one Node. Values are never reassigned.
//  - A Node names an op of the registry (`op`, e.g. "Conv"), has ordered inputs (nullptr marks an
//    omitted optional input), ordered outputs, and attributes. Op semantics are those of the
//    latest ONNX opset version Kiln supports; the importer adapts older opsets.
//  - `Graph::nodes()` is kept in a topological order: every input of a node is a graph input, a
//    constant, or an output of an earlier node. The verifier checks this.
//  - The Graph owns all Nodes and Values; raw pointers into it stay valid until the graph dies
//    or the node is erased.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/attr.h"
#include "ir/type.h"
#include "support/tensor.h"

namespace kiln::ir {

class Node;

class Value {
public:
    const std::string& name() const { return name_; }
    /// Renames the value (the caller keeps names unique; the verifier checks).
    void set_name(std::string n);
    const TensorType& type() const { return type_; }
    void set_type(TensorType t) { type_ = std::move(t); }

    /// The defining node (nullptr for graph inputs and constants) and the output index in it.
    Node* producer() const { return producer_; }
    int producer_index() const { return producer_index_; }
    bool is_graph_input() const { return is_input_; }
    bool is_constant() const { return constant_.has_value(); }
    /// Constant data (initializer or folded); only valid if is_constant().
    const Tensor& constant() const { return *constant_; }

    /// Nodes that read this value (a node appears once per input slot that reads it).
    const std::vector<Node*>& users() const { return users_; }

private:
    friend class Graph;
    friend class Node;
    std::string name_;
    TensorType type_;
    Node* producer_ = nullptr;
    int producer_index_ = -1;
    bool is_input_ = false;
    std::optional<Tensor> constant_;
    std::vector<Node*> users_;
};

/// What a node is for in a training graph. Set by whoever makes the node (the differentiation
/// its backward nodes, the recomputation its copies), carried by the code that copies nodes,
/// and read by the passes that must tell them apart (CSE and fusion keep recomputations apart;
/// the recomputation and the pipeline split at the backward); never inferred from a name, so
/// an imported node called "grad/x" or "recompute/x" is an ordinary forward node.
enum class NodeRole : uint8_t {
    kForward,    // the model's own computation (every imported node)
    kBackward,   // added by the differentiation (autodiff/differentiate.h)
    kRecompute,  // a copy of a forward node for the backward pass (autodiff/recompute.h)
};

class Node {
public:
    const std::string& op() const { return op_; }
    /// Node name from the model ("conv1"); may be empty. Errors name nodes by name and op.
    const std::string& name() const { return name_; }
    void set_name(std::string n) { name_ = std::move(n); }
    /// "node 'conv1' (Conv)" — for error messages.
    std::string describe() const;

    const std::vector<Value*>& inputs() const { return inputs_; }
    Value* input(size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
    size_t num_inputs() const { return inputs_.size(); }
    /// Rewires input slot i (maintains user lists).
    void set_input(size_t i, Value* v);

    const std::vector<Value*>& outputs() const { return outputs_; }
    Value* output(size_t i) const { return outputs_.at(i); }
    size_t num_outputs() const { return outputs_.size(); }

    const AttrMap& attrs() const { return attrs_; }
    AttrMap& attrs() { return attrs_; }
    bool has_attr(const std::string& k) const { return attrs_.count(k) != 0; }
    int64_t attr_int(const std::string& k, int64_t dflt) const;
    double attr_float(const std::string& k, double dflt) const;
    std::string attr_string(const std::string& k, const std::string& dflt) const;
    std::vector<int64_t> attr_ints(const std::string& k, const std::vector<int64_t>& dflt = {}) const;
    std::vector<double> attr_floats(const std::string& k, const std::vector<double>& dflt = {}) const;

    /// Fusion group (pass/fuse_operators.h): nodes with the same group id >= 0 lower to one
    /// kernel; -1 means the node is its own kernel. Printed as `# group=N`.
    int group() const { return group_; }
    void set_group(int g) { group_ = g; }

    NodeRole role() const { return role_; }
    void set_role(NodeRole r) { role_ = r; }

private:
    friend class Graph;
    std::string op_;
    std::string name_;
    NodeRole role_ = NodeRole::kForward;
    std::vector<Value*> inputs_;
    std::vector<Value*> outputs_;
    AttrMap attrs_;
    int group_ = -1;
};

class Graph {
public:
    Graph() = default;
    Graph(const Graph&) = delete;
    Graph& operator=(const Graph&) = delete;
    Graph(Graph&&) = default;
    Graph& operator=(Graph&&) = default;

    std::string name = "main";

    /// Adds a graph input (in order). Names must be unique within the graph.
    Value* add_input(const std::string& name, TensorType type);
    /// Adds a value this graph reads from an enclosing graph's scope (a sub-graph of If, Loop or
    /// Scan naming an outer value): bound by name when the sub-graph runs. Not in inputs().
    Value* add_outer_input(const std::string& name, TensorType type);
    const std::vector<Value*>& outer_inputs() const { return outer_inputs_; }
    /// Adds a constant (initializer); its type is derived from the tensor.
    Value* add_constant(const std::string& name, Tensor data);
    /// Appends a node at the end of the order. Output values are created with the given types
    /// and names (empty name: a fresh "%N"-style name is made up). Its role is kForward.
    Node* add_node(const std::string& op, const std::vector<Value*>& inputs, AttrMap attrs,
                   const std::vector<TensorType>& output_types, const std::vector<std::string>& output_names = {},
                   const std::string& node_name = "");
    /// Marks values as graph outputs (in order).
    void add_output(Value* v);
    void set_outputs(std::vector<Value*> outs);

    const std::vector<Value*>& inputs() const { return inputs_; }
    const std::vector<Value*>& outputs() const { return outputs_; }
    /// All constants, in insertion order.
    std::vector<Value*> constants() const;
    /// Nodes in topological (execution) order.
    std::vector<Node*> nodes() const;
    size_t num_nodes() const { return nodes_.size(); }

    /// Value lookup by name (nullptr if none).
    Value* find_value(const std::string& name) const;

    /// Turns graph input `v` into a constant holding `data` (specialization on an input's value).
    void freeze_input(Value* v, Tensor data);
    /// Replaces every use of `from` (node inputs and graph outputs) with `to`.
    void replace_all_uses(Value* from, Value* to);
    /// Removes a node whose outputs have no users and are not graph outputs.
    void erase_node(Node* n);
    /// Removes a constant that has no users and is no graph output.
    void erase_constant(Value* v);
    /// Puts the nodes in `order` (a permutation of nodes() that is topological; kInternal
    /// otherwise): a pass that cares when a node runs (recomputation) places it explicitly.
    void set_order(const std::vector<Node*>& order);
    /// Re-sorts nodes topologically (stable w.r.t. current order where possible).
    void topo_sort();
    /// A fresh, unused value name with the given prefix.
    std::string fresh_name(const std::string& prefix = "v");

private:
    Value* new_value(const std::string& name);
    std::vector<std::unique_ptr<Value>> values_;
    std::list<std::unique_ptr<Node>> nodes_;
    std::vector<Value*> inputs_;
    std::vector<Value*> outer_inputs_;
    std::vector<Value*> outputs_;
    std::vector<Value*> constants_;
    int64_t next_name_ = 0;
    // Name -> value index for find_value; rebuilt when any Value was renamed since (see graph.cc).
    mutable std::unordered_map<std::string, Value*> by_name_;
    mutable uint64_t by_name_epoch_ = ~uint64_t{0};
};

}  // namespace kiln::ir
