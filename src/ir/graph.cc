// Graph, Node and Value: construction and the edits passes need, keeping user lists exact.
//
// Invariants maintained here (checked by verifier.cc):
//  - v->users() holds node n once per input slot of n that reads v;
//  - node outputs point back to their node (producer, producer_index);
//  - a name -> Value index serves find_value/fresh_name. Value::set_name cannot reach its
//    graph, so it bumps a global rename epoch instead and each graph rebuilds its index lazily
//    when the epoch moved (renames are rare; lookups are frequent).
#include "ir/graph.h"

#include <algorithm>
#include <atomic>
#include <queue>
#include <unordered_map>

#include "support/error.h"

namespace kiln::ir {
namespace {
std::atomic<uint64_t> g_rename_epoch{0};
}  // namespace

void Value::set_name(std::string n) {
    name_ = std::move(n);
    g_rename_epoch.fetch_add(1, std::memory_order_relaxed);
}

// ---------------------------------------------------------------- Node

std::string Node::describe() const {
    if (!name_.empty()) return "node '" + name_ + "' (" + op_ + ")";
    if (!outputs_.empty() && outputs_[0])
        return "node producing '" + outputs_[0]->name() + "' (" + op_ + ")";
    return "unnamed node (" + op_ + ")";
}

void Node::set_input(size_t i, Value* v) {
    if (i >= inputs_.size()) inputs_.resize(i + 1, nullptr);
    Value* old = inputs_[i];
    if (old == v) return;
    if (old) {
        auto it = std::find(old->users_.begin(), old->users_.end(), this);
        KILN_ICHECK(it != old->users_.end())
            << "user list of '" << old->name() << "' lacks " << describe();
        old->users_.erase(it);
    }
    inputs_[i] = v;
    if (v) v->users_.push_back(this);
}

namespace {
[[noreturn]] void wrong_attr_kind(const Node& n, const std::string& k, const char* expected,
                                  const Attr& a) {
    KILN_THROW(kInvalidModel) << n.describe() << ": attribute '" << k << "' expected " << expected
                              << ", got " << attr_kind_name(a) << " " << attr_str(a);
}
}  // namespace

int64_t Node::attr_int(const std::string& k, int64_t dflt) const {
    auto it = attrs_.find(k);
    if (it == attrs_.end()) return dflt;
    if (auto* p = std::get_if<int64_t>(&it->second)) return *p;
    wrong_attr_kind(*this, k, "int", it->second);
}

double Node::attr_float(const std::string& k, double dflt) const {
    auto it = attrs_.find(k);
    if (it == attrs_.end()) return dflt;
    if (auto* p = std::get_if<double>(&it->second)) return *p;
    if (auto* p = std::get_if<int64_t>(&it->second)) return static_cast<double>(*p);
    wrong_attr_kind(*this, k, "float", it->second);
}

std::string Node::attr_string(const std::string& k, const std::string& dflt) const {
    auto it = attrs_.find(k);
    if (it == attrs_.end()) return dflt;
    if (auto* p = std::get_if<std::string>(&it->second)) return *p;
    wrong_attr_kind(*this, k, "string", it->second);
}

std::vector<int64_t> Node::attr_ints(const std::string& k, const std::vector<int64_t>& dflt) const {
    auto it = attrs_.find(k);
    if (it == attrs_.end()) return dflt;
    if (auto* p = std::get_if<std::vector<int64_t>>(&it->second)) return *p;
    wrong_attr_kind(*this, k, "ints", it->second);
}

std::vector<double> Node::attr_floats(const std::string& k, const std::vector<double>& dflt) const {
    auto it = attrs_.find(k);
    if (it == attrs_.end()) return dflt;
    if (auto* p = std::get_if<std::vector<double>>(&it->second)) return *p;
    if (auto* p = std::get_if<std::vector<int64_t>>(&it->second)) return {p->begin(), p->end()};
    wrong_attr_kind(*this, k, "floats", it->second);
}

// ---------------------------------------------------------------- Graph: construction

Value* Graph::find_value(const std::string& name) const {
    uint64_t epoch = g_rename_epoch.load(std::memory_order_relaxed);
    if (by_name_epoch_ != epoch) {
        by_name_.clear();
        for (const auto& v : values_) by_name_.emplace(v->name_, v.get());  // first definition wins
        by_name_epoch_ = epoch;
    }
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second;
}

Value* Graph::new_value(const std::string& name) {
    KILN_CHECK(find_value(name) == nullptr, kInvalidModel)
        << "graph '" << this->name << "': value name '" << name << "' is defined twice";
    values_.push_back(std::make_unique<Value>());
    Value* v = values_.back().get();
    v->name_ = name;
    by_name_.emplace(name, v);
    return v;
}

std::string Graph::fresh_name(const std::string& prefix) {
    for (;;) {
        std::string n = prefix + std::to_string(next_name_++);
        if (!find_value(n)) return n;
    }
}

Value* Graph::add_input(const std::string& name, TensorType type) {
    Value* v = new_value(name);
    v->type_ = std::move(type);
    v->is_input_ = true;
    inputs_.push_back(v);
    return v;
}

Value* Graph::add_outer_input(const std::string& name, TensorType type) {
    Value* v = new_value(name);
    v->type_ = std::move(type);
    v->is_input_ = true;
    outer_inputs_.push_back(v);
    return v;
}

Value* Graph::add_constant(const std::string& name, Tensor data) {
    Value* v = new_value(name);
    v->type_ = TensorType::of_static(data.dtype(), data.shape());
    v->constant_ = std::move(data);
    constants_.push_back(v);
    return v;
}

Node* Graph::add_node(const std::string& op, const std::vector<Value*>& inputs, AttrMap attrs,
                      const std::vector<TensorType>& output_types,
                      const std::vector<std::string>& output_names, const std::string& node_name) {
    KILN_ICHECK(output_names.empty() || output_names.size() == output_types.size())
        << "add_node(" << op << "): " << output_names.size() << " output names for "
        << output_types.size() << " output types";
    auto node = std::make_unique<Node>();
    Node* n = node.get();
    n->op_ = op;
    n->name_ = node_name;
    n->attrs_ = std::move(attrs);
    // Create outputs first so a duplicate name throws before anything is linked.
    std::vector<std::string> names(output_types.size());
    for (size_t i = 0; i < names.size(); ++i) {
        names[i] = output_names.empty() || output_names[i].empty() ? fresh_name() : output_names[i];
        for (size_t j = 0; j < i; ++j)
            KILN_CHECK(names[j] != names[i], kInvalidModel)
                << n->describe() << ": output name '" << names[i] << "' used twice";
        KILN_CHECK(find_value(names[i]) == nullptr, kInvalidModel)
            << n->describe() << ": output name '" << names[i] << "' is already defined";
    }
    for (size_t i = 0; i < names.size(); ++i) {
        Value* v = new_value(names[i]);
        v->type_ = output_types[i];
        v->producer_ = n;
        v->producer_index_ = static_cast<int>(i);
        n->outputs_.push_back(v);
    }
    n->inputs_ = inputs;
    for (Value* in : inputs)
        if (in) in->users_.push_back(n);
    nodes_.push_back(std::move(node));
    return n;
}

void Graph::add_output(Value* v) {
    KILN_ICHECK(v != nullptr) << "graph output must not be null";
    outputs_.push_back(v);
}

void Graph::set_outputs(std::vector<Value*> outs) {
    for (Value* v : outs) KILN_ICHECK(v != nullptr) << "graph output must not be null";
    outputs_ = std::move(outs);
}

std::vector<Value*> Graph::constants() const { return constants_; }

std::vector<Node*> Graph::nodes() const {
    std::vector<Node*> out;
    out.reserve(nodes_.size());
    for (const auto& n : nodes_) out.push_back(n.get());
    return out;
}

// ---------------------------------------------------------------- Graph: edits

void Graph::freeze_input(Value* v, Tensor data) {
    auto it = std::find(inputs_.begin(), inputs_.end(), v);
    KILN_CHECK(v && v->is_input_ && it != inputs_.end(), kInvalidArgument)
        << "freeze_input: '" << (v ? v->name() : "<null>") << "' is not an input of graph '" << name
        << "'";
    const TensorType& t = v->type_;
    bool ok = data.dtype() == t.dtype && static_cast<int>(data.shape().size()) == t.rank();
    for (size_t i = 0; ok && i < data.shape().size(); ++i)
        if (t.shape[i].is_static() && t.shape[i].value != data.shape()[i]) ok = false;
    KILN_CHECK(ok, kInvalidArgument)
        << "freeze_input: input '" << v->name() << "' has type " << t.str()
        << ", got a tensor of type " << TensorType::of_static(data.dtype(), data.shape()).str();
    inputs_.erase(it);
    v->is_input_ = false;
    v->type_ = TensorType::of_static(data.dtype(), data.shape());
    v->constant_ = std::move(data);
    constants_.push_back(v);
}

void Graph::replace_all_uses(Value* from, Value* to) {
    if (from == to) return;
    std::vector<Node*> users = from->users_;  // set_input edits from->users_
    for (Node* n : users)
        for (size_t i = 0; i < n->inputs_.size(); ++i)
            if (n->inputs_[i] == from) n->set_input(i, to);
    for (Value*& o : outputs_)
        if (o == from) o = to;
}

namespace {
template <typename T>
void erase_ptr(std::vector<T*>& xs, T* x) {
    auto it = std::find(xs.begin(), xs.end(), x);
    if (it != xs.end()) xs.erase(it);
}
}  // namespace

void Graph::erase_node(Node* n) {
    auto it =
        std::find_if(nodes_.begin(), nodes_.end(), [&](const auto& p) { return p.get() == n; });
    KILN_ICHECK(it != nodes_.end())
        << "erase_node: " << n->describe() << " is not in graph '" << name << "'";
    for (Value* o : n->outputs_) {
        KILN_ICHECK(o->users_.empty())
            << "erase_node: output '" << o->name() << "' of " << n->describe() << " still has "
            << o->users_.size() << " user(s)";
        KILN_ICHECK(std::find(outputs_.begin(), outputs_.end(), o) == outputs_.end())
            << "erase_node: output '" << o->name() << "' of " << n->describe()
            << " is a graph output";
    }
    for (size_t i = 0; i < n->inputs_.size(); ++i) n->set_input(i, nullptr);
    for (Value* o : n->outputs_) {
        auto idx = by_name_.find(o->name_);
        if (idx != by_name_.end() && idx->second == o) by_name_.erase(idx);
        auto vit = std::find_if(values_.begin(), values_.end(),
                                [&](const auto& p) { return p.get() == o; });
        if (vit != values_.end()) values_.erase(vit);
    }
    nodes_.erase(it);
}

void Graph::erase_constant(Value* v) {
    auto it = std::find(constants_.begin(), constants_.end(), v);
    KILN_ICHECK(it != constants_.end())
        << "erase_constant: '" << v->name() << "' is not a constant";
    KILN_ICHECK(v->users_.empty()) << "erase_constant: '" << v->name() << "' still has users";
    KILN_ICHECK(std::find(outputs_.begin(), outputs_.end(), v) == outputs_.end())
        << "erase_constant: '" << v->name() << "' is a graph output";
    constants_.erase(it);
    auto idx = by_name_.find(v->name_);
    if (idx != by_name_.end() && idx->second == v) by_name_.erase(idx);
    auto vit =
        std::find_if(values_.begin(), values_.end(), [&](const auto& p) { return p.get() == v; });
    values_.erase(vit);
}

// Kahn's algorithm; among ready nodes the one earliest in the current order goes first, so an
// already sorted graph keeps its order and an unsorted one moves as little as possible.
void Graph::set_order(const std::vector<Node*>& order) {
    KILN_CHECK(order.size() == nodes_.size(), kInternal)
        << "bug in Kiln: set_order with " << order.size() << " nodes, the graph has " << nodes_.size();
    std::unordered_map<const Node*, size_t> pos;
    for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = i;
    KILN_CHECK(pos.size() == order.size(), kInternal) << "bug in Kiln: set_order: a node appears twice";
    for (size_t i = 0; i < order.size(); ++i)
        for (const Value* in : order[i]->inputs_) {
            if (!in || !in->producer_) continue;
            auto p = pos.find(in->producer_);
            KILN_CHECK(p != pos.end() && p->second < i, kInternal)
                << "bug in Kiln: set_order puts " << order[i]->describe() << " before the producer of its input '"
                << in->name() << "'";
        }
    std::unordered_map<const Node*, std::unique_ptr<Node>> owned;
    for (auto& n : nodes_) {
        const Node* key = n.get();
        owned[key] = std::move(n);
    }
    nodes_.clear();
    for (Node* n : order) {
        auto it = owned.find(n);
        KILN_CHECK(it != owned.end(), kInternal) << "bug in Kiln: set_order names a node not in the graph";
        nodes_.push_back(std::move(it->second));
    }
}

void Graph::topo_sort() {
    std::vector<std::unique_ptr<Node>> old;
    old.reserve(nodes_.size());
    for (auto& n : nodes_) old.push_back(std::move(n));
    nodes_.clear();
    std::unordered_map<const Node*, size_t> pos;
    for (size_t i = 0; i < old.size(); ++i) pos[old[i].get()] = i;
    std::vector<int> pending(old.size(), 0);
    std::vector<std::vector<size_t>> consumers(old.size());
    for (size_t i = 0; i < old.size(); ++i) {
        for (Value* in : old[i]->inputs_) {
            if (!in || !in->producer_) continue;
            auto p = pos.find(in->producer_);
            if (p == pos.end()) continue;  // produced outside this graph: the verifier reports it
            ++pending[i];
            consumers[p->second].push_back(i);
        }
    }
    std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
    for (size_t i = 0; i < old.size(); ++i)
        if (pending[i] == 0) ready.push(i);
    size_t emitted = 0;
    while (!ready.empty()) {
        size_t i = ready.top();
        ready.pop();
        for (size_t c : consumers[i])
            if (--pending[c] == 0) ready.push(c);
        nodes_.push_back(std::move(old[i]));
        ++emitted;
    }
    if (emitted != old.size()) {
        std::string who;
        for (size_t i = 0; i < old.size(); ++i) {
            if (!old[i]) continue;
            if (who.empty()) who = old[i]->describe();
            nodes_.push_back(std::move(old[i]));  // keep the graph whole before throwing
        }
        KILN_THROW(kInvalidModel) << "graph '" << name << "' has a cycle through " << who;
    }
}

}  // namespace kiln::ir
