// Region helpers for autodiff (autodiff/region.h).
#include "autodiff/region.h"

#include <algorithm>
#include <unordered_set>

#include "support/error.h"

namespace kiln::autodiff {
namespace {

void add_unique(std::vector<std::string>& out, const std::string& name) {
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
}

/// Whether `g` defines `name` itself (an input, constant or node output; not an outer input).
bool defines(const ir::Graph& g, const std::string& name) {
    const ir::Value* v = g.find_value(name);
    if (!v) return false;
    const auto& outer = g.outer_inputs();
    return std::find(outer.begin(), outer.end(), v) == outer.end();
}

}  // namespace

bool has_region(const ir::Node& n) {
    for (const auto& [k, a] : n.attrs())
        if (std::holds_alternative<ir::GraphAttr>(a)) return true;
    return false;
}

std::vector<std::string> captured_names(const ir::Graph& sub) {
    std::vector<std::string> out;
    for (const ir::Value* v : sub.outer_inputs()) add_unique(out, v->name());
    for (const ir::Node* n : sub.nodes())
        for (const auto& [k, a] : n->attrs()) {
            const auto* inner = std::get_if<ir::GraphAttr>(&a);
            if (!inner || !*inner) continue;
            for (const std::string& name : captured_names(**inner))
                if (!defines(sub, name)) add_unique(out, name);
        }
    return out;
}

std::vector<ir::Value*> captured_values(const ir::Graph& g, const ir::Node& n) {
    std::vector<ir::Value*> out;
    for (const auto& [k, a] : n.attrs()) {
        const auto* sub = std::get_if<ir::GraphAttr>(&a);
        if (!sub || !*sub) continue;
        for (const std::string& name : captured_names(**sub)) {
            ir::Value* v = g.find_value(name);
            if (v && std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
        }
    }
    return out;
}

std::string unique_name(const std::string& prefix, const std::vector<const ir::Graph*>& graphs) {
    for (int i = 0;; ++i) {
        std::string name = i == 0 ? prefix : prefix + "_" + std::to_string(i);
        bool taken = false;
        for (const ir::Graph* g : graphs) taken = taken || g->find_value(name) != nullptr;
        if (!taken) return name;
    }
}

void clone_nodes(ir::Graph& dst, const ir::Graph& src, std::unordered_map<const ir::Value*, ir::Value*>& map) {
    for (const ir::Value* c : src.constants()) {
        // Nested regions read constants by name: keep it where it is free.
        const std::string name = dst.find_value(c->name()) ? dst.fresh_name(c->name() + "_") : c->name();
        map[c] = dst.add_constant(name, c->constant());
    }
    for (const ir::Node* n : src.nodes()) {
        std::vector<ir::Value*> ins;
        for (const ir::Value* in : n->inputs()) {
            if (!in) {
                ins.push_back(nullptr);
                continue;
            }
            auto it = map.find(in);
            KILN_CHECK(it != map.end(), kInternal)
                << "bug in Kiln: copying " << n->describe() << " of graph '" << src.name << "': input '" << in->name()
                << "' has no copy";
            ins.push_back(it->second);
        }
        std::vector<ir::TensorType> types;
        std::vector<std::string> names;
        for (const ir::Value* o : n->outputs()) {
            types.push_back(o->type());
            names.push_back(o->name());
        }
        ir::AttrMap attrs = n->attrs();
        for (auto& [k, a] : attrs)
            if (auto* sub = std::get_if<ir::GraphAttr>(&a); sub && *sub) a = ir::GraphAttr(copy_graph(**sub));
        ir::Node* copy = dst.add_node(n->op(), ins, std::move(attrs), types, names, n->name());
        copy->set_role(n->role());
        for (size_t i = 0; i < n->num_outputs(); ++i) map[n->output(i)] = copy->output(i);
    }
}

std::shared_ptr<ir::Graph> copy_graph(const ir::Graph& src) {
    auto g = std::make_shared<ir::Graph>();
    g->name = src.name;
    std::unordered_map<const ir::Value*, ir::Value*> map;
    for (const ir::Value* in : src.inputs()) map[in] = g->add_input(in->name(), in->type());
    for (const ir::Value* o : src.outer_inputs()) map[o] = g->add_outer_input(o->name(), o->type());
    clone_nodes(*g, src, map);
    for (const ir::Value* o : src.outputs()) g->add_output(map.at(o));
    return g;
}

}  // namespace kiln::autodiff
