// KilnBatchNormGrad (internal): the gradient of a float32 BatchNormalization in training mode as
// one op, which BatchNormalization's gradient (op/defs/nn.cc) emits so that it runs as one
// kernel of two passes (the runtime's kiln_bn_grad, runtime/batchnorm_training_kernel.h, matched
// by topi/batchnorm_training_match.cc) instead of a dozen elementwise and reduction kernels.
// The TE compute below is the op's meaning (the tir interpreter's reference; the generated
// kernel where the match does not apply).
//
//   KilnBatchNormGrad(X [N, C, ...], dY, scale [C], R? [N, C, ...]) -> dX, dscale [C], dB [C]:
//     per channel c over the axes S = N and spatial (m elements), with the batch statistics
//     mu, var of X (population variance), invstd = 1 / sqrt(var + epsilon), xhat = (x - mu) invstd
//     and g = dY, or dY where R > 0 else 0 when R is given (a ReLU read the forward's output:
//     R is that ReLU's output, or its input Y, so the mask of its gradient is folded in here):
//       dB = sum_S g, dscale = sum_S g xhat, dX = scale invstd (g - dB / m - xhat dscale / m).
#include "op/defs/batch_norm_grad.h"

#include <functional>
#include <string>
#include <vector>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

std::vector<ir::TensorType> infer(const ir::Node& n) {
    const auto& x = input_type(n, 0, "X");
    const auto& dy = input_type(n, 1, "dY");
    const auto& scale = input_type(n, 2, "scale");
    check_dtype(n, "X", x.dtype, float_types());
    check_same_dtype(n, "X", x.dtype, "dY", dy.dtype);
    check_same_dtype(n, "X", x.dtype, "scale", scale.dtype);
    KILN_CHECK(x.rank() >= 2 && x.is_static() && dy.is_static() && x.static_shape() == dy.static_shape() &&
                   scale.is_static() && scale.static_shape() == Shape{x.static_shape()[1]},
               kInvalidModel)
        << node_label(n) << ": expected X and dY of one static shape [N, C, ...] and scale [C], got " << x.str() << ", "
        << dy.str() << " and " << scale.str();
    if (n.num_inputs() > 3 && n.input(3)) {
        const auto& r = input_type(n, 3, "R");
        KILN_CHECK(r.dtype == x.dtype && r.is_static() && r.static_shape() == x.static_shape(), kInvalidModel)
            << node_label(n) << ": R must have X's type " << x.str() << ", got " << r.str();
    }
    return {x, scale, scale};
}

std::vector<te::Tensor> compute(const ComputeArgs& a) {
    const te::Tensor &x = a.in(0), &dy = a.in(1), &scale = a.in(2);
    const DType dt = x->dtype;
    const int64_t c = x->shape[1];
    int64_t m = 1;
    for (int k = 0; k < x->ndim(); ++k) m *= k == 1 ? 1 : x->shape[k];
    const Expr inv_m = te::make_const(dt, 1.0 / static_cast<double>(m));
    const Expr eps = te::make_const(dt, a.node.attr_float("epsilon", 1e-5));
    // A channel's reduction over S: f(index of x) summed, index = (r0, ch, r2, ...).
    auto channel_sum = [&](const std::string& name, const std::function<Expr(const std::vector<Expr>&)>& f) {
        std::vector<te::IterVar> r;
        for (int k = 0; k < x->ndim(); ++k)
            if (k != 1) r.push_back(te::reduce_axis(x->shape[k], name + std::to_string(k)));
        return te::compute(
            {c}, [&](const std::vector<Var>& i) {
                std::vector<Expr> idx;
                for (size_t k = 0, j = 0; k < static_cast<size_t>(x->ndim()); ++k)
                    idx.push_back(k == 1 ? Expr(i[0]) : Expr(r[j++]->var));
                return te::sum(f(idx), r);
            },
            name, dt);
    };
    auto per = [](const te::Tensor& t, const std::vector<Expr>& idx) { return te::read(t, {idx[1]}); };
    auto g = [&](const std::vector<Expr>& idx) {
        if (!a.has_input(3)) return te::read(dy, idx);
        return te::select(te::read(a.in(3), idx) > te::make_const(dt, 0), te::read(dy, idx), te::make_const(dt, 0));
    };
    te::Tensor mean = channel_sum("bng_mean", [&](const auto& i) { return te::read(x, i) * inv_m; });
    te::Tensor var = channel_sum("bng_var", [&](const auto& i) {
        const Expr d = te::read(x, i) - per(mean, i);
        return d * d * inv_m;
    });
    te::Tensor invstd = te::compute(
        {c}, [&](const std::vector<Var>& i) {
            return te::make_const(dt, 1) / te::unary(te::UnaryOp::kSqrt, te::read(var, {Expr(i[0])}) + eps);
        },
        "bng_invstd", dt);
    te::Tensor dbias = channel_sum("bng_dbias", g);
    te::Tensor dscale = channel_sum("bng_dscale", [&](const auto& i) {
        return g(i) * (te::read(x, i) - per(mean, i)) * per(invstd, i);
    });
    te::Tensor dx = te::compute(
        a.out_shape(), [&](const std::vector<Var>& vi) {
            const std::vector<Expr> i(vi.begin(), vi.end());
            const Expr xhat = (te::read(x, i) - per(mean, i)) * per(invstd, i);
            const Expr k = per(scale, i) * per(invstd, i);
            return k * (g(i) - per(dbias, i) * inv_m - xhat * per(dscale, i) * inv_m);
        },
        "batch_norm_grad", dt);
    return {dx, dscale, dbias};
}

}  // namespace

