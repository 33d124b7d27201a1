// Unary math and activation ops, one scalar formula each (ONNX spec / function bodies):
//   Reciprocal 1/x; Floor Ceil; Round (half to even: nearbyint in the default rounding mode);
//   Sign (numeric; NaN stays NaN); Sin Cos Tan Asin Acos Atan Sinh Cosh Asinh Acosh Atanh;
//   Softplus log(1 + e^x), computed stably as max(x, 0) + log1p(e^-|x|);
//   Softsign x / (1 + |x|); Elu x<0 ? alpha (e^x - 1) : x; Selu gamma (x<=0 ? alpha e^x - alpha : x);
//   Celu max(0, x) + min(0, alpha (e^(x/alpha) - 1)); LeakyRelu x<0 ? alpha x : x;
//   ThresholdedRelu x>alpha ? x : 0; HardSigmoid max(0, min(1, alpha x + beta));
//   HardSwish x HardSigmoid_{1/6, 1/2}(x); Mish x tanh(softplus(x));
//   PRelu x<0 ? slope x : x with slope broadcast unidirectionally to X;
//   IsNaN; IsInf (detect_negative / detect_positive); Not (bool); Shrink; Swish.
// Floats compute in their compute dtype (f16/bf16 in f32); attribute constants are converted to it.
// Gradients: Reciprocal, LeakyRelu.
#include <cmath>
#include <limits>

#include "op/elementwise_util.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::UnaryOp;

Expr k(const Expr& like, double v) { return te::make_const(like->dtype, v); }
Expr un(UnaryOp op, Expr x) { return te::unary(op, std::move(x)); }

OpDef float_unary(const std::string& name, std::vector<int> versions, std::function<Expr(Expr, const ir::Node&)> f,
                  std::vector<AttrSpec> attrs = {}) {
    OpDef d = unary_map_op(name, std::move(versions), float_types(), std::move(f));
    d.attrs = std::move(attrs);
    return d;
}

OpDef intrinsic(const std::string& name, std::vector<int> versions, UnaryOp op) {
    return float_unary(name, std::move(versions), [op](Expr x, const ir::Node&) { return un(op, x); });
}

AttrSpec float_attr(const char* name, double dflt) { return {name, AttrKind::kFloat, ir::Attr(dflt)}; }

Expr softplus(const Expr& x) {
    return te::max(x, k(x, 0)) + un(UnaryOp::kLog1p, un(UnaryOp::kExp, -un(UnaryOp::kAbs, x)));
}

OpDef prelu_op() {
    std::vector<DType> types = float_types();
    for (DType t : {DType::kInt32, DType::kInt64, DType::kUInt32, DType::kUInt64}) types.push_back(t);
    OpDef d = binary_map_op("PRelu", {1, 6, 7, 9, 16}, types, [](Expr x, Expr slope, const ir::Node&) {
        return te::select(x < k(x, 0), slope * x, x);
    });
    const auto base = d.infer;
    d.infer = [base](const ir::Node& n) {
        auto out = base(n);
        const auto& x = n.input(0)->type();
        KILN_CHECK(out[0].shape.size() == x.shape.size(), kInvalidModel)
            << node_label(n) << ": slope of shape " << dims_str(n.input(1)->type().shape)
            << " does not broadcast to X of shape " << dims_str(x.shape);
        out[0].shape = x.shape;  // unidirectional: the output is X's shape
        for (size_t i = 0; i < x.shape.size(); ++i) {
            const auto& s = n.input(1)->type().shape;
            size_t off = x.shape.size() - s.size();
            if (i < off) continue;
            const auto& sd = s[i - off];
            KILN_CHECK(!(sd.is_static() && sd.value != 1 && x.shape[i].is_static() && sd.value != x.shape[i].value),
                       kInvalidModel)
                << node_label(n) << ": slope of shape " << dims_str(s) << " does not broadcast to X of shape "
                << dims_str(x.shape);
        }
        return out;
    };
    return d;
}

