// BatchNormalization. (Softmax lives in softmax_family.cc, ArgMax in reduce.cc.)
//
// BatchNormalization: per-channel stages inv = scale / sqrt(var + eps) and
// shift = B - mean * inv, then y = x * inv[c] + shift[c].
// Training mode (training_mode=1, opset 14+): the batch statistics replace input_mean/var:
// mean[c] = sum over N and spatial axes of x / count, var[c] = sum (x - mean[c])^2 / count
// (population variance, two passes); Y normalizes with them, and the optional outputs are
// running_mean = input_mean * momentum + mean * (1 - momentum), likewise running_var.
#include <string>

#include "op/defs/batch_norm_grad.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

// ---- Gradient (op/gradient.h) ----
// Per channel c, over the axes R = N and the spatial axes (count m), with k = scale * invstd:
//  - training mode (batch statistics mu, var; xhat = (x - mu) * invstd, invstd = 1/sqrt(var+eps)):
//      dB = sum_R dY, dscale = sum_R dY xhat, dX = k (dY - dB / m - xhat dscale / m);
//    the statistics are recomputed from X (the node does not output them); the running_mean /
//    running_var outputs are not differentiated, and input_mean / input_var get no gradient.
//    In float32 this is one KilnBatchNormGrad node (batch_norm_grad.cc); float64 keeps the
//    decomposition below, which the gradient tests check against central differences.
//  - inference (a fixed affine y = x k + B - mean k): dX = dY k, dB = sum_R dY,
//      dscale = sum_R dY xhat, dmean = -dB k, dvar = -dscale scale invstd^2 / 2.

// v in the dtype of `like` (scale / B / mean / var may be another float type than X).
ir::Value* as_dtype_of(GradientBuilder& b, ir::Value* v, ir::Value* like) {
    if (v->type().dtype == like->type().dtype) return v;
    return b.emit1("CastLike", {v, like});
}

std::vector<ir::Value*> batch_norm_gradient(GradientBuilder& b) {
    const ir::Node& n = b.node();
    std::vector<ir::Value*> grads(5, nullptr);
    ir::Value* dy = b.output_grad(0);
    if (!dy) return grads;
    if (auto fused = batch_norm_grad_kernel(b)) return *fused;  // float32 training: one kernel
    ir::Value* x = b.input(0);
    const DType dt = x->type().dtype;
    const Shape xs = x->type().static_shape();
    const bool training = n.attr_int("training_mode", 0) != 0;
    const double eps = n.attr_float("epsilon", 1e-5);
    std::vector<int64_t> axes = {0};
    Shape bshape(xs.size(), 1);  // [1, C, 1, ...]
    bshape[1] = xs[1];
    int64_t m = xs[0];
    for (size_t d = 2; d < xs.size(); ++d) {
        axes.push_back(static_cast<int64_t>(d));
        m *= xs[d];
    }
    const ir::AttrMap keep = {{"keepdims", int64_t{1}}};
    auto per_channel = [&](ir::Value* v) { return b.reshape(as_dtype_of(b, v, x), bshape); };
    auto to_input = [&](ir::Value* v, size_t i) { return as_dtype_of(b, b.reshape(v, {xs[1]}), b.input(i)); };

    ir::Value *mean = nullptr, *var = nullptr;
    if (training) {
        mean = b.emit1("ReduceMean", {x, b.ints(axes)}, keep);
        ir::Value* xc = b.emit1("Sub", {x, mean});
        var = b.emit1("ReduceMean", {b.emit1("Mul", {xc, xc}), b.ints(axes)}, keep);
    } else {
        mean = per_channel(b.input(3));
        var = per_channel(b.input(4));
    }
    ir::Value* xc = b.emit1("Sub", {x, mean});
    ir::Value* invstd =
        b.emit1("Div", {b.scalar(1.0, dt), b.emit1("Sqrt", {b.emit1("Add", {var, b.scalar(eps, dt)})})});
    ir::Value* scale = per_channel(b.input(1));
    ir::Value* k = b.emit1("Mul", {scale, invstd});
    ir::Value* xhat = b.emit1("Mul", {xc, invstd});
    ir::Value* sum_dy = b.emit1("ReduceSum", {dy, b.ints(axes)}, keep);
    const bool want_xhat_sum = b.needs_grad(1) || (training && b.needs_grad(0)) || (!training && b.needs_grad(4));
    ir::Value* sum_dyx = want_xhat_sum ? b.emit1("ReduceSum", {b.emit1("Mul", {dy, xhat}), b.ints(axes)}, keep) : nullptr;

    if (b.needs_grad(0)) {
        if (training) {
            ir::Value* inv_m = b.scalar(1.0 / static_cast<double>(m), dt);
            ir::Value* centered = b.emit1("Sub", {dy, b.emit1("Mul", {sum_dy, inv_m})});
            ir::Value* proj = b.emit1("Mul", {xhat, b.emit1("Mul", {sum_dyx, inv_m})});
            grads[0] = b.emit1("Mul", {k, b.emit1("Sub", {centered, proj})});
        } else {
            grads[0] = b.emit1("Mul", {dy, k});
        }
    }
    if (b.needs_grad(1)) grads[1] = to_input(sum_dyx, 1);
    if (b.needs_grad(2)) grads[2] = to_input(sum_dy, 2);
    if (!training && b.needs_grad(3)) grads[3] = to_input(b.emit1("Neg", {b.emit1("Mul", {sum_dy, k})}), 3);
    if (!training && b.needs_grad(4)) {
        ir::Value* t = b.emit1("Mul", {b.emit1("Mul", {sum_dyx, k}), invstd});
        grads[4] = to_input(b.emit1("Mul", {t, b.scalar(-0.5, dt)}), 4);
    }
    return grads;
}

