#include "compiler/fold_constant_node.h"

#include <unordered_set>

#include "codegen/c_emitter.h"
#include "codegen/compile_driver.h"
#include "op/op_def.h"
#include "op/registry.h"
#include "runtime/buffer_table.h"
#include "runtime/executable.h"
#include "support/error.h"
#include "te/schedule.h"
#include "tir/interpreter.h"
#include "tir/lower.h"
#include "tir/simplify.h"

namespace kiln::compiler {
namespace {

/// Runs the node's compute on `buffers` (inputs, then outputs) as a compiled kernel: the default
/// schedule, lowered and printed like any kernel and compiled through the kernel cache, so a
/// warm start folds a model's weights (BatchNorm folding, packing) without the compiler and
/// without interpreting millions of elements.
void run_compiled(const std::vector<te::Tensor>& outs, const std::vector<te::Tensor>& params, std::vector<Tensor>& buffers) {
    te::Schedule s = te::create_schedule(outs);
    op::default_schedule(s, outs);
    tir::PrimFunc f = tir::simplify(tir::lower(s, params, "kiln_kernel"));
    codegen::CompiledLibrary lib = codegen::compile_c(codegen::emit_c(f));
    runtime::Executable exe;
    exe.kernels.push_back({lib.path, "kiln_kernel", "fold"});
    exe.load();
    std::vector<void*> args;
    for (Tensor& b : buffers) args.push_back(b.data());
    exe.run_kernel(0, args.data(), runtime::make_kernel_env(nullptr)).throw_if_error();
}

}  // namespace

bool fold_constant_node(ir::Graph& g, ir::Node* n, int64_t max_elements) {
    const op::OpDef* def = op::OpRegistry::global().find(n->op());
    if (!def || !def->compute) return false;
    int64_t elements = 0;
    for (ir::Value* o : n->outputs()) {
        if (!o->type().is_static()) return false;
        elements += shape_numel(o->type().static_shape());
    }
    if (elements > max_elements) return false;

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
    std::vector<te::Tensor> outs = def->compute(args);
    if (outs.size() != n->num_outputs()) return false;

    // Every placeholder the outputs read must be a constant.
    std::unordered_set<const te::TensorNode*> reached;
    for (const te::Tensor& t : te::post_order(outs)) reached.insert(t.get());
    std::vector<te::Tensor> params;
    std::vector<Tensor> buffers;
    for (size_t i = 0; i < args.inputs.size(); ++i) {
        const te::Tensor& p = args.inputs[i];
        if (!p || !reached.count(p.get())) continue;
        if (!input_data[i].defined() || !n->input(i)->is_constant()) return false;
        params.push_back(p);
        buffers.push_back(input_data[i]);
    }
    for (size_t i = 0; i < outs.size(); ++i) {
        params.push_back(outs[i]);
        buffers.emplace_back(outs[i]->dtype, outs[i]->shape);
    }
    bool compiled = elements >= kCompiledFoldElements;
    for (const Tensor& b : buffers) compiled &= b.dtype() != DType::kString;
    if (compiled) {
        run_compiled(outs, params, buffers);
    } else {
        te::Schedule plain = te::create_schedule(outs);
        tir::PrimFunc f = tir::simplify(tir::lower(plain, params, "fold"));
        tir::interpret(f, buffers);
    }

    size_t first_out = buffers.size() - outs.size();
    for (size_t i = 0; i < outs.size(); ++i) {
        ir::Value* old = n->output(i);
        std::string name = old->name();
        old->set_name(g.fresh_name(name + ".unfolded"));
        ir::Value* c = g.add_constant(name, buffers[first_out + i]);
        g.replace_all_uses(old, c);
    }
    g.erase_node(n);
    return true;
}

}  // namespace kiln::compiler
