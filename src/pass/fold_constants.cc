#include "pass/fold_constants.h"

#include <unordered_set>

#include "pass/rewrite.h"
#include "support/error.h"

namespace kiln::pass {
namespace {

/// Elements of constant inputs read only by `n`: folding `n` lets dead-code elimination drop them.
int64_t freed_elements(const ir::Node& n) {
    int64_t freed = 0;
    std::unordered_set<const ir::Value*> seen;
    for (const ir::Value* in : n.inputs()) {
        if (!in || !seen.insert(in).second) continue;
        bool only_n = true;
        for (const ir::Node* u : in->users()) only_n &= (u == &n);
        if (only_n) freed += in->constant().numel();
    }
    return freed;
}

}  // namespace

bool fold_constants(ir::Graph& g, const PassContext& ctx) {
    if (!ctx.evaluate) return false;
    bool changed = false;
    for (ir::Node* n : g.nodes()) {
        if (n->num_inputs() == 0 || is_random_op(n->op())) continue;
        bool constant = true;
        bool any = false;
        for (const ir::Value* in : n->inputs()) {
            if (!in) continue;
            any = true;
            constant &= in->is_constant();
        }
        if (!any || !constant) continue;
        bool sized = true;  // symbolic compiles: a constant broadcast to run-time dims (KilnExpand) stays
        for (const ir::Value* o : n->outputs()) sized &= o->type().is_static();
        if (!sized) continue;
        int64_t produced = 0;
        for (const ir::Value* o : n->outputs()) produced += shape_numel(o->type().static_shape());
        if (produced > ctx.fold_max_new_elements && produced > freed_elements(*n)) continue;
        std::string what = n->describe();
        try {
            changed |= ctx.evaluate(g, n);
        } catch (Error& e) {
            e.add_context("while folding " + what);
            throw;
        }
    }
    return changed;
}

}  // namespace kiln::pass
