#include "compiler/fold_constant_node.h"

#include <optional>
#include <unordered_set>

#include "codegen/c_emitter.h"
#include "codegen/compile_driver.h"
#include "compiler/compile.h"
#include "compiler/host_folds.h"
#include "op/op_def.h"
#include "op/registry.h"
#include "op/view_ops.h"
#include "runtime/buffer_table.h"
#include "runtime/executable.h"
#include "support/error.h"
#include "te/schedule.h"
#include "tir/interpreter.h"
#include "tir/lower.h"
#include "tir/simplify.h"

namespace kiln::compiler {
namespace {

/// One node about to be folded: its compute over placeholders of the constant inputs, the
/// buffers it reads and writes (inputs, then outputs), and whether it runs compiled.
struct Fold {
    ir::Node* node = nullptr;
    std::vector<te::Tensor> outs, params;
    std::vector<Tensor> buffers;
    bool compiled = false;
    bool on_host = false;  // computed by run_host_fold
};

/// The fold of `n`, or nullopt when it does not qualify (no compute, a non-static or too large
/// output, an input its compute reads that is not a constant).
std::optional<Fold> plan_fold(ir::Node* n, int64_t max_elements) {
    const op::OpDef* def = op::OpRegistry::global().find(n->op());
    if (!def || !def->compute) return std::nullopt;
    int64_t elements = 0;
    for (ir::Value* o : n->outputs()) {
        if (!o->type().is_static()) return std::nullopt;
        elements += shape_numel(o->type().static_shape());
    }
    if (elements > max_elements) return std::nullopt;

    op::ComputeArgs args{*n, {}, {}};
    std::vector<Tensor> input_data;  // per input slot; undefined where not constant
    for (size_t i = 0; i < n->num_inputs(); ++i) {
        ir::Value* v = n->input(i);
        if (!v) {
            args.inputs.push_back(nullptr);
            input_data.emplace_back();
            continue;
        }
        args.inputs.push_back(te::placeholder(v->type().static_shape(), v->type().dtype, "in" + std::to_string(i)));
        input_data.push_back(v->is_constant() ? v->constant() : Tensor());
    }
    for (ir::Value* o : n->outputs()) args.output_types.push_back(o->type());
    Fold f;
    f.node = n;
    f.outs = def->compute(args);
    if (f.outs.size() != n->num_outputs()) return std::nullopt;

    // Every placeholder the outputs read must be a constant.
    std::unordered_set<const te::TensorNode*> reached;
    for (const te::Tensor& t : te::post_order(f.outs)) reached.insert(t.get());
    for (size_t i = 0; i < args.inputs.size(); ++i) {
        const te::Tensor& p = args.inputs[i];
        if (!p || !reached.count(p.get())) continue;
        if (!input_data[i].defined() || !n->input(i)->is_constant()) return std::nullopt;
        f.params.push_back(p);
        f.buffers.push_back(input_data[i]);
    }
    for (const te::Tensor& o : f.outs) {
        f.params.push_back(o);
        f.buffers.emplace_back(o->dtype, o->shape);
    }
    f.compiled = elements >= kCompiledFoldElements;
    for (const Tensor& b : f.buffers) f.compiled &= b.dtype() != DType::kString;
    return f;
}

/// The C source of a compiled fold: the default schedule, lowered and printed like any kernel,
/// so a warm start folds a model's weights (BatchNorm folding, packing) from the kernel cache,
/// without the compiler and without interpreting millions of elements.
std::string fold_source(const Fold& f) {
    te::Schedule s = te::create_schedule(f.outs);
    op::default_schedule(s, f.outs);
    return codegen::emit_c(tir::simplify(tir::lower(s, f.params, "kiln_kernel")));
}

/// Runs the compiled folds of `folds` from one build: their kernels compiled together
/// (codegen::compile_c_kernels: a few kernels per compiler process when many are missing), at
/// -O1 since each runs once per load.
void run_compiled(std::vector<Fold>& folds) {
    std::vector<Fold*> compiled;
    std::vector<std::string> sources;
    for (Fold& f : folds)
        if (f.compiled) {
            compiled.push_back(&f);
            sources.push_back(fold_source(f));
        }
    if (compiled.empty()) return;
    runtime::Executable exe;
    for (const codegen::KernelBuild& b : codegen::compile_c_kernels(sources, 0, codegen::Optimization::kRunsOnce))
        exe.kernels.push_back({b.library.path, b.symbol, "fold"});
    exe.load();
    for (size_t k = 0; k < compiled.size(); ++k) {
        std::vector<void*> args;
        for (Tensor& b : compiled[k]->buffers) args.push_back(b.data());
        exe.run_kernel(static_cast<int>(k), args.data(), runtime::make_kernel_env(nullptr)).throw_if_error();
    }
}

/// Evaluates an interpreted fold: the unscheduled compute through the tir interpreter.
void run_interpreted(Fold& f) {
    te::Schedule plain = te::create_schedule(f.outs);
    tir::interpret(tir::simplify(tir::lower(plain, f.params, "fold")), f.buffers);
}

/// Replaces the folded node's outputs by constants holding its results (keeping their names).
void replace_by_results(ir::Graph& g, Fold& f) {
    size_t first_out = f.buffers.size() - f.outs.size();
    for (size_t i = 0; i < f.outs.size(); ++i) {
        ir::Value* old = f.node->output(i);
        std::string name = old->name();
        old->set_name(g.fresh_name(name + ".unfolded"));
        ir::Value* c = g.add_constant(name, f.buffers[first_out + i]);
        g.replace_all_uses(old, c);
    }
    g.erase_node(f.node);
}

/// A reshape-like node (is_view_op) of a constant runs as a view of its input's buffer, so its
/// fold is that: the constant's bytes under the output's shape, without a kernel (a layout
/// pass's weight Reshape between a pad and a transpose cost a compile of its own).
bool fold_view(ir::Graph& g, ir::Node* n, int64_t max_elements) {
    if (!op::is_view_op(n->op()) || n->num_outputs() != 1 || n->num_inputs() < 1 || !n->input(0) ||
        !n->input(0)->is_constant())
        return false;
    const ir::Value* in = n->input(0);
    ir::Value* out = n->output(0);
    if (!out->type().is_static() || in->type().dtype != out->type().dtype || in->type().dtype == DType::kString)
        return false;
    const Shape shape = out->type().static_shape();
    const Tensor& data = in->constant();
    if (shape_numel(shape) != data.numel() || shape_numel(shape) > max_elements) return false;
    const std::string name = out->name();
    out->set_name(g.fresh_name(name + ".unfolded"));
    g.replace_all_uses(out, g.add_constant(name, data.reshaped(shape)));
    g.erase_node(n);
    return true;
}

}  // namespace

int fold_constant_nodes(ir::Graph& g, const std::vector<ir::Node*>& nodes, int64_t max_elements) {
    std::vector<Fold> folds;
    int views = 0;
    for (ir::Node* n : nodes) {
        if (fold_view(g, n, max_elements)) {
            ++views;
            continue;
        }
        if (std::optional<Fold> f = plan_fold(n, max_elements)) folds.push_back(std::move(*f));
    }
    for (Fold& f : folds)  // the commonest weight rewrites need no kernel (host_folds.h)
        if (f.outs.size() == 1 && run_host_fold(*f.node, f.buffers.back())) {
            f.on_host = true;
            f.compiled = false;
        }
    run_compiled(folds);
    for (Fold& f : folds)
        if (!f.compiled && !f.on_host) run_interpreted(f);
    for (Fold& f : folds) replace_by_results(g, f);
    return views + static_cast<int>(folds.size());
}

bool fold_constant_node(ir::Graph& g, ir::Node* n, int64_t max_elements) {
    return fold_constant_nodes(g, {n}, max_elements) == 1;
}

}  // namespace kiln::compiler
