#include "distributed/collective_stages.h"

#include <algorithm>
#include <set>

#include "op/registry.h"
#include "support/error.h"

namespace kiln::distributed {
namespace {

constexpr const char* kCollectiveDomain = "ai.kiln.distributed";

bool is_collective(const ir::Node& n) {
    const op::OpDef* d = op::OpRegistry::global().find(n.op());
    return d && d->domain == kCollectiveDomain;
}

ReduceOp parse_reduce(const ir::Node& n) {
    const std::string r = n.attr_string("reduce", "sum");
    if (r == "mean") return ReduceOp::kMean;
    if (r == "min") return ReduceOp::kMin;
    if (r == "max") return ReduceOp::kMax;
    if (r == "prod") return ReduceOp::kProd;
    KILN_CHECK(r == "sum", kInvalidModel) << n.op() << " node '" << n.name() << "': unknown reduce '" << r << "'";
    return ReduceOp::kSum;
}

CollectiveNode describe_node(const ir::Node& n) {
    CollectiveNode c;
    c.op = n.op();
    c.name = n.name().empty() ? n.output(0)->name() : n.name();
    c.input = n.input(0)->name();
    c.output = n.output(0)->name();
    if (c.op == "AllReduce" || c.op == "ReduceScatter") c.reduce = parse_reduce(n);
    if (c.op == "Broadcast") c.root = n.attr_int("root", 0);
    if (c.op == "AllGather" || c.op == "ReduceScatter") {
        const int64_t rank = static_cast<int64_t>(n.input(0)->type().shape.size());
        c.axis = n.attr_int("axis", 0);
        if (c.axis < 0) c.axis += rank;
        c.world_size = n.attr_int("world_size", 0);
    }
    return c;
}

/// kUnsupported if a sub-graph (If/Loop/Scan body) holds a collective: the cut is of the top
/// level only.
void refuse_nested(const ir::Graph& g, const std::string& where) {
    for (const ir::Node* n : g.nodes())
        for (const auto& [key, attr] : n->attrs()) {
            const auto* body = std::get_if<ir::GraphAttr>(&attr);
            if (!body || !*body) continue;
            for (const ir::Node* inner : (*body)->nodes())
                KILN_CHECK(!is_collective(*inner), kUnsupported)
                    << inner->op() << " node '" << inner->name() << "' sits in attribute '" << key << "' of " << n->op()
                    << " node '" << n->name() << "'" << where
                    << ": collectives run at the top level of a model only (docs/distributed.md)";
            refuse_nested(**body, where);
        }
}

/// Values a node reads: its inputs, and the outer values its sub-graphs name.
std::vector<const ir::Value*> reads(const ir::Graph& g, const ir::Node& n) {
    std::vector<const ir::Value*> out(n.inputs().begin(), n.inputs().end());
    for (const auto& [key, attr] : n.attrs()) {
        const auto* body = std::get_if<ir::GraphAttr>(&attr);
        if (!body || !*body) continue;
        for (const ir::Value* outer : (*body)->outer_inputs())
            if (const ir::Value* v = g.find_value(outer->name())) out.push_back(v);
    }
    return out;
}

/// Stage graph `k`: the compute nodes of stage k, reading what earlier stages, waves and the
/// model's inputs define, returning what anything else reads.
ir::Graph build_stage(const ir::Graph& g, const std::vector<const ir::Node*>& nodes, int k) {
    ir::Graph s;
    s.name = g.name + "_stage" + std::to_string(k);
    std::map<const ir::Value*, ir::Value*> map;
    std::set<const ir::Node*> here(nodes.begin(), nodes.end());
    auto value_of = [&](const ir::Value* v) -> ir::Value* {
        if (!v) return nullptr;
        auto it = map.find(v);
        if (it != map.end()) return it->second;
        ir::Value* nv = v->is_constant() ? s.add_constant(v->name(), v->constant()) : s.add_input(v->name(), v->type());
        return map[v] = nv;
    };
    for (const ir::Node* n : nodes) {
        for (const ir::Value* v : reads(g, *n)) (void)value_of(v);  // outer values become inputs too
        std::vector<ir::Value*> ins;
        for (const ir::Value* v : n->inputs()) ins.push_back(value_of(v));
        std::vector<ir::TensorType> types;
        std::vector<std::string> names;
        for (const ir::Value* o : n->outputs()) types.push_back(o->type()), names.push_back(o->name());
        ir::Node* copy = s.add_node(n->op(), ins, n->attrs(), types, names, n->name());
        copy->set_role(n->role());
        for (size_t i = 0; i < n->num_outputs(); ++i) map[n->output(i)] = copy->output(i);
    }
    const std::vector<ir::Value*>& model_outs = g.outputs();
    for (const ir::Node* n : nodes)
        for (const ir::Value* o : n->outputs()) {
            bool needed = std::find(model_outs.begin(), model_outs.end(), o) != model_outs.end();
            for (const ir::Node* user : o->users()) needed = needed || !here.count(user);
            if (needed) s.add_output(map.at(o));
        }
    return s;
}

}  // namespace

bool has_collectives(const ir::Graph& g) {
    for (const ir::Node* n : g.nodes())
        if (is_collective(*n)) return true;
    return false;
}

CollectiveStages split_at_collectives(const ir::Graph& g) {
    refuse_nested(g, "");
    std::map<const ir::Value*, int> level;  // inputs and constants: 0
    auto level_of = [&](const ir::Value* v) { return v && level.count(v) ? level.at(v) : 0; };
    std::vector<std::vector<const ir::Node*>> stage_nodes(1);
    CollectiveStages out;
    for (const ir::Node* n : g.nodes()) {
        int l = 0;
        for (const ir::Value* v : reads(g, *n)) l = std::max(l, level_of(v));
        if (is_collective(*n)) {
            if (out.waves.size() <= static_cast<size_t>(l)) out.waves.resize(l + 1);
            out.waves[l].push_back(describe_node(*n));
            const ir::Value* in = n->input(0);
            if (in->is_constant()) out.constants.emplace(in->name(), in->constant());
            level[n->output(0)] = l + 1;
            continue;
        }
        if (stage_nodes.size() <= static_cast<size_t>(l)) stage_nodes.resize(l + 1);
        stage_nodes[l].push_back(n);
        for (const ir::Value* o : n->outputs()) level[o] = l;
    }
    stage_nodes.resize(out.waves.size() + 1);
    for (size_t k = 0; k < stage_nodes.size(); ++k) out.stages.push_back(build_stage(g, stage_nodes[k], static_cast<int>(k)));
    for (const ir::Value* v : g.outputs()) {
        out.outputs.push_back(v->name());
        if (v->is_constant()) out.constants.emplace(v->name(), v->constant());
    }
    return out;
}

}  // namespace kiln::distributed
