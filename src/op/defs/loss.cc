// Loss ops: NegativeLogLikelihoodLoss (opset 12/13/22) and SoftmaxCrossEntropyLoss (opset
// 12/13), as TE stages following the ONNX reference formulas.
//
// Shapes: input / scores x [N, C, d1..dk], target t [N, d1..dk] (i32/i64), optional weight
// w [C]. For every target position p = (n, d1..dk), with c = clamp(t[p], 0, C-1) (the reference
// gathers the weight with np.take(mode="clip"); an ignored target may lie outside [0, C), so the
// clamp keeps every read in bounds) and keep = (t[p] != ignore_index) (true without the attr):
//   wt[p]   = keep ? (w ? w[c] : 1) : 0                                       (stage "<op>_w")
//   loss[p] = -x[n, c, d1..dk] * wt[p]                                        (stage "<op>_elem")
// reduction "none" returns loss (shape of t); "sum" returns the scalar sum of loss; "mean" the
// scalar sum(loss) / sum(wt) (all targets ignored: 0/0 = NaN, like the reference).
// SoftmaxCrossEntropyLoss first computes log_prob = log_softmax(x) over axis 1 (max-reduce,
// exp-sum-reduce, log, as in softmax_family.cc), applies the NLL above to it, and optionally
// returns log_prob as its second output.
// Every stage computes in the compute dtype (f32 for f16/bf16). Pattern kOpaque: chained
// reductions ending in a scalar.
//
// Gradients (op/gradient.h), built from a mask M[n, c, d..] = onehot(t)[c] * keep * (w ? w[c]
// : 1) (OneHot along axis 1; keep zeroes ignored targets, also ones OneHot would wrap):
//   d loss / d lp = -M * G,   G = g (none: per target, broadcast over c), g (sum), g / sum(M)
//   (mean), where lp is NLL's input or SCE's log_prob (plus log_prob's own output gradient);
//   SCE: dx = dlp - exp(lp) * sum_c dlp (through the log-softmax);
//   d loss / d w[c] = sum over targets with label c (kept) of G * (-lp[t] - (mean ? loss : 0)).
// Targets are integers: no gradient.
#include <string>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

const char* const kReductions[] = {"none", "sum", "mean"};

std::string reduction_of(const ir::Node& n) {
    const std::string r = n.attr_string("reduction", "mean");
    for (const char* ok : kReductions)
        if (r == ok) return r;
    KILN_THROW(kInvalidModel) << node_label(n)
                              << ": attribute reduction must be one of none, sum, mean; got '" << r
                              << "'";
}

// Output types shared by both ops (x, target, weight at inputs 0, 1, 2).
std::vector<ir::TensorType> loss_infer(const ir::Node& n, const char* x_name, const char* t_name,
                                       const char* w_name) {
    const auto& x = input_type(n, 0, x_name);
    const auto& t = input_type(n, 1, t_name);
    check_dtype(n, x_name, x.dtype, float_types());
    check_dtype(n, t_name, t.dtype, {DType::kInt32, DType::kInt64});
    KILN_CHECK(x.rank() >= 2, kInvalidModel)
        << node_label(n) << ": input " << x_name
        << " must have rank >= 2 ([N, C, d1..dk]), got rank " << x.rank();
    KILN_CHECK(t.rank() == x.rank() - 1, kInvalidModel)
        << node_label(n) << ": input " << t_name << " must have rank " << x.rank() - 1
        << " ([N, d1..dk]), got " << dims_str(t.shape);
    for (int k = 0; k < t.rank(); ++k) {
        const ir::Dim& want = x.shape[k == 0 ? 0 : k + 1];
        const ir::Dim& got = t.shape[k];
        KILN_CHECK(!want.is_static() || !got.is_static() || want == got, kInvalidModel)
            << node_label(n) << ": input " << t_name << " of shape " << dims_str(t.shape)
            << " does not match " << x_name << " of shape " << dims_str(x.shape)
            << " (expected [N, d1..dk])";
    }
    if (has_input(n, 2)) {
        const auto& w = n.input(2)->type();
        check_same_dtype(n, x_name, x.dtype, w_name, w.dtype);
        KILN_CHECK(w.rank() == 1 && (!w.shape[0].is_static() || !x.shape[1].is_static() ||
                                     w.shape[0] == x.shape[1]),
                   kInvalidModel)
            << node_label(n) << ": input " << w_name << " must have shape [C] = ["
            << x.shape[1].value << "], got " << dims_str(w.shape);
    }
    std::vector<ir::TensorType> out;
    if (reduction_of(n) == "none")
        out.push_back({x.dtype, t.shape});
    else
        out.push_back({x.dtype, {}});
    if (n.num_outputs() > 1) out.push_back(x);
    return out;
}

