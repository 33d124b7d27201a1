// Optimizer updates as graph nodes (see optimizer.h for the formulas and their sources).
#include "autodiff/optimizer.h"

#include <algorithm>
#include <cmath>

#include "pass/rewrite.h"
#include "support/error.h"

namespace kiln::autodiff {

namespace {

/// Appends nodes for one parameter's update, named "opt/<param>/...".
class UpdateWriter {
public:
    UpdateWriter(ir::Graph& g, std::string prefix, DType dtype) : g_(g), prefix_(std::move(prefix)), dtype_(dtype) {}

    ir::Value* op(const std::string& name, const std::vector<ir::Value*>& in, ir::AttrMap attrs = {}) {
        ir::Node* n = pass::add_inferred_node(g_, name, in, std::move(attrs), 1, prefix_ + name);
        n->set_name(prefix_ + name);
        return n->output(0);
    }
    ir::Value* add(ir::Value* a, ir::Value* b) { return op("Add", {a, b}); }
    ir::Value* sub(ir::Value* a, ir::Value* b) { return op("Sub", {a, b}); }
    ir::Value* mul(ir::Value* a, ir::Value* b) { return op("Mul", {a, b}); }
    ir::Value* div(ir::Value* a, ir::Value* b) { return op("Div", {a, b}); }
    /// A rank-0 constant of the parameter's dtype.
    ir::Value* scalar(double v) {
        Tensor t(dtype_, {});
        t.set_f64(0, v);
        return pass::add_constant_like(g_, prefix_ + "c", std::move(t));
    }
    /// A step scalar input (f32) in the parameter's dtype.
    ir::Value* in_dtype(ir::Value* s) {
        if (s->type().dtype == dtype_) return s;
        return op("Cast", {s}, {{"to", ir::Attr(static_cast<int64_t>(dtype_to_onnx(dtype_)))}});
    }

private:
    ir::Graph& g_;
    std::string prefix_;
    DType dtype_;
};

bool is_adam(const OptimizerSpec& o) { return o.kind == "adam" || o.kind == "adamw"; }

/// Global-norm clipping: the factor min(clip / (norm + 1e-6), 1) as an f32 scalar value.
ir::Value* clip_factor(ir::Graph& g, const OptimizerSpec& o, const std::vector<ir::Value*>& grads) {
    UpdateWriter w(g, "opt/clip/", DType::kFloat32);
    ir::Value* total = nullptr;
    for (ir::Value* gr : grads) {
        ir::Value* sq = w.op("ReduceSumSquare", {gr}, {{"keepdims", ir::Attr(int64_t{0})}});
        if (sq->type().dtype != DType::kFloat32) sq = w.op("Cast", {sq}, {{"to", ir::Attr(int64_t{1})}});
        total = total ? w.add(total, sq) : sq;
    }
    ir::Value* norm = w.op("Sqrt", {total});
    ir::Value* coef = w.div(w.scalar(o.clip_norm), w.add(norm, w.scalar(1e-6)));
    return w.op("Min", {coef, w.scalar(1.0)});
}

}  // namespace

void check_optimizer_options(const OptimizerSpec& o) {
    KILN_CHECK(o.kind == "sgd" || is_adam(o), kInvalidArgument)
        << "optimizer must be sgd, adam or adamw, got '" << o.kind << "'";
    KILN_CHECK(o.weight_decay >= 0 && std::isfinite(o.weight_decay), kInvalidArgument)
        << "optimizer weight_decay must be >= 0, got " << o.weight_decay;
    KILN_CHECK(o.clip_norm >= 0 && std::isfinite(o.clip_norm), kInvalidArgument)
        << "optimizer clip_norm must be >= 0 (0: no clipping), got " << o.clip_norm;
    if (o.kind == "sgd") {
        KILN_CHECK(o.momentum >= 0 && o.momentum < 1e6, kInvalidArgument)
            << "optimizer momentum must be >= 0, got " << o.momentum;
        KILN_CHECK(!o.nesterov || o.momentum > 0, kInvalidArgument)
            << "optimizer nesterov needs momentum > 0, got momentum " << o.momentum;
        return;
    }
    KILN_CHECK(o.beta1 >= 0 && o.beta1 < 1, kInvalidArgument) << "optimizer beta1 must be in [0, 1), got " << o.beta1;
    KILN_CHECK(o.beta2 >= 0 && o.beta2 < 1, kInvalidArgument) << "optimizer beta2 must be in [0, 1), got " << o.beta2;
    KILN_CHECK(o.eps > 0 && std::isfinite(o.eps), kInvalidArgument) << "optimizer eps must be > 0, got " << o.eps;
}

double clip_factor_of_norm(double clip_norm, double norm) { return std::min(clip_norm / (norm + 1e-6), 1.0); }

std::vector<std::string> optimizer_state_slots(const OptimizerSpec& o) {
    if (is_adam(o)) return {"exp_avg", "exp_avg_sq"};
    if (o.momentum > 0) return {"momentum"};
    return {};
}

std::string optimizer_state_name(const std::string& param, const std::string& slot) {
    return "opt/" + param + "/" + slot;
}

std::vector<std::string> optimizer_scalar_names(const OptimizerSpec& o) {
    if (o.kind == "adamw" && o.weight_decay > 0) return {"opt/step_size", "opt/bc2_sqrt", "opt/decay"};
    if (is_adam(o)) return {"opt/step_size", "opt/bc2_sqrt"};
    return {"opt/lr"};
}

std::vector<double> optimizer_scalar_values(const OptimizerSpec& o, int64_t step, double lr) {
    if (!is_adam(o)) return {lr};
    const double t = static_cast<double>(step + 1);
    const double bc1 = 1.0 - std::pow(o.beta1, t), bc2 = 1.0 - std::pow(o.beta2, t);
    std::vector<double> v{lr / bc1, std::sqrt(bc2)};
    if (o.kind == "adamw" && o.weight_decay > 0) v.push_back(1.0 - lr * o.weight_decay);
    return v;
}

OptimizerGraph append_optimizer(ir::Graph& g, const OptimizerSpec& o, const std::vector<ir::Value*>& params,
                                const std::vector<ir::Value*>& grads) {
    check_optimizer_options(o);
    KILN_CHECK(params.size() == grads.size(), kInternal)
        << "bug in Kiln: " << params.size() << " parameters but " << grads.size() << " gradients";
    OptimizerGraph out;
    for (const std::string& name : optimizer_scalar_names(o))
        out.scalars.push_back(g.add_input(name, ir::TensorType::of_static(DType::kFloat32, {})));
    const std::vector<std::string> slots = optimizer_state_slots(o);
    ir::Value* clip = nullptr;
    if (o.clip_norm > 0)
        clip = o.clip_from_input ? g.add_input(kClipFactorInput, ir::TensorType::of_static(DType::kFloat32, {}))
                                 : clip_factor(g, o, grads);

    for (size_t i = 0; i < params.size(); ++i) {
        ir::Value* p = params[i];
        const DType dt = p->type().dtype;
        KILN_CHECK(dtype_is_float(dt), kInvalidArgument)
            << "parameter '" << p->name() << "' has dtype " << dtype_name(dt) << "; only floating-point parameters train";
        KILN_CHECK(grads[i] && grads[i]->type().static_shape() == p->type().static_shape(), kInternal)
            << "bug in Kiln: the gradient of '" << p->name() << "' does not have the parameter's shape";
        UpdateWriter w(g, "opt/" + p->name() + "/", dt);
        std::vector<ir::Value*> state;
        for (const std::string& slot : slots)
            state.push_back(g.add_input(optimizer_state_name(p->name(), slot), p->type()));
        ir::Value* grad = grads[i];
        if (clip) grad = w.mul(grad, w.in_dtype(clip));
        std::vector<ir::Value*> new_state;
        ir::Value* np = nullptr;
        if (o.kind == "sgd") {
            ir::Value* lr = w.in_dtype(out.scalars[0]);
            ir::Value* d = o.weight_decay > 0 ? w.add(grad, w.mul(w.scalar(o.weight_decay), p)) : grad;
            if (o.momentum > 0) {
                ir::Value* mom = w.scalar(o.momentum);
                ir::Value* buf = w.add(w.mul(state[0], mom), d);
                new_state.push_back(buf);
                d = o.nesterov ? w.add(d, w.mul(mom, buf)) : buf;
            }
            np = w.sub(p, w.mul(lr, d));
        } else {
            ir::Value* step_size = w.in_dtype(out.scalars[0]);
            ir::Value* bc2_sqrt = w.in_dtype(out.scalars[1]);
            ir::Value* base = p;
            if (o.kind == "adamw" && o.weight_decay > 0) base = w.mul(p, w.in_dtype(out.scalars[2]));
            if (o.kind == "adam" && o.weight_decay > 0) grad = w.add(grad, w.mul(w.scalar(o.weight_decay), p));
            ir::Value* m = w.add(w.mul(state[0], w.scalar(o.beta1)), w.mul(grad, w.scalar(1.0 - o.beta1)));
            ir::Value* v = w.add(w.mul(state[1], w.scalar(o.beta2)), w.mul(w.mul(w.scalar(1.0 - o.beta2), grad), grad));
            ir::Value* denom = w.add(w.div(w.op("Sqrt", {v}), bc2_sqrt), w.scalar(o.eps));
            np = w.sub(base, w.div(w.mul(step_size, m), denom));
            new_state = {m, v};
        }
        out.state.push_back(std::move(state));
        out.new_state.push_back(std::move(new_state));
        out.new_params.push_back(np);
    }
    return out;
}

}  // namespace kiln::autodiff
