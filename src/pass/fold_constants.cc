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

/// Whether fold_constants folds `n` now: every input a constant, static outputs no larger than
/// the context allows (or freeing as much constant data as they make).
bool foldable(const ir::Node& n, const PassContext& ctx) {
    if (n.num_inputs() == 0 || is_random_op(n.op())) return false;
    bool constant = true;
    bool any = false;
    for (const ir::Value* in : n.inputs()) {
        if (!in) continue;
        any = true;
        constant &= in->is_constant();
    }
    if (!any || !constant) return false;
    bool sized = true;  // symbolic compiles: a constant broadcast to run-time dims (KilnExpand) stays
    for (const ir::Value* o : n.outputs()) sized &= o->type().is_static();
    if (!sized) return false;
    int64_t produced = 0;
    for (const ir::Value* o : n.outputs()) produced += shape_numel(o->type().static_shape());
    return produced <= ctx.fold_max_new_elements || produced <= freed_elements(n);
}

/// Folds node by node through PassContext::evaluate, each with its description on an error.
bool fold_each(ir::Graph& g, const std::vector<ir::Node*>& nodes, const PassContext& ctx) {
    bool changed = false;
    for (ir::Node* n : nodes) {
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

}  // namespace

bool fold_constants(ir::Graph& g, const PassContext& ctx) {
    if (!ctx.evaluate) return false;
    if (!ctx.evaluate_all) {  // node by node, in topological order: a chain folds in one sweep
        bool changed = false;
        for (ir::Node* n : g.nodes())
            if (foldable(*n, ctx)) changed |= fold_each(g, {n}, ctx);
        return changed;
    }
    // Waves: the nodes foldable now, evaluated together (their kernels built at once), then the
    // nodes that reading their results made foldable. A failing wave is folded again node by
    // node, so the error names its node.
    bool changed = false;
    for (;;) {
        std::vector<ir::Node*> wave;
        for (ir::Node* n : g.nodes())
            if (foldable(*n, ctx)) wave.push_back(n);
        if (wave.empty()) return changed;
        int folded = 0;
        try {
            folded = ctx.evaluate_all(g, wave);
        } catch (Error&) {
            return fold_each(g, wave, ctx) || changed;
        }
        if (folded == 0) return changed;
        changed = true;
    }
}

}  // namespace kiln::pass