// NLL over `x` (shape [N, C, d..], compute dtype cdt) with the node's target / weight inputs;
// returns the loss tensor of dtype `out_dtype`.
te::Tensor nll_stages(const ComputeArgs& a, const te::Tensor& x, DType cdt,
                      const std::string& name) {
    te::Tensor t = a.in(1);
    te::Tensor w = a.has_input(2) ? a.in(2) : nullptr;
    const int64_t C = x->shape[1];
    const bool has_ii = a.node.has_attr("ignore_index");
    const int64_t ii = a.node.attr_int("ignore_index", 0);
    const std::string reduction = reduction_of(a.node);
    const DType odt = a.out_dtype(0);
    const Shape tshape = t->shape;

    auto target = [&](const std::vector<Var>& p) {
        return te::cast(DType::kInt64, te::read(t, p));
    };
    auto weight_at = [&](const std::vector<Var>& p) {
        Expr tv = target(p);
        Expr wv = w ? te::cast(cdt, te::read(w, {clamp_index(tv, C)})) : te::make_const(cdt, 1);
        if (has_ii) wv = te::select(te::ne(tv, te::int_imm(ii)), wv, te::make_const(cdt, 0));
        return wv;
    };
    auto elem_at = [&](const std::vector<Var>& p) {
        std::vector<Expr> idx{p[0], clamp_index(target(p), C)};
        idx.insert(idx.end(), p.begin() + 1, p.end());
        return -te::cast(cdt, te::read(x, idx)) * weight_at(p);
    };
    if (reduction == "none") return te::compute(tshape, elem_at, name, odt);

    te::Tensor elem = te::compute(tshape, elem_at, name + "_elem", cdt);
    auto reduce_all = [&](const te::Tensor& src, const std::string& stage) {
        std::vector<te::IterVar> r;
        std::vector<Expr> idx;
        for (size_t k = 0; k < tshape.size(); ++k) {
            r.push_back(te::reduce_axis(tshape[k], "r" + std::to_string(k)));
            idx.push_back(r.back()->var);
        }
        return te::compute(
            {}, [&](const std::vector<Var>&) { return te::sum(te::read(src, idx), r); }, stage,
            cdt);
    };
    te::Tensor total = reduce_all(elem, name + "_sum");
    if (reduction == "sum") {
        return te::compute(
            {}, [&](const std::vector<Var>&) { return te::read(total, std::vector<Expr>{}); }, name,
            odt);
    }
    te::Tensor wt = te::compute(tshape, weight_at, name + "_w", cdt);
    te::Tensor wsum = reduce_all(wt, name + "_wsum");
    return te::compute(
        {},
        [&](const std::vector<Var>&) {
            return te::read(total, std::vector<Expr>{}) / te::read(wsum, std::vector<Expr>{});
        },
        name, odt);
}

// The gradients of both losses; `log_softmax`: SoftmaxCrossEntropyLoss (lp is log_prob).
std::vector<ir::Value*> loss_gradient(GradientBuilder& b, bool log_softmax) {
    std::vector<ir::Value*> grads(b.num_inputs(), nullptr);
    const ir::Node& n = b.node();
    const ir::TensorType& xt = b.input(0)->type();
    const Shape xs = xt.static_shape();
    const int rank = static_cast<int>(xs.size());
    const DType dt = xt.dtype;
    const std::string reduction = reduction_of(n);
    ir::Value* target = b.input(1);
    ir::Value* weight = has_input(n, 2) ? b.input(2) : nullptr;

    // lp: the log-probabilities the NLL reads.
    ir::Value* lp = b.input(0);
    if (log_softmax)
        lp = n.num_outputs() > 1 ? b.output(1) : b.emit1("LogSoftmax", {b.input(0)}, {{"axis", int64_t{1}}});

    Tensor off_on(dt, {2});
    off_on.set_f64(0, 0.0);
    off_on.set_f64(1, 1.0);
    ir::Value* mask =
        b.emit1("OneHot", {target, b.ints({xs[1]}), b.constant(std::move(off_on))}, {{"axis", int64_t{1}}});
    if (n.has_attr("ignore_index")) {
        const DType tdt = target->type().dtype;
        const double ignore_index = static_cast<double>(n.attr_int("ignore_index", 0));
        ir::Value* ignored = b.emit1("Equal", {target, b.scalar(ignore_index, tdt)});
        ir::Value* keep = b.emit1("Where", {ignored, b.scalar(0.0, dt), b.scalar(1.0, dt)});
        mask = b.emit1("Mul", {mask, b.emit1("Unsqueeze", {keep, b.ints({1})})});
    }
    Shape w_view(rank, 1);
    w_view[1] = xs[1];
    ir::Value* wmask = weight ? b.emit1("Mul", {mask, b.reshape(weight, w_view)}) : mask;

    // G: d loss / d (per-target loss), broadcastable against [N, C, d..].
    ir::Value* g = b.output_grad(0);
    ir::Value* G = nullptr;
    ir::Value* wsum = nullptr;
    if (g) {
        if (reduction == "none") {
            G = b.emit1("Unsqueeze", {g, b.ints({1})});
        } else if (reduction == "sum") {
            G = g;
        } else {
            wsum = b.emit1("ReduceSum", {wmask}, {{"keepdims", int64_t{0}}});
            G = b.emit1("Div", {g, wsum});
        }
    }

    if (b.needs_grad(0)) {
        ir::Value* dlp = G ? b.emit1("Neg", {b.emit1("Mul", {wmask, G})}) : nullptr;
        if (log_softmax && n.num_outputs() > 1 && b.output_grad(1))
            dlp = dlp ? b.emit1("Add", {dlp, b.output_grad(1)}) : b.output_grad(1);
        if (!dlp) dlp = b.filled(xt, 0.0);
        if (log_softmax) {
            ir::Value* total = b.emit1("ReduceSum", {dlp, b.ints({1})}, {{"keepdims", int64_t{1}}});
            dlp = b.emit1("Sub", {dlp, b.emit1("Mul", {b.emit1("Exp", {lp}), total})});
        }
        grads[0] = dlp;
    }

    if (weight && b.needs_grad(2)) {
        if (!G) {
            grads[2] = b.filled(weight->type(), 0.0);
        } else {
            // -lp at each kept target, [N, 1, d..], then G * (that - loss for mean).
            ir::Value* picked = b.emit1("Neg", {b.emit1("ReduceSum", {b.emit1("Mul", {mask, lp}), b.ints({1})},
                                                         {{"keepdims", int64_t{1}}})});
            if (reduction == "mean") picked = b.emit1("Sub", {picked, b.output(0)});
            ir::Value* per_class = b.emit1("Mul", {mask, b.emit1("Mul", {picked, G})});
            std::vector<int64_t> axes;
            for (int d = 0; d < rank; ++d)
                if (d != 1) axes.push_back(d);
            grads[2] = b.emit1("ReduceSum", {per_class, b.ints(axes)}, {{"keepdims", int64_t{0}}});
        }
    }
    return grads;
}