OpDef batch_norm_op() {
    OpDef d;
    d.name = "BatchNormalization";
    d.onnx_versions = {1, 6, 7, 9, 14, 15};
    d.min_inputs = d.max_inputs = 5;
    d.max_outputs = 3;
    d.attrs = {{"epsilon", AttrKind::kFloat, ir::Attr(1e-5)},
               {"momentum", AttrKind::kFloat, ir::Attr(0.9)},
               {"training_mode", AttrKind::kInt, ir::Attr(int64_t{0})}};
    d.pattern = OpPattern::kBroadcast;
    d.infer = [](const ir::Node& n) {
        const bool training = n.attr_int("training_mode", 0) != 0;
        KILN_CHECK(training || n.num_outputs() == 1, kUnsupported)
            << node_label(n) << ": outputs running_mean / running_var exist only in training mode "
            << "(training_mode=1); got " << n.num_outputs() << " outputs with training_mode=0";
        const auto& x = input_type(n, 0, "X");
        check_dtype(n, "X", x.dtype, float_types());
        KILN_CHECK(x.rank() >= 2, kInvalidModel)
            << node_label(n) << ": input X must have rank >= 2 (N, C, ...), got rank " << x.rank();
        const char* names[] = {"X", "scale", "B", "input_mean", "input_var"};
        for (size_t i = 1; i < 5; ++i) {
            const auto& t = input_type(n, i, names[i]);
            KILN_CHECK(t.dtype == x.dtype || dtype_is_float(t.dtype), kInvalidModel)
                << node_label(n) << ": input " << names[i] << " has dtype " << dtype_name(t.dtype);
            KILN_CHECK(t.rank() == 1 && (!t.shape[0].is_static() || !x.shape[1].is_static() || t.shape[0] == x.shape[1]),
                       kInvalidModel)
                << node_label(n) << ": input " << names[i] << " must have shape [" << x.shape[1].str() << "], got "
                << dims_str(t.shape);
        }
        std::vector<ir::TensorType> out{x};
        if (n.num_outputs() > 1) out.push_back(input_type(n, 3, "input_mean"));
        if (n.num_outputs() > 2) out.push_back(input_type(n, 4, "input_var"));
        return out;
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0), scale = a.in(1), bias = a.in(2), mean = a.in(3), var = a.in(4);
        const DType cdt = te::compute_dtype(a.out_dtype());
        const double eps = a.node.attr_float("epsilon", 1e-5);
        const int64_t c = x->shape[1];
        auto rd = [&](const te::Tensor& t, const Var& i) { return te::cast(cdt, te::read(t, {Expr(i)})); };
        std::vector<te::Tensor> running;  // training mode: running_mean, running_var outputs
        if (a.node.attr_int("training_mode", 0) != 0) {
            const te::Tensor in_mean = mean, in_var = var;
            const double momentum = a.node.attr_float("momentum", 0.9);
            // Reduce axes: N and every spatial axis; index = (r0, c, r2, ...).
            std::vector<te::IterVar> r1, r2;
            int64_t count = 1;
            for (int k = 0; k < x->ndim(); ++k) {
                if (k == 1) continue;
                r1.push_back(te::reduce_axis(x->shape[k], "r" + std::to_string(k)));
                r2.push_back(te::reduce_axis(x->shape[k], "s" + std::to_string(k)));
                count *= x->shape[k];
            }
            auto x_at = [&](const std::vector<te::IterVar>& r, const Var& ch) {
                std::vector<Expr> idx;
                for (size_t k = 0, j = 0; k < static_cast<size_t>(x->ndim()); ++k)
                    idx.push_back(k == 1 ? Expr(ch) : Expr(r[j++]->var));
                return te::cast(cdt, te::read(x, idx));
            };
            const Expr inv_count = te::make_const(cdt, 1.0 / static_cast<double>(count));
            mean = te::compute(
                {c}, [&](const std::vector<Var>& i) { return te::sum(x_at(r1, i[0]) * inv_count, r1); },
                "bn_batch_mean", cdt);
            var = te::compute(
                {c}, [&](const std::vector<Var>& i) {
                    const Expr dev = x_at(r2, i[0]) - te::read(mean, {Expr(i[0])});
                    return te::sum(dev * dev * inv_count, r2);
                },
                "bn_batch_var", cdt);
            const te::Tensor stats[2] = {mean, var}, inputs[2] = {in_mean, in_var};
            for (size_t k = 1; k < a.output_types.size() && k < 3; ++k) {
                const te::Tensor cur = stats[k - 1], prev = inputs[k - 1];
                const DType odt = a.out_dtype(k), ocdt = te::compute_dtype(odt);
                running.push_back(te::compute(
                    {c}, [&](const std::vector<Var>& i) {
                        return te::cast(ocdt, te::read(prev, {Expr(i[0])})) * te::make_const(ocdt, momentum) +
                               te::cast(ocdt, te::read(cur, {Expr(i[0])})) * te::make_const(ocdt, 1.0 - momentum);
                    },
                    k == 1 ? "bn_running_mean" : "bn_running_var", odt));
            }
        }
        te::Tensor inv = te::compute(
            {c}, [&](const std::vector<Var>& i) {
                return rd(scale, i[0]) / te::unary(te::UnaryOp::kSqrt, rd(var, i[0]) + te::make_const(cdt, eps));
            },
            "bn_inv", cdt);
        te::Tensor shift = te::compute(
            {c}, [&](const std::vector<Var>& i) { return rd(bias, i[0]) - rd(mean, i[0]) * te::read(inv, {Expr(i[0])}); },
            "bn_shift", cdt);
        te::Tensor y = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) {
                return te::read(x, i) * te::read(inv, {Expr(i[1])}) + te::read(shift, {Expr(i[1])});
            },
            "BatchNormalization", a.out_dtype());
        std::vector<te::Tensor> outs{y};
        outs.insert(outs.end(), running.begin(), running.end());
        return outs;
    };
    d.gradient = batch_norm_gradient;
    return d;
}

}  // namespace

void register_nn_ops(OpRegistry& r) {
    r.add(batch_norm_op());
}

}  // namespace kiln::op