OpDef isinf_op() {
    OpDef d = unary_map_op(
        "IsInf", {10, 20}, float_types(),
        [](Expr x, const ir::Node& n) {
            const double inf = std::numeric_limits<double>::infinity();
            Expr r = te::int_imm(0, DType::kBool);
            if (n.attr_int("detect_positive", 1)) r = te::logical_or(r, te::eq(x, k(x, inf)));
            if (n.attr_int("detect_negative", 1)) r = te::logical_or(r, te::eq(x, k(x, -inf)));
            return r;
        },
        DType::kBool);
    d.attrs = {{"detect_negative", AttrKind::kInt, ir::Attr(int64_t{1})},
               {"detect_positive", AttrKind::kInt, ir::Attr(int64_t{1})}};
    return d;
}

// Shrink (9): x < -lambd ? x + bias : x > lambd ? x - bias : 0 (every numeric dtype; the
// comparisons in f64, bias in the input dtype). Swish (24): x * sigmoid(alpha x).
void register_shrink_swish(OpRegistry& r) {
    OpDef shrink = unary_map_op("Shrink", {9}, numeric_types(), [](Expr x, const ir::Node& n) {
        const double lambd = n.attr_float("lambd", 0.5), bias = n.attr_float("bias", 0.0);
        Expr xd = te::cast(DType::kFloat64, x);
        Expr kd = te::make_const(DType::kFloat64, lambd);
        return te::select(xd < -kd, x + k(x, bias), te::select(xd > kd, x - k(x, bias), k(x, 0)));
    });
    shrink.attrs = {float_attr("bias", 0.0), float_attr("lambd", 0.5)};
    r.add(std::move(shrink));
    r.add(float_unary(
        "Swish", {24},
        [](Expr x, const ir::Node& n) { return x * un(UnaryOp::kSigmoid, k(x, n.attr_float("alpha", 1.0)) * x); },
        {float_attr("alpha", 1.0)}));
}


// ---- gradients (op/gradient.h) ----

// y = 1/x: dx = -g y^2.
std::vector<ir::Value*> reciprocal_grad(GradientBuilder& b) {
    ir::Value* y = b.output(0);
    ir::Value* g = b.output_grad_or_zeros(0);
    return {b.emit1("Neg", {b.emit1("Mul", {g, b.emit1("Mul", {y, y})})})};
}

// dx = g where x >= 0, alpha g where x < 0 (the forward's select).
std::vector<ir::Value*> leaky_relu_grad(GradientBuilder& b) {
    ir::Value* x = b.input(0);
    ir::Value* g = b.output_grad_or_zeros(0);
    const DType t = x->type().dtype;
    ir::Value* neg = b.emit1("Less", {x, b.scalar(0.0, t)});
    ir::Value* scaled = b.emit1("Mul", {g, b.scalar(b.node().attr_float("alpha", 0.01), t)});
    return {b.emit1("Where", {neg, scaled, g})};
}

OpDef with_gradient(OpDef d, GradientFn grad) {
    d.gradient = std::move(grad);
    return d;
}

}  // namespace

