// Optimizer ops of the ai.onnx.preview.training domain (opset 1): Adagrad, Adam, Momentum.
//
// Each takes R (learning rate, f32/f64 scalar), T (update count, i64 scalar), then k groups of n
// same-shaped tensors — Adagrad and Momentum: X..., G..., H... / V...; Adam: X..., G..., V...,
// H... — and returns k' groups of n updated tensors (Adagrad X_new..., H_new...; Adam X_new...,
// V_new..., H_new...; Momentum X_new..., V_new...). Every tensor i updates independently of the
// others by the spec's pseudo code (G' = norm_coefficient * X + G is the regularized gradient):
//   Adagrad:  r = R / (1 + T * decay_factor);  H_new = H + G'^2;
//             X_new = X - r * G' / (sqrt(H_new) + epsilon)
//   Adam:     V_new = alpha * V + (1 - alpha) * G';  H_new = beta * H + (1 - beta) * G'^2;
//             R_adj = T > 0 ? R * sqrt(1 - beta^T) / (1 - alpha^T) : R;
//             X_new = (1 - norm_coefficient_post) * (X - R_adj * V_new / (sqrt(H_new) + epsilon))
//   Momentum: beta_adj = T > 0 ? beta : 1;  V_new = alpha * V + beta_adj * G';
//             X_new = X - R * V_new (standard) or X - R * (G' + alpha * V_new) (nesterov)
// R and T are runtime inputs read as scalars inside the element formula; the arithmetic runs in
// the tensors' dtype (f32 or f64). Every output is its own elementwise TE stage that recomputes
// the shared terms from the inputs (a few flops, no intermediate buffer), so the op fuses like
// an elementwise op. Pattern kBroadcast: each output element reads the same index of its
// group's inputs plus the two scalars.
#include <string>
#include <vector>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

constexpr const char* kDomain = "ai.onnx.preview.training";

/// Element formula: (R, T, the group's input elements, node) -> the group's output elements.
/// R is already in the compute dtype, T is int64.
using StepFn = std::function<std::vector<Expr>(Expr r, Expr t, const std::vector<Expr>& in, const ir::Node& n)>;

struct OptimizerSpec {
    std::string name;
    std::vector<std::string> in_names;   // per-group inputs, X first
    std::vector<std::string> out_names;  // per-group outputs
    std::vector<AttrSpec> attrs;
    StepFn step;
};

bool is_scalar(const ir::TensorType& t) {
    for (const auto& d : t.shape)
        if (!d.is_static() || d.value != 1) return false;
    return true;
}

// Reads a one-element tensor (rank 0 or all dims 1).
Expr scalar_read(const te::Tensor& t) { return te::read(t, std::vector<Expr>(t->ndim(), te::int_imm(0))); }

// Number of tensors per group; throws naming the node when the counts do not fit the spec.
size_t group_count(const ir::Node& n, const OptimizerSpec& s) {
    const size_t k = s.in_names.size(), ko = s.out_names.size();
    const size_t nin = n.num_inputs();
    KILN_CHECK(nin >= 2 + k && (nin - 2) % k == 0, kInvalidModel)
        << node_label(n) << ": expected 2 + " << k << " * n inputs (R, T, then groups " << s.in_names.front()
        << "... of n tensors each), got " << nin << " inputs";
    const size_t groups = (nin - 2) / k;
    KILN_CHECK(n.num_outputs() == ko * groups, kInvalidModel)
        << node_label(n) << ": expected " << ko << " * " << groups << " = " << ko * groups << " outputs for "
        << groups << " optimized tensor(s), got " << n.num_outputs();
    return groups;
}

