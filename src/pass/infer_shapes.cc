#include "pass/infer_shapes.h"

#include <unordered_set>

#include "op/registry.h"
#include "support/error.h"

namespace kiln::pass {
namespace {

/// Nodes whose outputs reach a value-input slot (through any chain of nodes but Shape/Size).
std::unordered_set<const ir::Node*> shape_arithmetic_nodes(const ir::Graph& g) {
    const op::OpRegistry& reg = op::OpRegistry::global();
    std::unordered_set<const ir::Node*> feeds;
    std::vector<const ir::Node*> stack;
    for (const ir::Node* n : g.nodes()) {
        const op::OpDef* def = reg.find(n->op());
        if (!def) continue;
        for (int vi : def->value_inputs) {
            const ir::Value* v = n->input(static_cast<size_t>(vi));
            if (v && v->producer() && feeds.insert(v->producer()).second) stack.push_back(v->producer());
        }
    }
    while (!stack.empty()) {
        const ir::Node* n = stack.back();
        stack.pop_back();
        // Shape and Size read only their input's type: the walk stops there (it went on into a
        // transformer's MatMuls and folded their weights' DequantizeLinear before fuse-qdq).
        if (n->op() == "Shape" || n->op() == "Size") continue;
        for (const ir::Value* in : n->inputs())
            if (in && in->producer() && feeds.insert(in->producer()).second) stack.push_back(in->producer());
    }
    return feeds;
}

bool all_inputs_constant(const ir::Node& n) {
    for (const ir::Value* in : n.inputs())
        if (in && !in->is_constant()) return false;
    return true;
}

}  // namespace

bool infer_shapes(ir::Graph& g, const PassContext& ctx) {
    const op::OpRegistry& reg = op::OpRegistry::global();
    const std::unordered_set<const ir::Node*> shape_nodes = shape_arithmetic_nodes(g);
    bool changed = false;
    for (ir::Node* n : g.nodes()) {
        const op::OpDef* def = reg.find(n->op());
        KILN_CHECK(def != nullptr, kUnsupported) << "unsupported op '" << n->op() << "' (" << n->describe() << ")";
        for (int vi : def->value_inputs) {
            ir::Value* v = n->input(static_cast<size_t>(vi));
            KILN_CHECK(v == nullptr || v->is_constant(), kUnsupported)
                << n->describe() << ": input " << vi << " ('" << v->name()
                << "') determines the output shape and must be a constant when compiling";
        }
        std::vector<ir::TensorType> before;
        for (const ir::Value* o : n->outputs()) before.push_back(o->type());
        try {
            op::infer_node(*n);
        } catch (Error& e) {
            e.add_context("while inferring types of " + n->describe());
            throw;
        }
        for (size_t i = 0; i < n->num_outputs(); ++i) {
            const ir::Value* o = n->output(i);
            KILN_CHECK(ctx.keep_symbols || o->type().is_static(), kUnsupported)
                << n->describe() << ": output '" << o->name() << "' has a non-static shape " << o->type().str();
            changed |= !(o->type() == before[i]);
        }
        const bool shape_of_type = n->op() == "Shape" || n->op() == "Size";
        if (!ctx.evaluate || !(shape_of_type || (shape_nodes.count(n) && all_inputs_constant(*n)))) continue;
        std::string what = n->describe();
        try {
            changed |= ctx.evaluate(g, n);  // may erase n
        } catch (Error& e) {
            e.add_context("while evaluating " + what + " at compile time");
            throw;
        }
    }
    return changed;
}

}  // namespace kiln::pass
