// Normalizations over trailing / chosen axes: LayerNormalization (opset 17). (ReduceMean is a
// row of the Reduce* table in reduce.cc.)
//
// LayerNormalization follows the ONNX function body (two-pass, as the spec writes it):
//   sum  = sum of x over axes [axis, rank)                      (reduce stage "ln_sum")
//   mean = sum / N
//   sq   = sum of (x - mean)^2 over the same axes               (reduce stage "ln_sqsum")
//   inv  = 1 / sqrt(sq / N + epsilon)                           (per row, stage "ln_inv")
//   Y    = (x - mean) * inv * Scale + B                          (Scale, B broadcast to x[axis:])
// Optional outputs Mean and InvStdDev have shape x.shape[:axis] + [1] * (rank - axis) and the
// stash dtype (f32 for stash_type=1, the only stash type supported). The statistics compute in
// the input's compute type (f32 for f16/bf16, f64 for f64).
// Pattern: kOpaque. TVM has no fused layer_norm kernel in Relay (SimplifyInference decomposes
// it into reductions and elementwise ops); as one node here it is two chained reductions plus
// an elementwise epilogue, like Softmax, which this registry also marks opaque so the fusion
// pass keeps it a kernel of its own.
//
// Gradient (op/gradient.h), with xhat = (x - mean) * inv, means over the normalized axes, N
// their element count, dY the output gradient:
//   dB = dY and dScale = dY * xhat, each summed down to its (broadcast) shape;
//   dx = inv * (dY*Scale - mean(dY*Scale) - xhat * mean(dY*Scale * xhat))
//      + dMean / N - dInvStdDev * inv^3 * (x - mean) / N       (when those outputs are used).
// mean and inv are the node's Mean / InvStdDev outputs when it has them and X is f32 (their
// stash type); otherwise they are recomputed in X's dtype (f64 gradients stay f64).

#include <string>

#include "op/broadcast.h"
#include "op/defs/row_reduce.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

// ---- LayerNormalization ----

std::vector<ir::Value*> layer_norm_gradient(GradientBuilder& b) {
    std::vector<ir::Value*> grads(b.num_inputs(), nullptr);
    const ir::Node& n = b.node();
    const ir::TensorType& xt = b.input(0)->type();
    const Shape xs = xt.static_shape();
    const int rank = static_cast<int>(xs.size());
    const int axis = normalize_axis(n, n.attr_int("axis", -1), rank);
    const DType dt = xt.dtype;
    std::vector<int64_t> axes;
    int64_t count = 1;
    for (int d = axis; d < rank; ++d) {
        axes.push_back(d);
        count *= xs[d];
    }
    auto row_mean = [&](ir::Value* v) {
        return b.emit1("ReduceMean", {v, b.ints(axes)}, {{"keepdims", int64_t{1}}});
    };
    ir::Value* x = b.input(0);
    ir::Value* mean = nullptr;
    ir::Value* inv = nullptr;
    if (dt == DType::kFloat32 && n.num_outputs() == 3) {
        mean = b.output(1);
        inv = b.output(2);
    } else {
        mean = row_mean(x);
        ir::Value* c = b.emit1("Sub", {x, mean});
        ir::Value* var = row_mean(b.emit1("Mul", {c, c}));
        const double eps = n.attr_float("epsilon", 1e-5);
        inv = b.emit1("Reciprocal", {b.emit1("Sqrt", {b.emit1("Add", {var, b.scalar(eps, dt)})})});
    }
    ir::Value* centered = b.emit1("Sub", {x, mean});
    ir::Value* xhat = b.emit1("Mul", {centered, inv});
    ir::Value* dy = b.output_grad(0);

    if (dy && has_input(n, 2) && b.needs_grad(2)) grads[2] = b.reduce_to_shape(dy, b.input(2)->type());
    if (b.needs_grad(1))
        grads[1] = dy ? b.reduce_to_shape(b.emit1("Mul", {dy, xhat}), b.input(1)->type())
                      : b.filled(b.input(1)->type(), 0.0);
    if (!b.needs_grad(0)) return grads;

    std::vector<ir::Value*> parts;
    if (dy) {
        ir::Value* dxhat = b.emit1("Mul", {dy, b.input(1)});
        ir::Value* m1 = row_mean(dxhat);
        ir::Value* m2 = row_mean(b.emit1("Mul", {dxhat, xhat}));
        ir::Value* centered_dxhat = b.emit1("Sub", {dxhat, m1});
        parts.push_back(b.emit1("Mul", {inv, b.emit1("Sub", {centered_dxhat, b.emit1("Mul", {xhat, m2})})}));
    }
    // The statistics outputs are f32 (the stash type): their gradients cast to X's dtype.
    auto stat_grad = [&](size_t i) -> ir::Value* {
        ir::Value* g = i < n.num_outputs() ? b.output_grad(i) : nullptr;
        if (!g || g->type().dtype == dt) return g;
        return b.emit1("Cast", {g}, {{"to", int64_t{dtype_to_onnx(dt)}}});
    };
    const double inv_n = 1.0 / static_cast<double>(count);
    if (ir::Value* dmean = stat_grad(1))
        parts.push_back(b.emit1("Expand", {b.emit1("Mul", {dmean, b.scalar(inv_n, dt)}), b.ints(xs)}));
    if (ir::Value* dinv = stat_grad(2)) {
        ir::Value* inv3 = b.emit1("Mul", {inv, b.emit1("Mul", {inv, inv})});
        ir::Value* k = b.emit1("Mul", {dinv, b.emit1("Mul", {inv3, b.scalar(-inv_n, dt)})});
        parts.push_back(b.emit1("Mul", {k, centered}));
    }
    ir::Value* dx = parts.empty() ? b.filled(xt, 0.0) : parts[0];
    for (size_t i = 1; i < parts.size(); ++i) dx = b.emit1("Add", {dx, parts[i]});
    grads[0] = dx;
    return grads;
}