std::vector<ir::TensorType> infer_optimizer(const ir::Node& n, const OptimizerSpec& s) {
    const size_t groups = group_count(n, s);
    const auto& r = input_type(n, 0, "R");
    const auto& t = input_type(n, 1, "T");
    check_dtype(n, "R", r.dtype, {DType::kFloat32, DType::kFloat64});
    check_dtype(n, "T", t.dtype, {DType::kInt64});
    KILN_CHECK(is_scalar(r), kInvalidModel)
        << node_label(n) << ": input R must be a scalar, got shape " << dims_str(r.shape);
    KILN_CHECK(is_scalar(t), kInvalidModel)
        << node_label(n) << ": input T must be a scalar, got shape " << dims_str(t.shape);
    std::vector<ir::TensorType> x_types;
    for (size_t i = 0; i < groups; ++i) {
        const std::string xname = s.in_names[0] + "_" + std::to_string(i + 1);
        const auto& x = input_type(n, 2 + i, xname.c_str());
        check_dtype(n, xname.c_str(), x.dtype, {DType::kFloat32, DType::kFloat64});
        for (size_t m = 1; m < s.in_names.size(); ++m) {
            const std::string name = s.in_names[m] + "_" + std::to_string(i + 1);
            const auto& o = input_type(n, 2 + m * groups + i, name.c_str());
            check_same_dtype(n, xname.c_str(), x.dtype, name.c_str(), o.dtype);
            KILN_CHECK(o.shape == x.shape, kInvalidModel)
                << node_label(n) << ": input " << name << " must have the shape of " << xname << " "
                << dims_str(x.shape) << ", got " << dims_str(o.shape);
        }
        x_types.push_back(x);
    }
    std::vector<ir::TensorType> out;
    for (size_t j = 0; j < s.out_names.size(); ++j) out.insert(out.end(), x_types.begin(), x_types.end());
    return out;
}

std::vector<te::Tensor> compute_optimizer(const ComputeArgs& a, const OptimizerSpec& s) {
    const size_t k = s.in_names.size(), ko = s.out_names.size();
    const size_t groups = (a.inputs.size() - 2) / k;
    std::vector<te::Tensor> outs(ko * groups);
    for (size_t i = 0; i < groups; ++i) {
        const DType cdt = te::compute_dtype(a.in(2 + i)->dtype);
        for (size_t j = 0; j < ko; ++j) {
            outs[j * groups + i] = te::compute(
                a.out_shape(j * groups + i), [&](const std::vector<Var>& idx) {
                    std::vector<Expr> elems;
                    for (size_t m = 0; m < k; ++m) elems.push_back(te::read(a.in(2 + m * groups + i), idx));
                    Expr r = te::cast(cdt, scalar_read(a.in(0)));
                    Expr t = te::cast(DType::kInt64, scalar_read(a.in(1)));
                    return s.step(r, t, elems, a.node).at(j);
                },
                s.name + "_" + s.out_names[j], a.out_dtype(j * groups + i));
        }
    }
    return outs;
}

OpDef optimizer_op(OptimizerSpec spec) {
    OpDef d;
    d.name = spec.name;
    d.domain = kDomain;
    d.onnx_versions = {1};
    d.min_inputs = 2 + static_cast<int>(spec.in_names.size());
    d.max_inputs = -1;
    d.min_outputs = static_cast<int>(spec.out_names.size());
    d.max_outputs = -1;
    d.attrs = spec.attrs;
    d.pattern = OpPattern::kBroadcast;
    d.infer = [spec](const ir::Node& n) { return infer_optimizer(n, spec); };
    d.compute = [spec](const ComputeArgs& a) { return compute_optimizer(a, spec); };
    return d;
}

Expr c_of(const Expr& like, double v) { return te::make_const(like->dtype, v); }
Expr sqrt_of(const Expr& e) { return te::unary(te::UnaryOp::kSqrt, e); }

OpDef adagrad_op() {
    OptimizerSpec s;
    s.name = "Adagrad";
    s.in_names = {"X", "G", "H"};
    s.out_names = {"X_new", "H_new"};
    s.attrs = {{"decay_factor", AttrKind::kFloat, ir::Attr(0.0)},
               {"epsilon", AttrKind::kFloat, ir::Attr(1e-6)},
               {"norm_coefficient", AttrKind::kFloat, ir::Attr(0.0)}};
    s.step = [](Expr r, Expr t, const std::vector<Expr>& in, const ir::Node& n) {
        const Expr &x = in[0], &g = in[1], &h = in[2];
        const Expr rate = r / (c_of(r, 1.0) + te::cast(r->dtype, t) * c_of(r, n.attr_float("decay_factor", 0.0)));
        const Expr greg = c_of(x, n.attr_float("norm_coefficient", 0.0)) * x + g;
        const Expr h_new = h + greg * greg;
        const Expr x_new = x - rate * greg / (sqrt_of(h_new) + c_of(x, n.attr_float("epsilon", 1e-6)));
        return std::vector<Expr>{x_new, h_new};
    };
    return optimizer_op(std::move(s));
}