void register_batch_norm_grad_ops(OpRegistry& r) {
    OpDef d;
    d.name = "KilnBatchNormGrad";
    d.internal = true;
    d.min_inputs = 3;
    d.max_inputs = 4;
    d.min_outputs = d.max_outputs = 3;
    d.attrs = {{"epsilon", AttrKind::kFloat, ir::Attr(1e-5)}};
    d.infer = infer;
    d.compute = compute;
    r.add(std::move(d));
}

}  // namespace kiln::op

namespace kiln::op {

namespace {

// Whether v is a constant whose elements are all 0.
bool is_zero(const ir::Value* v) {
    if (!v || !v->is_constant()) return false;
    const Tensor& t = v->constant();
    for (int64_t i = 0; i < t.numel(); ++i)
        if (t.get_f64(i) != 0) return false;
    return true;
}

}  // namespace

std::optional<std::vector<ir::Value*>> batch_norm_grad_kernel(GradientBuilder& b) {
    const ir::Node& n = b.node();
    ir::Value* dy = b.output_grad(0);
    if (!dy || n.attr_int("training_mode", 0) == 0) return std::nullopt;
    for (size_t i = 0; i < 3; ++i)
        if (b.input(i)->type().dtype != DType::kFloat32 || !b.input(i)->type().is_static()) return std::nullopt;
    std::vector<ir::Value*> in = {b.input(0), dy, b.input(1)};
    // A ReLU's gradient on the output, Where(Greater(R, 0), g, 0) with R the ReLU's output (its
    // gradient entry's mask) or input Y: read g and mask with R.
    const ir::Node* w = dy->producer();
    if (w && w->op() == "Where" && w->num_inputs() == 3 && is_zero(w->input(2))) {
        const ir::Node* gt = w->input(0)->producer();
        ir::Value* r = gt && gt->op() == "Greater" && is_zero(gt->input(1)) ? gt->input(0) : nullptr;
        const ir::Node* relu = r ? r->producer() : nullptr;
        const bool relu_of_y = relu && relu->op() == "Relu" && relu->input(0) == n.output(0);
        if ((r == n.output(0) || relu_of_y) && w->input(1)->type() == dy->type())
            in = {b.input(0), w->input(1), b.input(1), r};
    }
    std::vector<ir::Value*> out =
        b.emit("KilnBatchNormGrad", in, {{"epsilon", ir::Attr(n.attr_float("epsilon", 1e-5))}}, 3);
    std::vector<ir::Value*> grads(5, nullptr);
    if (b.needs_grad(0)) grads[0] = out[0];
    if (b.needs_grad(1)) grads[1] = out[1];
    if (b.needs_grad(2)) grads[2] = out[2];
    return grads;
}

}  // namespace kiln::op
