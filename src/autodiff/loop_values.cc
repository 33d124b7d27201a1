// Kept loop values (autodiff/loop_values.h).
#include "autodiff/loop_values.h"

#include <algorithm>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "autodiff/differentiate.h"
#include "autodiff/region.h"
#include "support/error.h"

namespace kiln::autodiff {
namespace {

const ir::Graph& body_of(const ir::Node& n) {
    auto it = n.attrs().find("body");
    const ir::GraphAttr* g = it == n.attrs().end() ? nullptr : std::get_if<ir::GraphAttr>(&it->second);
    KILN_CHECK(g && *g, kInvalidModel) << n.describe() << ": missing graph attribute 'body'";
    return **g;
}

/// Names `n`'s regions read from the graph around `n`.
void add_captured(const ir::Node& n, std::unordered_set<std::string>& out) {
    for (const auto& [k, a] : n.attrs())
        if (const auto* sub = std::get_if<ir::GraphAttr>(&a); sub && *sub)
            for (const std::string& name : captured_names(**sub)) out.insert(name);
}

bool is_output(const ir::Graph& g, const ir::Value* v) {
    return std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end();
}

/// Erases the forward nodes of `r` whose outputs nothing reads (by edge or by name).
void erase_unused_forward(ir::Graph& r) {
    const std::vector<ir::Node*> nodes = r.nodes();
    std::unordered_set<std::string> captured;
    for (const ir::Node* x : nodes)
        if (is_backward_node(*x)) add_captured(*x, captured);
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
        ir::Node* x = *it;
        if (is_backward_node(*x)) continue;
        bool live = false;
        for (const ir::Value* o : x->outputs())
            live = live || !o->users().empty() || is_output(r, o) || captured.count(o->name());
        if (live) add_captured(*x, captured);
        else r.erase_node(x);
    }
}

/// Moves the nodes added since `old` nodes to just after the last producer of their inputs
/// (a region may read them by name, which the order must respect like an edge).
void place_early(ir::Graph& r, size_t old) {
    const std::vector<ir::Node*> nodes = r.nodes();
    std::vector<ir::Node*> added(nodes.begin() + static_cast<std::ptrdiff_t>(old), nodes.end());
    std::vector<ir::Node*> order;
    std::unordered_set<const ir::Node*> placed;
    auto flush = [&] {
        for (ir::Node*& a : added) {
            if (!a) continue;
            bool ready = true;
            for (const ir::Value* in : a->inputs()) ready = ready && (!in || !in->producer() || placed.count(in->producer()));
            if (!ready) continue;
            order.push_back(a);
            placed.insert(a);
            a = nullptr;
        }
    };
    flush();
    for (size_t i = 0; i < old; ++i) {
        order.push_back(nodes[i]);
        placed.insert(nodes[i]);
        flush();
    }
    r.set_order(order);
}

}  // namespace

ir::Node* keep_body_values(ir::Graph& g, ir::Node& n, const std::vector<const ir::Value*>& keep,
                           const std::vector<std::string>& names, const ir::AttrMap& update) {
    KILN_ICHECK(keep.size() == names.size()) << "keep_body_values: " << keep.size() << " values, " << names.size() << " names";
    const ir::Graph& body = body_of(n);
    std::shared_ptr<ir::Graph> b = copy_graph(body);
    std::vector<ir::TensorType> types;
    std::vector<std::string> out_names;
    for (ir::Value* o : n.outputs()) {
        types.push_back(o->type());
        out_names.push_back(o->name());
        o->set_name(g.fresh_name(o->name() + "/superseded"));
    }
    for (size_t k = 0; k < keep.size(); ++k) {
        ir::Value* v = b->find_value(keep[k]->name());  // the copy keeps the names
        KILN_ICHECK(v != nullptr) << "keep_body_values: '" << keep[k]->name() << "' is no value of " << n.describe();
        ir::Node* id = b->add_node("Identity", {v}, {}, {v->type()}, {unique_name("kept/" + v->name(), {b.get()})}, "kept");
        b->add_output(id->output(0));
        ir::TensorType stacked = v->type();
        stacked.shape.insert(stacked.shape.begin(), ir::Dim::sym("?"));
        types.push_back(stacked);
        out_names.push_back(names[k]);
    }
    ir::AttrMap attrs = n.attrs();
    attrs["body"] = ir::GraphAttr(b);
    for (const auto& [k, v] : update) attrs[k] = v;
    ir::Node* m = g.add_node(n.op(), n.inputs(), attrs, types, out_names, n.name());
    m->set_role(n.role());
    for (size_t k = 0; k < n.num_outputs(); ++k) g.replace_all_uses(n.output(k), m->output(k));
    std::vector<ir::Node*> order;
    for (ir::Node* x : g.nodes()) {
        if (x == m) continue;
        order.push_back(x);
        if (x == &n) order.push_back(m);
    }
    g.set_order(order);
    return m;
}

std::vector<const ir::Value*> keep_read_values(ir::Graph& r, const ir::Graph& body, const KeptFn& kept) {
    const std::vector<ir::Node*> nodes = r.nodes();
    std::unordered_set<const ir::Value*> forward;
    for (const ir::Node* x : nodes)
        if (!is_backward_node(*x))
            for (const ir::Value* o : x->outputs()) forward.insert(o);
    std::vector<ir::Value*> read;
    auto note = [&](ir::Value* v) {
        if (v && forward.count(v) && std::find(read.begin(), read.end(), v) == read.end()) read.push_back(v);
    };
    for (const ir::Node* x : nodes) {
        if (!is_backward_node(*x)) continue;
        for (ir::Value* in : x->inputs()) note(in);
        if (has_region(*x))
            for (ir::Value* v : captured_values(r, *x)) note(v);
    }
    for (ir::Value* o : r.outputs()) note(o);
    std::vector<const ir::Value*> out;
    for (ir::Value* v : read) {
        const ir::Value* b = body.find_value(v->name());
        if (!b || !b->producer() || !(b->type() == v->type()) || !b->type().is_tensor() || !b->type().is_static())
            continue;  // not a value of the forward body (a nested loop's own stack): recomputed
        const std::string name = v->name();
        v->set_name(r.fresh_name(name + "/recomputed"));
        r.replace_all_uses(v, kept(b, name));
        out.push_back(b);
    }
    place_early(r, nodes.size());
    erase_unused_forward(r);
    return out;
}

}  // namespace kiln::autodiff