OpDef adam_op() {
    OptimizerSpec s;
    s.name = "Adam";
    s.in_names = {"X", "G", "V", "H"};
    s.out_names = {"X_new", "V_new", "H_new"};
    s.attrs = {{"alpha", AttrKind::kFloat, ir::Attr(0.9)},
               {"beta", AttrKind::kFloat, ir::Attr(0.999)},
               {"epsilon", AttrKind::kFloat, ir::Attr(1e-6)},
               {"norm_coefficient", AttrKind::kFloat, ir::Attr(0.0)},
               {"norm_coefficient_post", AttrKind::kFloat, ir::Attr(0.0)}};
    s.step = [](Expr r, Expr t, const std::vector<Expr>& in, const ir::Node& n) {
        const Expr &x = in[0], &g = in[1], &v = in[2], &h = in[3];
        const double alpha = n.attr_float("alpha", 0.9), beta = n.attr_float("beta", 0.999);
        const Expr greg = c_of(x, n.attr_float("norm_coefficient", 0.0)) * x + g;
        const Expr v_new = c_of(x, alpha) * v + c_of(x, 1.0 - alpha) * greg;
        const Expr h_new = c_of(x, beta) * h + c_of(x, 1.0 - beta) * (greg * greg);
        const Expr tf = te::cast(x->dtype, t);
        const Expr beta_t = te::binary(te::BinaryOp::kPow, c_of(x, beta), tf);
        const Expr alpha_t = te::binary(te::BinaryOp::kPow, c_of(x, alpha), tf);
        const Expr rx = te::cast(x->dtype, r);
        const Expr r_adj =
            te::select(t > te::int_imm(0), rx * sqrt_of(c_of(x, 1.0) - beta_t) / (c_of(x, 1.0) - alpha_t), rx);
        const Expr x_new = x - r_adj * (v_new / (sqrt_of(h_new) + c_of(x, n.attr_float("epsilon", 1e-6))));
        const Expr x_final = c_of(x, 1.0 - n.attr_float("norm_coefficient_post", 0.0)) * x_new;
        return std::vector<Expr>{x_final, v_new, h_new};
    };
    return optimizer_op(std::move(s));
}

OpDef momentum_op() {
    OptimizerSpec s;
    s.name = "Momentum";
    s.in_names = {"X", "G", "V"};
    s.out_names = {"X_new", "V_new"};
    s.attrs = {{"alpha", AttrKind::kFloat, std::nullopt, true},
               {"beta", AttrKind::kFloat, std::nullopt, true},
               {"mode", AttrKind::kString, std::nullopt, true},
               {"norm_coefficient", AttrKind::kFloat, std::nullopt, true}};
    s.step = [](Expr r, Expr t, const std::vector<Expr>& in, const ir::Node& n) {
        const Expr &x = in[0], &g = in[1], &v = in[2];
        const double alpha = n.attr_float("alpha", 0.0);
        const Expr greg = c_of(x, n.attr_float("norm_coefficient", 0.0)) * x + g;
        const Expr beta_adj = te::select(t > te::int_imm(0), c_of(x, n.attr_float("beta", 0.0)), c_of(x, 1.0));
        const Expr v_new = c_of(x, alpha) * v + beta_adj * greg;
        const Expr rx = te::cast(x->dtype, r);
        const bool nesterov = n.attr_string("mode", "standard") == "nesterov";
        const Expr x_new = nesterov ? x - rx * (greg + c_of(x, alpha) * v_new) : x - rx * v_new;
        return std::vector<Expr>{x_new, v_new};
    };
    OpDef d = optimizer_op(std::move(s));
    const InferFn base = d.infer;
    d.infer = [base](const ir::Node& n) {
        const std::string mode = n.attr_string("mode", "");
        KILN_CHECK(mode == "standard" || mode == "nesterov", kInvalidModel)
            << node_label(n) << ": attribute mode must be 'standard' or 'nesterov', got '" << mode << "'";
        return base(n);
    };
    return d;
}

}  // namespace

void register_training_ops(OpRegistry& r) {
    r.add(adagrad_op());
    r.add(adam_op());
    r.add(momentum_op());
}

}  // namespace kiln::op