OpDef layer_norm_op() {
    OpDef d;
    d.name = "LayerNormalization";
    d.onnx_versions = {17};
    d.min_inputs = 2;
    d.max_inputs = 3;
    d.min_outputs = 1;
    d.max_outputs = 3;
    d.attrs = {{"axis", AttrKind::kInt, ir::Attr(int64_t{-1})},
               {"epsilon", AttrKind::kFloat, ir::Attr(1e-5)},
               {"stash_type", AttrKind::kInt, ir::Attr(int64_t{1})}};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        check_dtype(n, "X", x.dtype, float_types());
        KILN_CHECK(x.rank() >= 1, kInvalidModel) << node_label(n) << ": input X must have rank >= 1, got rank 0";
        const int axis = normalize_axis(n, n.attr_int("axis", -1), x.rank());
        const int64_t stash = n.attr_int("stash_type", 1);
        KILN_CHECK(stash == 1, kUnsupported)
            << node_label(n) << ": stash_type=" << stash << " is not supported (only 1, float32)";
        const std::vector<ir::Dim> norm_dims(x.shape.begin() + axis, x.shape.end());
        const char* names[] = {"X", "Scale", "B"};
        for (size_t i = 1; i < 3; ++i) {
            if (!has_input(n, i)) continue;
            const auto& t = n.input(i)->type();
            check_same_dtype(n, "X", x.dtype, names[i], t.dtype);
            // Unidirectional broadcast of Scale / B to the normalized shape x.shape[axis:].
            bool ok = t.rank() <= static_cast<int>(norm_dims.size());
            for (int k = 0; ok && k < t.rank(); ++k) {
                const ir::Dim& s = t.shape[t.rank() - 1 - k];
                const ir::Dim& want = norm_dims[norm_dims.size() - 1 - k];
                ok = (s.is_static() && s.value == 1) || !s.is_static() || !want.is_static() || s == want;
            }
            KILN_CHECK(ok, kInvalidModel)
                << node_label(n) << ": input " << names[i] << " of shape " << dims_str(t.shape)
                << " does not broadcast to the normalized shape " << dims_str(norm_dims) << " (axis " << axis << ")";
        }
        std::vector<ir::TensorType> out{x};
        std::vector<ir::Dim> stat(x.shape.begin(), x.shape.begin() + axis);
        stat.resize(x.shape.size(), ir::Dim(1));
        for (size_t i = 1; i < n.num_outputs(); ++i) out.push_back({DType::kFloat32, stat});
        return out;
    };
    d.schedule = row_reduce_schedule;
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        te::Tensor scale = a.in(1);
        te::Tensor bias = a.has_input(2) ? a.in(2) : nullptr;
        const int rank = x->ndim();
        const int axis = normalize_axis(a.node, a.node.attr_int("axis", -1), rank);
        const DType cdt = te::compute_dtype(x->dtype);
        const double eps = a.node.attr_float("epsilon", 1e-5);
        int64_t count = 1;  // the normalized axes are static (a symbolic compile checks it)
        const std::vector<Expr> xs = x->shape_exprs();
        std::vector<Expr> stat = xs;
        for (int k = axis; k < rank; ++k) {
            count *= x->shape[k];
            stat[k] = te::int_imm(1);
        }
        const Expr inv_n = te::make_const(cdt, 1.0 / static_cast<double>(count));
        auto stat_idx = [&](const std::vector<Var>& i) {
            std::vector<Expr> idx(i.begin(), i.end());
            for (int k = axis; k < rank; ++k) idx[k] = te::int_imm(0);
            return idx;
        };
        // Reads x at the row of stat index i with the normalized axes at the reduce vars.
        auto row_read = [&](const std::vector<Var>& i, const std::vector<te::IterVar>& r) {
            std::vector<Expr> idx(i.begin(), i.end());
            for (int k = axis; k < rank; ++k) idx[k] = r[k - axis]->var;
            return te::cast(cdt, te::read(x, idx));
        };
        auto reduce_vars = [&] {
            std::vector<te::IterVar> r;
            for (int k = axis; k < rank; ++k) r.push_back(te::reduce_axis(x->shape[k], "r" + std::to_string(k)));
            return r;
        };
        // Normalizing the last axis only, the row sums reduce in vector lanes (row_reduce.h).
        const int64_t lanes = axis == rank - 1 ? row_lanes(cdt, x->shape[axis]) : 0;
        auto at = [&](const std::vector<Var>& i, Expr k) {
            std::vector<Expr> idx(i.begin(), i.end());
            idx[rank - 1] = std::move(k);
            return te::cast(cdt, te::read(x, idx));
        };
        auto stat_of = [&](const std::vector<Var>& i) {
            std::vector<Expr> idx(i.begin(), i.end());
            idx[rank - 1] = te::int_imm(0);
            return idx;
        };
        te::Tensor sum, sqsum;
        if (lanes > 0) {
            sum = lane_reduce(xs, lanes, te::ReduceOp::kSum, cdt, at, "ln_sum");
            sqsum = lane_reduce(
                xs, lanes, te::ReduceOp::kSum, cdt,
                [&](const std::vector<Var>& i, Expr k) {
                    Expr dev = at(i, std::move(k)) - te::read(sum, stat_of(i)) * inv_n;
                    return dev * dev;
                },
                "ln_sqsum");
        } else {
            const std::vector<te::IterVar> r1 = reduce_vars();
            sum = te::sym_compute(
                stat, [&](const std::vector<Var>& i) { return te::sum(row_read(i, r1), r1); }, "ln_sum", cdt);
            const std::vector<te::IterVar> r2 = reduce_vars();
            sqsum = te::sym_compute(
                stat, [&](const std::vector<Var>& i) {
                    Expr dev = row_read(i, r2) - te::read(sum, i) * inv_n;
                    return te::sum(dev * dev, r2);
                },
                "ln_sqsum", cdt);
        }
        auto inv_std = [&](const std::vector<Expr>& idx) {
            return te::make_const(cdt, 1.0) /
                   te::unary(te::UnaryOp::kSqrt, te::read(sqsum, idx) * inv_n + te::make_const(cdt, eps));
        };
        te::Tensor inv = te::sym_compute(
            stat, [&](const std::vector<Var>& i) { return inv_std(std::vector<Expr>(i.begin(), i.end())); }, "ln_inv",
            cdt);
        // Scale / B read with the output index right-aligned (they broadcast to x[axis:]).
        te::Tensor y = te::sym_compute(
            xs, [&](const std::vector<Var>& i) {
                const std::vector<Expr> s = stat_idx(i);
                Expr v = (te::cast(cdt, te::read(x, i)) - te::read(sum, s) * inv_n) * te::read(inv, s) *
                         te::cast(cdt, broadcast_read(scale, i));
                if (bias) v = v + te::cast(cdt, broadcast_read(bias, i));
                return v;
            },
            "LayerNormalization", a.out_dtype());
        std::vector<te::Tensor> outs{y};
        if (a.output_types.size() > 1) {
            outs.push_back(te::sym_compute(
                stat, [&](const std::vector<Var>& i) { return te::read(sum, i) * inv_n; }, "ln_mean", a.out_dtype(1)));
        }
        if (a.output_types.size() > 2) {
            outs.push_back(te::sym_compute(
                stat, [&](const std::vector<Var>& i) { return inv_std(std::vector<Expr>(i.begin(), i.end())); },
                "ln_inv_std_dev", a.out_dtype(2)));
        }
        return outs;
    };
    d.gradient = layer_norm_gradient;
    return d;
}

}  // namespace

void register_norm_ops(OpRegistry& r) {
    r.add(layer_norm_op());
}

}  // namespace kiln::op
