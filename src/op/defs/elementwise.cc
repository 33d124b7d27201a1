// Elementwise ops: Add Sub Mul Div Pow (numpy broadcasting), Relu Sigmoid Tanh Exp Erf Sqrt
// Neg Abs Log Gelu Clip Identity, and their gradients (op/gradient.h).
// f16/bf16 compute in f32 (reads widen, the stage stores narrowed); integer Div truncates (C).
// Pow: the result has the base's dtype; the exponent may have another numeric dtype (Pow-12+).
// Float bases compute pow in the base's compute type; integer bases with integer exponents use
// exact integer powers, integer bases with float exponents compute in double and truncate (ORT).
// Gelu (opset 20): approximate="none": 0.5 x (1 + erf(x / sqrt 2)); "tanh":
// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
#include <cmath>
#include <string>

#include "op/broadcast.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

OpDef binary_op(const std::string& name, te::BinaryOp bop) {
    OpDef d;
    d.name = name;
    d.onnx_versions = {1, 6, 7, 13, 14};
    d.min_inputs = d.max_inputs = 2;
    d.pattern = OpPattern::kBroadcast;
    d.infer = [](const ir::Node& n) {
        const auto& a = input_type(n, 0, "A");
        const auto& b = input_type(n, 1, "B");
        check_dtype(n, "A", a.dtype, numeric_types());
        check_same_dtype(n, "A", a.dtype, "B", b.dtype);
        return std::vector<ir::TensorType>{{a.dtype, broadcast_shapes(n, {a.shape, b.shape})}};
    };
    d.compute = [bop, name](const ComputeArgs& a) {
        te::Tensor x = a.in(0), y = a.in(1);
        auto out = te::sym_compute(
            a.out_dims(), [&](const std::vector<Var>& i) {
                return te::binary(bop, broadcast_read(x, i), broadcast_read(y, i));
            },
            name, a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    return d;
}

OpDef unary_op(const std::string& name, std::vector<int> versions, std::vector<DType> types,
               std::function<Expr(Expr)> f) {
    OpDef d;
    d.name = name;
    d.onnx_versions = std::move(versions);
    d.pattern = OpPattern::kElemWise;
    d.infer = [types](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        check_dtype(n, "X", x.dtype, types);
        return std::vector<ir::TensorType>{x};
    };
    d.compute = [f, name](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        auto out = te::sym_compute(
            a.out_dims(), [&](const std::vector<Var>& i) { return f(te::read(x, i)); }, name, a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    return d;
}

// Floats and signed ints (Relu, Neg).
std::vector<DType> relu_types() {
    std::vector<DType> t = float_types();
    for (DType s : {DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64}) t.push_back(s);
    return t;
}

// Reads a tensor holding one element (Clip's min / max).
Expr scalar_read(const te::Tensor& t) { return te::read(t, std::vector<Expr>(t->ndim(), te::int_imm(0))); }

OpDef clip_op() {
    OpDef d;
    d.name = "Clip";
    d.onnx_versions = {1, 6, 11, 12, 13};
    d.min_inputs = 1;
    d.max_inputs = 3;
    d.pattern = OpPattern::kElemWise;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "input");
        check_dtype(n, "input", x.dtype, numeric_types());
        const char* names[] = {"input", "min", "max"};
        for (size_t i = 1; i < 3; ++i) {
            if (!has_input(n, i)) continue;
            const auto& t = n.input(i)->type();
            check_same_dtype(n, "input", x.dtype, names[i], t.dtype);
            bool scalar = true;
            for (const auto& dim : t.shape) scalar = scalar && dim.is_static() && dim.value == 1;
            KILN_CHECK(scalar, kInvalidModel)
                << node_label(n) << ": input " << names[i] << " must be a scalar, got shape " << dims_str(t.shape);
        }
        return std::vector<ir::TensorType>{x};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        te::Tensor lo = a.has_input(1) ? a.in(1) : nullptr;
        te::Tensor hi = a.has_input(2) ? a.in(2) : nullptr;
        auto out = te::sym_compute(
            a.out_dims(), [&](const std::vector<Var>& i) {
                Expr v = te::read(x, i);
                // NOTE: min(max(x, lo), hi): when lo > hi every element becomes hi (ONNX).
                if (lo) v = te::max(v, scalar_read(lo));
                if (hi) v = te::min(v, scalar_read(hi));
                return v;
            },
            "Clip", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    return d;
}

/// The value of `exponent` when it is a constant whose every element is the same, else NaN.
double uniform_exponent(const Tensor* exponent) {
    if (!exponent || exponent->numel() == 0) return std::nan("");
    const double e = exponent->get_f64(0);
    for (int64_t k = 1; k < exponent->numel(); ++k)
        if (exponent->get_f64(k) != e) return std::nan("");
    return e;
}

/// pow(b, e) for the constant exponents exporters write, without libm's powf (which GCC cannot
/// vectorize: the written-out LayerNorm's and RMSNorm's Pow(d, 2), GELU-tanh's Pow(x, 3) ran
/// 8-22x ONNX Runtime), equal to C's pow on every input, special values included:
///   2, 3: products (x * x is powf's correctly rounded x^2, x * x * x within an ulp of x^3);
///   0.5: sqrt, correctly rounded; +0 for -0 and +inf for -inf as pow gives (sqrt: -0, NaN);
///   -1: 1 / x, correctly rounded;  -0.5: 1 / pow(x, 0.5), within an ulp.
/// Null for any other exponent (powf).
Expr pow_by_constant(const Expr& b, double e) {
    auto c = [&](double v) { return te::make_const(b->dtype, v); };
    if (e == 2.0) return b * b;
    if (e == 3.0) return b * b * b;
    if (e == -1.0) return c(1.0) / b;
    if (e != 0.5 && e != -0.5) return nullptr;
    const Expr root = te::select(te::eq(b, c(-INFINITY)), c(INFINITY), te::unary(te::UnaryOp::kSqrt, b) + c(0.0));
    return e == 0.5 ? root : c(1.0) / root;
}

OpDef pow_op() {
    OpDef d;
    d.name = "Pow";
    d.onnx_versions = {1, 7, 12, 13, 15};
    d.min_inputs = d.max_inputs = 2;
    d.pattern = OpPattern::kBroadcast;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        const auto& y = input_type(n, 1, "Y");
        check_dtype(n, "X", x.dtype,
                    {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt32,
                     DType::kInt64});
        check_dtype(n, "Y", y.dtype, numeric_types());
        return std::vector<ir::TensorType>{{x.dtype, broadcast_shapes(n, {x.shape, y.shape})}};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0), y = a.in(1);
        const DType xt = a.in(0)->dtype, yt = a.in(1)->dtype;
        const double constant = uniform_exponent(a.constant_input(1));
        auto out = te::sym_compute(
            a.out_dims(), [&](const std::vector<Var>& i) {
                Expr base = broadcast_read(x, i), ex = broadcast_read(y, i);
                if (dtype_is_float(xt)) {
                    const DType cdt = te::compute_dtype(xt);
                    const Expr b = te::cast(cdt, base);
                    if (Expr p = pow_by_constant(b, constant)) return p;
                    return te::binary(te::BinaryOp::kPow, base, te::cast(cdt, ex));
                }
                if (dtype_is_int(yt))  // exact integer power (negative exponents: C semantics of the helper)
                    return te::binary(te::BinaryOp::kPow, te::cast(DType::kInt64, base), te::cast(DType::kInt64, ex));
                return te::binary(te::BinaryOp::kPow, te::cast(DType::kFloat64, base), te::cast(DType::kFloat64, ex));
            },
            "Pow", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    return d;
}

OpDef gelu_op() {
    OpDef d = unary_op("Gelu", {20}, float_types(), nullptr);
    d.attrs = {{"approximate", AttrKind::kString, ir::Attr(std::string("none"))}};
    const auto base_infer = d.infer;
    d.infer = [base_infer](const ir::Node& n) {
        const std::string ap = n.attr_string("approximate", "none");
        KILN_CHECK(ap == "none" || ap == "tanh", kInvalidModel)
            << node_label(n) << ": attribute approximate must be 'none' or 'tanh', got '" << ap << "'";
        return base_infer(n);
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        const bool tanh_form = a.node.attr_string("approximate", "none") == "tanh";
        auto out = te::sym_compute(
            a.out_dims(), [&](const std::vector<Var>& i) {
                Expr v = te::read(x, i);
                const DType t = v->dtype;
                auto c = [&](double k) { return te::make_const(t, k); };
                Expr inner = tanh_form
                                 ? te::unary(te::UnaryOp::kTanh, c(std::sqrt(2.0 / M_PI)) * (v + c(0.044715) * v * v * v))
                                 : te::unary(te::UnaryOp::kErf, v * c(M_SQRT1_2));
                return c(0.5) * v * (c(1.0) + inner);
            },
            "Gelu", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    return d;
}


// ---- gradients (op/gradient.h): g is the output's gradient, y the output ----
// Broadcast operands get reduce_to_shape of their share; every formula is elementwise, so the
// backward nodes fuse like the forward ones.

using GB = GradientBuilder;
using Grads = std::vector<ir::Value*>;

// The gradient of broadcast input i from its share `v` of the output's shape.
ir::Value* to_input(GB& b, size_t i, ir::Value* v) { return b.reduce_to_shape(v, b.input(i)->type()); }

ir::Value* mul(GB& b, ir::Value* x, ir::Value* y) { return b.emit1("Mul", {x, y}); }
ir::Value* scalar_like(GB& b, ir::Value* like, double v) { return b.scalar(v, like->type().dtype); }

Grads add_grad(GB& b) {
    ir::Value* g = b.output_grad_or_zeros(0);
    return {to_input(b, 0, g), to_input(b, 1, g)};
}

Grads sub_grad(GB& b) {
    ir::Value* g = b.output_grad_or_zeros(0);
    return {to_input(b, 0, g), b.needs_grad(1) ? to_input(b, 1, b.emit1("Neg", {g})) : nullptr};
}

Grads mul_grad(GB& b) {
    ir::Value* g = b.output_grad_or_zeros(0);
    return {b.needs_grad(0) ? to_input(b, 0, mul(b, g, b.input(1))) : nullptr,
            b.needs_grad(1) ? to_input(b, 1, mul(b, g, b.input(0))) : nullptr};
}

// y = a / b: da = g / b, db = -g y / b.
Grads div_grad(GB& b) {
    ir::Value* g = b.output_grad_or_zeros(0);
    ir::Value* ga = b.emit1("Div", {g, b.input(1)});
    return {b.needs_grad(0) ? to_input(b, 0, ga) : nullptr,
            b.needs_grad(1) ? to_input(b, 1, b.emit1("Neg", {mul(b, ga, b.output(0))})) : nullptr};
}

// y = x^p: dx = g p x^(p-1), dp = g y ln x (for x > 0; 0 at x = 0; NaN for x < 0, where y is
// NaN too unless p is an integer).
Grads pow_grad(GB& b) {
    ir::Value* g = b.output_grad_or_zeros(0);
    ir::Value* x = b.input(0);
    ir::Value* p = b.input(1);
    Grads out(2, nullptr);
    if (b.needs_grad(0)) {
        // The exponent may have another dtype (Pow-12+): compute in the base's.
        if (p->type().dtype != x->type().dtype) p = b.emit1("Cast", {p}, {{"to", int64_t{dtype_to_onnx(x->type().dtype)}}});
        ir::Value* pm1 = b.emit1("Pow", {x, b.emit1("Sub", {p, scalar_like(b, p, 1.0)})});
        out[0] = to_input(b, 0, mul(b, g, mul(b, p, pm1)));
    }
    if (b.needs_grad(1)) {
        // At x = 0, y = 0 and y ln x is 0 * -inf: the limit 0 (PyTorch's choice), not NaN.
        ir::Value* at_zero = b.emit1("Equal", {x, scalar_like(b, x, 0.0)});
        ir::Value* gy = b.emit1("Where", {at_zero, scalar_like(b, x, 0.0), mul(b, mul(b, g, b.output(0)), b.emit1("Log", {x}))});
        if (gy->type().dtype != b.input(1)->type().dtype)
            gy = b.emit1("Cast", {gy}, {{"to", int64_t{dtype_to_onnx(b.input(1)->type().dtype)}}});
        out[1] = to_input(b, 1, gy);
    }
    return out;
}

// g where cond holds, else 0.
ir::Value* masked(GB& b, ir::Value* cond, ir::Value* g) { return b.emit1("Where", {cond, g, scalar_like(b, g, 0.0)}); }

// The mask reads Y, not X (Y > 0 exactly where X > 0, NaN in neither): Y is kept for the
// backward anyway (the next layer's weight gradient reads it), so X need not be, and a
// BatchNormalization before the ReLU can write Y alone (pass/fuse_operators.cc).
Grads relu_grad(GB& b) {
    ir::Value* y = b.output(0);
    return {masked(b, b.emit1("Greater", {y, scalar_like(b, y, 0.0)}), b.output_grad_or_zeros(0))};
}

// y = sigmoid(x): dx = g y (1 - y).
Grads sigmoid_grad(GB& b) {
    ir::Value* y = b.output(0);
    ir::Value* one_minus = b.emit1("Sub", {scalar_like(b, y, 1.0), y});
    return {mul(b, b.output_grad_or_zeros(0), mul(b, y, one_minus))};
}

// y = tanh(x): dx = g (1 - y^2).
Grads tanh_grad(GB& b) {
    ir::Value* y = b.output(0);
    return {mul(b, b.output_grad_or_zeros(0), b.emit1("Sub", {scalar_like(b, y, 1.0), mul(b, y, y)}))};
}

Grads exp_grad(GB& b) { return {mul(b, b.output_grad_or_zeros(0), b.output(0))}; }
Grads log_grad(GB& b) { return {b.emit1("Div", {b.output_grad_or_zeros(0), b.input(0)})}; }
Grads neg_grad(GB& b) { return {b.emit1("Neg", {b.output_grad_or_zeros(0)})}; }
Grads identity_grad(GB& b) { return {b.output_grad_or_zeros(0)}; }
// |x|' = sign(x) (0 at 0, as PyTorch).
Grads abs_grad(GB& b) { return {mul(b, b.output_grad_or_zeros(0), b.emit1("Sign", {b.input(0)}))}; }
// y = sqrt(x): dx = g / (2 y).
Grads sqrt_grad(GB& b) {
    ir::Value* y = b.output(0);
    return {b.emit1("Div", {b.output_grad_or_zeros(0), mul(b, y, scalar_like(b, y, 2.0))})};
}

// exp(-x^2) * 2 / sqrt(pi).
ir::Value* erf_slope(GB& b, ir::Value* x) {
    ir::Value* e = b.emit1("Exp", {b.emit1("Neg", {mul(b, x, x)})});
    return mul(b, e, scalar_like(b, x, 2.0 / std::sqrt(M_PI)));
}

Grads erf_grad(GB& b) { return {mul(b, b.output_grad_or_zeros(0), erf_slope(b, b.input(0)))}; }

// none: d/dx 0.5 x (1 + erf(x/sqrt2)) = 0.5 (1 + erf(x/sqrt2)) + x exp(-x^2/2) / sqrt(2 pi).
// tanh: with u = sqrt(2/pi) (x + 0.044715 x^3), t = tanh u:
//       0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2).
Grads gelu_grad(GB& b) {
    ir::Value* x = b.input(0);
    auto c = [&](double v) { return scalar_like(b, x, v); };
    auto add = [&](ir::Value* p, ir::Value* q) { return b.emit1("Add", {p, q}); };
    ir::Value* x2 = mul(b, x, x);
    ir::Value* slope;
    if (b.node().attr_string("approximate", "none") == "tanh") {
        const double k = std::sqrt(2.0 / M_PI);
        ir::Value* u = mul(b, c(k), add(x, mul(b, c(0.044715), mul(b, x2, x))));
        ir::Value* t = b.emit1("Tanh", {u});
        ir::Value* du = mul(b, c(k), add(c(1.0), mul(b, c(3 * 0.044715), x2)));
        ir::Value* dt = b.emit1("Sub", {c(1.0), mul(b, t, t)});
        slope = add(mul(b, c(0.5), add(c(1.0), t)), mul(b, mul(b, c(0.5), x), mul(b, dt, du)));
    } else {
        ir::Value* cdf = mul(b, c(0.5), add(c(1.0), b.emit1("Erf", {mul(b, x, c(M_SQRT1_2))})));
        ir::Value* pdf = mul(b, b.emit1("Exp", {mul(b, x2, c(-0.5))}), c(1.0 / std::sqrt(2.0 * M_PI)));
        slope = add(cdf, mul(b, x, pdf));
    }
    return {mul(b, b.output_grad_or_zeros(0), slope)};
}

// The gradient passes where min <= x <= max (PyTorch's convention at the bounds); min and max
// get none.
Grads clip_grad(GB& b) {
    ir::Value* x = b.input(0);
    ir::Value* g = b.output_grad_or_zeros(0);
    ir::Value* cond = nullptr;
    if (b.input(1)) cond = b.emit1("GreaterOrEqual", {x, b.input(1)});
    if (b.input(2)) {
        ir::Value* le = b.emit1("LessOrEqual", {x, b.input(2)});
        cond = cond ? b.emit1("And", {cond, le}) : le;
    }
    Grads out(b.num_inputs(), nullptr);
    out[0] = cond ? masked(b, cond, g) : g;
    return out;
}

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
    auto with = [](OpDef d, GradientFn grad) {
        d.gradient = std::move(grad);
        return d;
    };
    r.add(with(binary_op("Add", te::BinaryOp::kAdd), add_grad));
    r.add(with(binary_op("Sub", te::BinaryOp::kSub), sub_grad));
    r.add(with(binary_op("Mul", te::BinaryOp::kMul), mul_grad));
    r.add(with(binary_op("Div", te::BinaryOp::kDiv), div_grad));
    r.add(with(unary_op("Relu", {1, 6, 13, 14}, relu_types(),
                        [](Expr x) { return te::max(x, te::make_const(x->dtype, 0)); }),
               relu_grad));
    r.add(with(unary_op("Sigmoid", {1, 6, 13}, float_types(), [](Expr x) { return te::unary(te::UnaryOp::kSigmoid, x); }),
               sigmoid_grad));
    r.add(with(unary_op("Tanh", {1, 6, 13}, float_types(), [](Expr x) { return te::unary(te::UnaryOp::kTanh, x); }),
               tanh_grad));
    r.add(with(unary_op("Exp", {1, 6, 13}, float_types(), [](Expr x) { return te::unary(te::UnaryOp::kExp, x); }),
               exp_grad));
    OpDef identity = unary_op("Identity", {1, 13, 14, 16, 19, 21}, all_types(), [](Expr x) { return x; });
    // Sequences and optionals (Identity-14/16) pass through the host kernel unchanged.
    identity.host = [](const HostArgs& a) { return std::vector<Datum>{a.inputs.at(0)}; };
    identity.gradient = identity_grad;
    r.add(std::move(identity));
    r.add(with(clip_op(), clip_grad));
    r.add(with(pow_op(), pow_grad));
    auto un = [](te::UnaryOp op) { return [op](Expr x) { return te::unary(op, x); }; };
    r.add(with(unary_op("Erf", {9, 13}, float_types(), un(te::UnaryOp::kErf)), erf_grad));
    r.add(with(unary_op("Sqrt", {1, 6, 13}, float_types(), un(te::UnaryOp::kSqrt)), sqrt_grad));
    r.add(with(unary_op("Log", {1, 6, 13}, float_types(), un(te::UnaryOp::kLog)), log_grad));
    r.add(with(unary_op("Neg", {1, 6, 13}, relu_types(), un(te::UnaryOp::kNeg)), neg_grad));
    r.add(with(unary_op("Abs", {1, 6, 13}, numeric_types(), un(te::UnaryOp::kAbs)), abs_grad));
    r.add(with(gelu_op(), gelu_grad));
}

}  // namespace kiln::op
