// Elementwise ops: Add Sub Mul Div Pow (numpy broadcasting), Relu Sigmoid Tanh Exp Erf Sqrt
// Neg Abs Log Gelu Clip Identity.
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
        auto out = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) {
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
        auto out = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) { return f(te::read(x, i)); }, name, a.out_dtype());
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
        auto out = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) {
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
        auto out = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) {
                Expr base = broadcast_read(x, i), ex = broadcast_read(y, i);
                if (dtype_is_float(xt)) {
                    const DType cdt = te::compute_dtype(xt);
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
        auto out = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) {
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

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
    r.add(binary_op("Add", te::BinaryOp::kAdd));
    r.add(binary_op("Sub", te::BinaryOp::kSub));
    r.add(binary_op("Mul", te::BinaryOp::kMul));
    r.add(binary_op("Div", te::BinaryOp::kDiv));
    r.add(unary_op("Relu", {1, 6, 13, 14}, relu_types(),
                   [](Expr x) { return te::max(x, te::make_const(x->dtype, 0)); }));
    r.add(unary_op("Sigmoid", {1, 6, 13}, float_types(), [](Expr x) { return te::unary(te::UnaryOp::kSigmoid, x); }));
    r.add(unary_op("Tanh", {1, 6, 13}, float_types(), [](Expr x) { return te::unary(te::UnaryOp::kTanh, x); }));
    r.add(unary_op("Exp", {1, 6, 13}, float_types(), [](Expr x) { return te::unary(te::UnaryOp::kExp, x); }));
    OpDef identity = unary_op("Identity", {1, 13, 14, 16, 19, 21}, all_types(), [](Expr x) { return x; });
    // Sequences and optionals (Identity-14/16) pass through the host kernel unchanged.
    identity.host = [](const HostArgs& a) { return std::vector<Datum>{a.inputs.at(0)}; };
    r.add(std::move(identity));
    r.add(clip_op());
    r.add(pow_op());
    auto un = [](te::UnaryOp op) { return [op](Expr x) { return te::unary(op, x); }; };
    r.add(unary_op("Erf", {9, 13}, float_types(), un(te::UnaryOp::kErf)));
    r.add(unary_op("Sqrt", {1, 6, 13}, float_types(), un(te::UnaryOp::kSqrt)));
    r.add(unary_op("Log", {1, 6, 13}, float_types(), un(te::UnaryOp::kLog)));
    r.add(unary_op("Neg", {1, 6, 13}, relu_types(), un(te::UnaryOp::kNeg)));
    r.add(unary_op("Abs", {1, 6, 13}, numeric_types(), un(te::UnaryOp::kAbs)));
    r.add(gelu_op());
}

}  // namespace kiln::op