void register_unary_math_ops(OpRegistry& r) {
    r.add(with_gradient(float_unary("Reciprocal", {1, 6, 13}, [](Expr x, const ir::Node&) { return k(x, 1) / x; }),
                        reciprocal_grad));
    r.add(intrinsic("Floor", {1, 6, 13}, UnaryOp::kFloor));
    r.add(intrinsic("Ceil", {1, 6, 13}, UnaryOp::kCeil));
    r.add(intrinsic("Round", {11, 22}, UnaryOp::kRound));
    r.add(unary_map_op("Sign", {9, 13}, numeric_types(), [](Expr x, const ir::Node&) {
        return te::select(x > k(x, 0), k(x, 1), te::select(x < k(x, 0), k(x, -1), x));
    }));
    r.add(intrinsic("Sin", {7, 22}, UnaryOp::kSin));
    r.add(intrinsic("Cos", {7, 22}, UnaryOp::kCos));
    r.add(intrinsic("Tan", {7, 22}, UnaryOp::kTan));
    r.add(intrinsic("Asin", {7, 22}, UnaryOp::kAsin));
    r.add(intrinsic("Acos", {7, 22}, UnaryOp::kAcos));
    r.add(intrinsic("Atan", {7, 22}, UnaryOp::kAtan));
    r.add(intrinsic("Sinh", {9, 22}, UnaryOp::kSinh));
    r.add(intrinsic("Cosh", {9, 22}, UnaryOp::kCosh));
    r.add(intrinsic("Asinh", {9, 22}, UnaryOp::kAsinh));
    r.add(intrinsic("Acosh", {9, 22}, UnaryOp::kAcosh));
    r.add(intrinsic("Atanh", {9, 22}, UnaryOp::kAtanh));
    r.add(float_unary("Softplus", {1, 22}, [](Expr x, const ir::Node&) { return softplus(x); }));
    r.add(float_unary("Softsign", {1, 22},
                      [](Expr x, const ir::Node&) { return x / (k(x, 1) + un(UnaryOp::kAbs, x)); }));
    r.add(float_unary(
        "Elu", {1, 6, 22},
        [](Expr x, const ir::Node& n) {
            Expr a = k(x, n.attr_float("alpha", 1.0));
            return te::select(x < k(x, 0), a * (un(UnaryOp::kExp, x) - k(x, 1)), x);
        },
        {float_attr("alpha", 1.0)}));
    r.add(float_unary(
        "Selu", {1, 6, 22},
        [](Expr x, const ir::Node& n) {
            Expr a = k(x, n.attr_float("alpha", 1.67326319217681884765625));
            Expr g = k(x, n.attr_float("gamma", 1.05070102214813232421875));
            return g * te::select(x <= k(x, 0), a * un(UnaryOp::kExp, x) - a, x);
        },
        {float_attr("alpha", 1.67326319217681884765625), float_attr("gamma", 1.05070102214813232421875)}));
    r.add(float_unary(
        "Celu", {12},
        [](Expr x, const ir::Node& n) {
            Expr a = k(x, n.attr_float("alpha", 1.0));
            return te::max(k(x, 0), x) + te::min(k(x, 0), a * (un(UnaryOp::kExp, x / a) - k(x, 1)));
        },
        {float_attr("alpha", 1.0)}));
    r.add(with_gradient(float_unary(
                            "LeakyRelu", {1, 6, 16},
                            [](Expr x, const ir::Node& n) {
                                return te::select(x < k(x, 0), k(x, n.attr_float("alpha", 0.01)) * x, x);
                            },
                            {float_attr("alpha", 0.01)}),
                        leaky_relu_grad));
    r.add(float_unary(
        "ThresholdedRelu", {10, 22},
        [](Expr x, const ir::Node& n) { return te::select(x > k(x, n.attr_float("alpha", 1.0)), x, k(x, 0)); },
        {float_attr("alpha", 1.0)}));
    r.add(float_unary(
        "HardSigmoid", {1, 6, 22},
        [](Expr x, const ir::Node& n) {
            Expr v = k(x, n.attr_float("alpha", 0.2)) * x + k(x, n.attr_float("beta", 0.5));
            return te::max(k(x, 0), te::min(k(x, 1), v));
        },
        {float_attr("alpha", 0.2), float_attr("beta", 0.5)}));
    r.add(float_unary("HardSwish", {14, 22}, [](Expr x, const ir::Node&) {
        return x * te::max(k(x, 0), te::min(k(x, 1), x * k(x, 1.0 / 6.0) + k(x, 0.5)));
    }));
    r.add(float_unary("Mish", {18, 22},
                      [](Expr x, const ir::Node&) { return x * un(UnaryOp::kTanh, softplus(x)); }));
    r.add(prelu_op());
    r.add(unary_map_op(
        "IsNaN", {9, 13, 20}, float_types(), [](Expr x, const ir::Node&) { return un(UnaryOp::kIsNaN, x); },
        DType::kBool));
    r.add(isinf_op());
    r.add(unary_map_op("Not", {1}, {DType::kBool}, [](Expr x, const ir::Node&) { return un(UnaryOp::kNot, x); }));
    register_shrink_swish(r);
}

}  // namespace kiln::op
