#include "compiler/lower_group.h"

#include <algorithm>
#include <queue>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "codegen/c_emitter.h"
#include "ir/fusion_groups.h"
#include "op/registry.h"
#include "op/schedule_util.h"
#include "op/view_ops.h"
#include "support/error.h"
#include "te/schedule.h"
#include "tir/drop_tile_guards.h"
#include "tir/fuse_elementwise_loops.h"
#include "tir/lower.h"
#include "tir/partition_loops.h"
#include "tir/unswitch_loops.h"
#include "tir/simplify.h"

namespace kiln::compiler {
namespace {

double node_flops(const op::OpDef& def, const ir::Node& n) {
    for (const ir::Value* o : n.outputs())  // symbolic shapes: no static estimate
        if (!o->type().is_static()) return 0;
    for (const ir::Value* in : n.inputs())
        if (in && !in->type().is_static()) return 0;
    if (def.flops) return def.flops(n);
    double f = 0;
    for (const ir::Value* o : n.outputs()) f += static_cast<double>(shape_numel(o->type().static_shape()));
    return f;
}

/// Whether `t` reads `r`, directly or through other tensors.
bool depends_on(const te::TensorNode* t, const te::TensorNode* r, int depth = 0) {
    if (t == r) return true;
    if (t->is_placeholder || depth > 256) return false;
    for (const te::Tensor& in : t->inputs())
        if (depends_on(in.get(), r, depth + 1)) return true;
    return false;
}

/// True when every read of `r` in `e`, looking through inlined stages, is at exactly `axes`
/// (the reading stage's own index): then `r` may share the reader's buffer. The reader must be
/// the kernel's last stage (every other materialized stage has finished when it runs).
bool reads_only_at(const te::Expr& e, const te::TensorNode* r, const std::vector<const te::VarNode*>& axes,
                   const te::Schedule& sch) {
    return te::all_reads(e, [&](const te::TensorReadNode& n) {
        if (!depends_on(n.tensor.get(), r)) return true;
        // A materialized stage computed from r (Softmax's row sums of exp) is a buffer finished
        // before the reader starts, whatever index the reader takes it at.
        if (n.tensor.get() != r && sch.has_stage(n.tensor) && !sch[n.tensor].is_inlined()) return true;
        // Identity: each index is our axis, or 0 on a dim of extent 1 (broadcasting writes a
        // size-1 dim's index as 0; the output's dim is then 1 too).
        bool identity = n.indices.size() == axes.size();
        for (size_t k = 0; identity && k < axes.size(); ++k) {
            const te::Expr& ix = n.indices[k];
            identity = (ix->kind == te::ExprKind::kVar && ix.get() == axes[k]) ||
                       (ix->kind == te::ExprKind::kIntImm && static_cast<const te::IntImmNode&>(*ix).value == 0 &&
                        k < n.tensor->shape.size() && n.tensor->shape[k] == 1);
        }
        if (!identity) return false;
        if (n.tensor.get() == r) return true;
        // An inlined stage read at our index: check its body at its own axes.
        if (!sch.has_stage(n.tensor) || !sch[n.tensor].is_inlined()) return false;
        std::vector<const te::VarNode*> inner;
        for (const te::IterVar& iv : n.tensor->axis) inner.push_back(iv->var.get());
        return reads_only_at(n.tensor->body, r, inner, sch);
    });
}

/// True when `e` (through inlined stages) is a few vector instructions an element: sums,
/// products, min/max, selects, casts, negation, abs (a bias, a residual, ReLU/Clip). A
/// transcendental or a division computed in a register tile's write-back made the product
/// twice as slow (Whisper's erf GELU: 14.7 -> 30.8 ms; GCC keeps its constants in registers
/// across the whole tile nest, and the accumulators spill), so those keep their own pass.
bool cheap_epilogue(const te::Expr& e, const te::Schedule& sch, int depth = 0) {
    if (depth > 64) return false;
    switch (e->kind) {
        case te::ExprKind::kIntImm:
        case te::ExprKind::kFloatImm:
        case te::ExprKind::kVar: return true;
        case te::ExprKind::kBinary: {
            const auto& n = static_cast<const te::BinaryNode&>(*e);
            if (n.op == te::BinaryOp::kDiv || n.op == te::BinaryOp::kMod || n.op == te::BinaryOp::kPow) return false;
            return cheap_epilogue(n.a, sch, depth + 1) && cheap_epilogue(n.b, sch, depth + 1);
        }
        case te::ExprKind::kUnary: {
            const auto& n = static_cast<const te::UnaryNode&>(*e);
            if (n.op != te::UnaryOp::kNeg && n.op != te::UnaryOp::kAbs) return false;
            return cheap_epilogue(n.a, sch, depth + 1);
        }
        case te::ExprKind::kSelect: {
            const auto& n = static_cast<const te::SelectNode&>(*e);
            return cheap_epilogue(n.cond, sch, depth + 1) && cheap_epilogue(n.t, sch, depth + 1) &&
                   cheap_epilogue(n.f, sch, depth + 1);
        }
        case te::ExprKind::kCast: return cheap_epilogue(static_cast<const te::CastNode&>(*e).a, sch, depth + 1);
        case te::ExprKind::kTensorRead: {
            const auto& n = static_cast<const te::TensorReadNode&>(*e);
            for (const te::Expr& i : n.indices)
                if (!cheap_epilogue(i, sch, depth + 1)) return false;
            if (sch.has_stage(n.tensor) && sch[n.tensor].is_inlined()) return cheap_epilogue(n.tensor->body, sch, depth + 1);
            return true;
        }
        default: return false;
    }
}

/// The loop variables of `t`'s axes, in order (its own index, for reads_only_at).
std::vector<const te::VarNode*> axis_vars(const te::Tensor& t) {
    std::vector<const te::VarNode*> axes;
    for (const te::IterVar& iv : t->axis) axes.push_back(iv->var.get());
    return axes;
}

/// The stages that are not inlined, in schedule order (each a loop nest of the kernel).
std::vector<const te::Stage*> live_stages(const te::Schedule& sch) {
    std::vector<const te::Stage*> live;
    for (const te::Stage& st : sch.stages())
        if (!st.is_inlined()) live.push_back(&st);
    return live;
}

/// The position in `live` of the first stage that writes output `o`'s buffer (`live.size()`
/// when none does).
size_t stage_writing(const std::vector<const te::Stage*>& live, const te::Tensor& o) {
    size_t w = 0;
    while (w < live.size() && live[w]->tensor() != o && live[w]->storage() != o) ++w;
    return w;
}

/// Whether unit input `input` (placeholder `x`) could share output `o`'s buffer at all: not a
/// constant, of `o`'s dtype and dims.
bool same_buffer_type(const ir::Value* input, const te::Tensor& x, const te::Tensor& o) {
    return !input->is_constant() && x->dtype == o->dtype && te::same_dims(x->shape_exprs(), o->shape_exprs());
}

/// A fused kernel with one output O and a materialized stage T of O's shape and dtype that O reads
/// only at O's own index: T writes O's buffer directly and O then updates it in place, so the
/// kernel needs no temporary of the output's size. T is the nearest such stage before O: a
/// reduction with an elementwise epilogue, or Softmax's exp(x - max), which the row sums read
/// before O divides it (a temporary of the attention scores' size, 25 MB at 8x12x256x256, that
/// a symbolic kernel allocated on every call). Stages between T and O may read T anywhere: they
/// all finish before O starts. Where T is a register-tiled reduction (a product or a generated
/// conv) and O comes right after it, T computes O's values as it writes each tile back
/// (te::Stage::fuse_epilogue) when that is cheap (cheap_epilogue): a bias, a residual, a
/// ReLU run on values still in registers, not in a second pass over the output.
void store_stage_in_output(te::Schedule& sch, const std::vector<te::Tensor>& outs) {
    if (outs.size() != 1) return;
    const te::Tensor& o = outs[0];
    std::vector<te::Stage*> live;
    for (te::Stage& st : sch.stages())
        if (!st.is_inlined()) live.push_back(&st);
    if (live.size() < 2 || live.back()->tensor() != o) return;
    const std::vector<const te::VarNode*> axes = axis_vars(o);
    for (size_t k = live.size() - 1; k-- > 0;) {
        te::Stage* t = live[k];
        const te::Tensor& tt = t->tensor();
        if (tt->shape != o->shape || tt->dtype != o->dtype) continue;
        if (!te::same_dims(tt->shape_exprs(), o->shape_exprs())) continue;
        if (te::compute_dtype(tt->dtype) != tt->dtype) return;  // f16/bf16 accumulate elsewhere
        if (!reads_only_at(o->body, tt.get(), axes, sch)) continue;
        // A register-tiled reduction right before O computes O as it writes each tile back.
        if (k + 2 == live.size() && t->writes_local() && cheap_epilogue(o->body, sch)) t->fuse_epilogue(*live.back());
        else t->store_in(o);
        return;
    }
}

/// Whether `e` reads `x`, directly or through inlined stages (a materialized stage computed from
/// x is a buffer of its own, not a read of x).
bool reads_tensor(const te::Expr& e, const te::TensorNode* x, const te::Schedule& sch) {
    return !te::all_reads(e, [&](const te::TensorReadNode& n) {
        if (n.tensor.get() == x) return false;
        if (sch.has_stage(n.tensor) && sch[n.tensor].is_inlined()) return !reads_tensor(n.tensor->body, x, sch);
        return true;
    });
}

/// The unit inputs whose memory its one output may take (LoweredKernel::inplace_inputs): of the
/// output's dtype and dims, not constants, read only by the stages before W, the first stage
/// that writes the output's buffer, and by W itself at W's own index. An elementwise chain
/// qualifies (its one stage reads each input at its own index); so does Softmax (the row max
/// reads x, exp(x - max) is written into the output at x's own index, the sums and the
/// division read the output). `single_stage`: only kernels of one stage (a preemptible
/// compile: a kernel cut mid-way resumes only if it reads nothing it wrote, and a kernel of one
/// elementwise stage was the only in-place kind before).
std::vector<int> inplace_inputs(const te::Schedule& sch, const ComposedUnit& c, const KernelUnit& unit,
                                bool single_stage) {
    std::vector<int> out;
    if (c.outs.size() != 1) return out;
    const te::Tensor& o = c.outs[0];
    const std::vector<const te::Stage*> live = live_stages(sch);
    if (single_stage && live.size() != 1) return out;
    const size_t w = stage_writing(live, o);
    if (w == live.size()) return out;
    const te::Tensor& wt = live[w]->tensor();
    const std::vector<const te::VarNode*> axes = axis_vars(wt);
    for (size_t i = 0; i < c.params.size() && i < unit.inputs.size(); ++i) {
        const te::Tensor& x = c.params[i];
        if (!same_buffer_type(unit.inputs[i], x, o) || x->shape != o->shape) continue;
        if (!reads_only_at(wt->body, x.get(), axes, sch)) continue;
        bool read_later = false;
        for (size_t k = w + 1; k < live.size() && !read_later; ++k)
            read_later = reads_tensor(live[k]->tensor()->body, x.get(), sch);
        if (!read_later) out.push_back(static_cast<int>(i));
    }
    return out;
}

/// The (output, input) pairs of a kernel of several outputs in which each output may be written
/// over the input's memory (LoweredKernel::donatable): every stage that is not inlined is
/// elementwise over one shape (no reduction axes), the input is not a constant and has the
/// output's dtype and dims, the output's stage reads it only at its own index, earlier stages
/// only at theirs (loops of one shape may fuse, so an earlier stage's iteration i runs after the
/// output's iteration i-1 wrote over it), and no later stage reads it. The training step's
/// optimizer update is such a kernel: w' = w - lr * m' beside m' = mu * m + g.
std::vector<std::pair<int, int>> donatable_pairs(const te::Schedule& sch, const ComposedUnit& c, const KernelUnit& unit) {
    std::vector<std::pair<int, int>> out;
    if (c.outs.size() < 2) return out;
    const std::vector<const te::Stage*> live = live_stages(sch);
    for (const te::Stage* st : live)
        if (!st->all_reduce_axes().empty() || !te::same_dims(st->tensor()->shape_exprs(), c.outs[0]->shape_exprs()))
            return out;
    for (size_t ko = 0; ko < c.outs.size(); ++ko) {
        const te::Tensor& o = c.outs[ko];
        const size_t w = stage_writing(live, o);
        if (w == live.size()) continue;
        for (size_t i = 0; i < c.params.size() && i < unit.inputs.size(); ++i) {
            const te::Tensor& x = c.params[i];
            if (!same_buffer_type(unit.inputs[i], x, o)) continue;
            bool ok = true;
            for (size_t k = 0; k < live.size() && ok; ++k) {
                const te::Tensor& t = live[k]->tensor();
                if (!reads_tensor(t->body, x.get(), sch)) continue;
                ok = k <= w && reads_only_at(t->body, x.get(), axis_vars(t), sch);
            }
            if (ok) out.emplace_back(static_cast<int>(ko), static_cast<int>(i));
        }
    }
    return out;
}

/// A stage computed from a reduction and far smaller than the kernel's largest output (the
/// sigmoid of squeeze-and-excitation's channel scale, which a Mul broadcasts over the whole
/// activation): computed once into a temporary, not once per output element.
bool small_reduction_epilogue(const te::Stage& st, te::Schedule& sch, const std::vector<te::Tensor>& outs) {
    int64_t largest = 0;
    for (const te::Tensor& o : outs) largest = std::max(largest, op::assumed_numel(o));  // symbolic: assumed dims
    const te::TensorNode* t = st.tensor().get();
    if (op::assumed_numel(st.tensor()) * 16 > largest) return false;
    for (te::Stage& r : sch.stages())
        if (r.tensor().get() != t && !r.all_reduce_axes().empty() && depends_on(t, r.tensor().get())) return true;
    return false;
}

}  // namespace

int SymbolicDims::add(const std::string& name) {
    for (size_t i = 0; i < names.size(); ++i)
        if (names[i] == name) return static_cast<int>(i);
    names.push_back(name);
    vars.push_back(te::make_dim(name));
    return static_cast<int>(names.size()) - 1;
}

std::vector<te::Expr> SymbolicDims::of(const ir::TensorType& t) const {
    std::vector<te::Expr> out;
    for (const ir::Dim& d : t.shape) {
        if (d.is_static()) {
            out.push_back(te::int_imm(d.value));
            continue;
        }
        auto it = std::find(names.begin(), names.end(), d.symbol);
        // A dim computed from others (a Reshape's h*w) that no rule of the symbolic path turned
        // into the compile's dims: the compile refuses the model (sessions compile per shape).
        KILN_CHECK(it != names.end(), kUnsupported)
            << "symbolic compile: dimension '" << d.symbol << "' of " << t.str()
            << " is computed from the input dims in a way no kernel takes as a parameter yet; "
               "compile per shape (give --dim values)";
        out.push_back(vars[static_cast<size_t>(it - names.begin())]);
    }
    return out;
}

int SymbolicDims::index_of(const te::VarNode* v) const {
    for (size_t i = 0; i < vars.size(); ++i)
        if (vars[i].get() == v) return static_cast<int>(i);
    return -1;
}

std::string KernelUnit::ops() const {
    std::string s;
    for (const ir::Node* n : nodes) s += (s.empty() ? "" : "+") + n->op();
    return s;
}

std::vector<KernelUnit> partition_kernels(const ir::Graph& g) {
    const std::vector<ir::Node*> nodes = g.nodes();
    ir::FusionGroups groups = ir::fusion_groups(g);
    std::unordered_map<const ir::Node*, int> unit_of;
    for (size_t i = 0; i < nodes.size(); ++i) unit_of[nodes[i]] = groups.set_of[i];
    std::vector<KernelUnit> units(groups.sets.size());
    for (size_t u = 0; u < units.size(); ++u) units[u].nodes = std::move(groups.sets[u]);
    std::unordered_set<const ir::Value*> graph_outputs(g.outputs().begin(), g.outputs().end());
    const int nu = static_cast<int>(units.size());
    std::vector<std::set<int>> succ(nu);
    std::vector<int> pending(nu, 0);
    for (int u = 0; u < nu; ++u) {
        KernelUnit& k = units[u];
        std::unordered_set<const ir::Value*> seen;
        for (ir::Node* n : k.nodes) {
            for (ir::Value* in : n->inputs()) {
                if (!in) continue;
                ir::Node* p = in->producer();
                bool inside = p && unit_of.at(p) == u;
                if (!inside && seen.insert(in).second) k.inputs.push_back(in);
                if (p && !inside && succ[unit_of.at(p)].insert(u).second) ++pending[u];
            }
            for (ir::Value* o : n->outputs()) {
                bool outside = graph_outputs.count(o) > 0;
                for (const ir::Node* user : o->users()) outside |= unit_of.at(user) != u;
                if (outside) k.outputs.push_back(o);
            }
        }
    }
    // Kahn's algorithm over units; ties by first node position (the graph's order).
    std::priority_queue<int, std::vector<int>, std::greater<>> ready;
    for (int u = 0; u < nu; ++u)
        if (pending[u] == 0) ready.push(u);
    std::vector<KernelUnit> ordered;
    while (!ready.empty()) {
        int u = ready.top();
        ready.pop();
        ordered.push_back(std::move(units[u]));
        for (int s : succ[u])
            if (--pending[s] == 0) ready.push(s);
    }
    KILN_ICHECK(static_cast<int>(ordered.size()) == nu) << "fusion groups form a cycle (a group is not convex)";
    return ordered;
}

ComposedUnit compose_unit(const KernelUnit& unit, const SymbolicDims* dims) {
    const op::OpRegistry& reg = op::OpRegistry::global();
    std::unordered_map<const ir::Value*, te::Tensor> tensor_of;
    std::vector<te::Tensor> params;
    for (size_t i = 0; i < unit.inputs.size(); ++i) {
        const ir::Value* v = unit.inputs[i];
        const std::string name = "in" + std::to_string(i);
        te::Tensor p = dims ? te::sym_placeholder(dims->of(v->type()), v->type().dtype, name)
                            : te::placeholder(v->type().static_shape(), v->type().dtype, name);
        tensor_of[v] = p;
        params.push_back(p);
    }
    ComposedUnit c;
    const ir::Node*& anchor = c.anchor;
    const op::OpDef*& anchor_def = c.anchor_def;
    std::vector<te::Tensor>& anchor_outs = c.anchor_outs;
    std::set<const te::TensorNode*>& node_outputs = c.node_outputs;  // each member's returned tensors
    for (const ir::Node* n : unit.nodes) {
        const op::OpDef* def = reg.find(n->op());
        KILN_ICHECK(def != nullptr && def->compute) << "op " << n->op() << " has no compute";
        try {
            op::ComputeArgs args{*n, {}, {}};
            for (const ir::Value* v : n->inputs()) args.inputs.push_back(v ? tensor_of.at(v) : nullptr);
            for (const ir::Value* o : n->outputs()) args.output_types.push_back(o->type());
            if (dims)
                for (const ir::Value* o : n->outputs()) args.output_dims.push_back(dims->of(o->type()));
            std::vector<te::Tensor> outs = def->compute(args);
            KILN_ICHECK(outs.size() == n->num_outputs())
                << n->describe() << ": compute returned " << outs.size() << " tensors for " << n->num_outputs() << " outputs";
            for (size_t i = 0; i < outs.size(); ++i) {
                const bool same_shape = dims ? te::same_dims(outs[i]->shape_exprs(), dims->of(n->output(i)->type()))
                                             : outs[i]->shape == n->output(i)->type().static_shape();
                KILN_ICHECK(outs[i]->dtype == n->output(i)->type().dtype && same_shape)
                    << n->describe() << ": compute output " << i << " is " << dtype_name(outs[i]->dtype)
                    << shape_str(outs[i]->shape) << ", inferred " << n->output(i)->type().str();
                tensor_of[n->output(i)] = outs[i];
                node_outputs.insert(outs[i].get());
            }
            c.flops += node_flops(*def, *n);
            if (!anchor && (unit.nodes.size() == 1 || op::is_fusion_anchor(def->pattern))) {
                anchor = n;
                anchor_def = def;
                anchor_outs = outs;
            }
        } catch (Error& e) {
            e.add_context("while lowering " + n->describe());
            throw;
        }
    }
    // A unit of data movement only (a Reshape and a Transpose: the attention's head split) has
    // no anchor; its Transpose's schedule tiles it where it can (a Transpose stage that is the
    // output, reading the input's contiguous axis along another one) instead of the default
    // rows, which gathered every element from another line: 1.42 -> 0.53 ms for BERT's
    // [1024, 768] -> [8, 12, 64, 128] key split on one thread, with the tile of
    // codegen/transpose_tiles.h. A unit with math (a polyphase interleave and its Tanh) keeps
    // the default rows (codegen/staged_gathers.h vectorizes its math). A CUDA unit only takes
    // the anchor's name.
    const bool movement_only = std::all_of(unit.nodes.begin(), unit.nodes.end(),
                                           [](const ir::Node* n) { return op::is_data_movement_op(n->op()); });
    if (!anchor && movement_only)
        for (const ir::Node* n : unit.nodes)
            if (n->op() == "Transpose") {
                anchor = n;
                anchor_def = reg.find(n->op());
                anchor_outs = {tensor_of.at(n->output(0))};
                break;
            }
    for (const ir::Value* v : unit.outputs) c.outs.push_back(tensor_of.at(v));
    c.params = std::move(params);
    return c;
}

void inline_unit_members(te::Schedule& sch, const KernelUnit& unit, const ComposedUnit& c) {
    std::set<const te::TensorNode*> out_set;
    for (const te::Tensor& o : c.outs) out_set.insert(o.get());
    if (unit.nodes.size() > 1) {
        for (te::Stage& st : sch.stages()) {
            const te::TensorNode* t = st.tensor().get();
            if (c.node_outputs.count(t) && !out_set.count(t) && st.all_reduce_axes().empty() &&
                !small_reduction_epilogue(st, sch, c.outs))
                st.compute_inline();
        }
    }
}

LoweredKernel lower_unit(const KernelUnit& unit, bool params_may_alias, const te::KnobValues& knobs,
                         const SymbolicDims* dims, int threads, bool preemptible, bool donations) {
    ComposedUnit c = compose_unit(unit, dims);
    LoweredKernel k;
    k.description = unit.ops();
    k.flops = c.flops;
    k.node_name = (c.anchor ? c.anchor : unit.nodes.front())->name();
    const std::vector<te::Tensor>& outs = c.outs;
    std::vector<te::Tensor> params = c.params;
    te::ScheduleConfig config(knobs);
    config.set_threads(threads);
    config.set_preemptible(preemptible);
    te::Schedule sch = te::create_schedule(outs, std::move(config));
    inline_unit_members(sch, unit, c);
    const op::OpDef* anchor_def = c.anchor_def;
    const std::vector<te::Tensor>& anchor_outs = c.anchor_outs;
    if (c.anchor && anchor_def->schedule) anchor_def->schedule(sch, anchor_outs);
    op::default_schedule(sch, outs);
    store_stage_in_output(sch, outs);
    if (params_may_alias) k.inplace_inputs = inplace_inputs(sch, c, unit, preemptible);
    if (donations) k.donatable = donatable_pairs(sch, c, unit);
    for (const te::Tensor& o : outs) params.push_back(o);
    // unswitch_loops and partition_loops between two simplifies: the first puts comparisons in
    // `i < c` form, the second folds each piece's selects and clamps.
    // fuse_elementwise_loops last: it needs the loops' final form (partitioned, guards dropped).
    k.func = tir::fuse_elementwise_loops(tir::drop_tile_guards(tir::simplify(
        tir::partition_loops(tir::unswitch_loops(tir::simplify(tir::lower(sch, params, "kiln_kernel")))))));
    k.func.params_may_alias = !k.inplace_inputs.empty() || !k.donatable.empty();
    k.source = codegen::emit_c(k.func);
    k.num_inputs = static_cast<int>(unit.inputs.size());
    k.space = sch.config().space();
    k.knobs = sch.config().applied();
    return k;
}

double unit_flops(const KernelUnit& unit) {
    double f = 0;
    for (const ir::Node* n : unit.nodes)
        if (const op::OpDef* def = op::OpRegistry::global().find(n->op())) f += node_flops(*def, *n);
    return f;
}

}  // namespace kiln::compiler