std::vector<AttrSpec> loss_attrs() {
    return {{"reduction", AttrKind::kString, ir::Attr(std::string("mean"))},
            {"ignore_index", AttrKind::kInt, std::nullopt}};
}

OpDef nll_loss_op() {
    OpDef d;
    d.name = "NegativeLogLikelihoodLoss";
    d.onnx_versions = {12, 13, 22};
    d.min_inputs = 2;
    d.max_inputs = 3;
    d.attrs = loss_attrs();
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) { return loss_infer(n, "input", "target", "weight"); };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        const DType cdt = te::compute_dtype(x->dtype);
        return std::vector<te::Tensor>{nll_stages(a, x, cdt, "NegativeLogLikelihoodLoss")};
    };
    d.gradient = [](GradientBuilder& b) { return loss_gradient(b, /*log_softmax=*/false); };
    return d;
}

OpDef sce_loss_op() {
    OpDef d;
    d.name = "SoftmaxCrossEntropyLoss";
    d.onnx_versions = {12, 13};
    d.min_inputs = 2;
    d.max_inputs = 3;
    d.min_outputs = 1;
    d.max_outputs = 2;
    d.attrs = loss_attrs();
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) { return loss_infer(n, "scores", "labels", "weights"); };
    d.compute = [](const ComputeArgs& a) {
        const std::string name = "SoftmaxCrossEntropyLoss";
        te::Tensor x = a.in(0);
        const DType cdt = te::compute_dtype(x->dtype);
        const int64_t C = x->shape[1];
        Shape red = x->shape;
        red[1] = 1;
        auto with_c = [](const std::vector<Var>& i, Expr c) {
            std::vector<Expr> idx(i.begin(), i.end());
            idx[1] = std::move(c);
            return idx;
        };
        auto xv = [&](const std::vector<Expr>& idx) { return te::cast(cdt, te::read(x, idx)); };
        te::IterVar r1 = te::reduce_axis(C, "c");
        te::Tensor m = te::compute(
            red,
            [&](const std::vector<Var>& i) { return te::max_reduce(xv(with_c(i, r1->var)), {r1}); },
            name + "_max", cdt);
        te::IterVar r2 = te::reduce_axis(C, "c");
        te::Tensor s = te::compute(
            red,
            [&](const std::vector<Var>& i) {
                return te::sum(
                    te::unary(te::UnaryOp::kExp, xv(with_c(i, r2->var)) - te::read(m, i)), {r2});
            },
            name + "_expsum", cdt);
        auto log_prob_at = [&](const std::vector<Var>& i) {
            const std::vector<Expr> at0 = with_c(i, te::int_imm(0));
            return xv(std::vector<Expr>(i.begin(), i.end())) - te::read(m, at0) -
                   te::unary(te::UnaryOp::kLog, te::read(s, at0));
        };
        te::Tensor lp = te::compute(x->shape, log_prob_at, name + "_log_prob", cdt);
        std::vector<te::Tensor> outs{nll_stages(a, lp, cdt, name)};
        if (a.output_types.size() > 1) {
            outs.push_back(te::compute(
                x->shape, [&](const std::vector<Var>& i) { return te::read(lp, i); },
                name + "_log_prob_out", a.out_dtype(1)));
        }
        return outs;
    };
    d.gradient = [](GradientBuilder& b) { return loss_gradient(b, /*log_softmax=*/true); };
    return d;
}

}  // namespace

void register_loss_ops(OpRegistry& r) {
    r.add(nll_loss_op());
    r.add(sce_loss_op());
}

}  // namespace kiln::op
