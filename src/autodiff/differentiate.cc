// Reverse-mode autodiff over ir::Graph (autodiff/differentiate.h).
//
// Algorithm:
//  1. Forward sweep (topological order): the values a wrt value reaches through floating-point
//     values ("active" values; sequences and optionals of floats too, see is_float_value), each remembering one wrt value it comes from (for errors).
//     Integer and bool values never become active, so index/shape paths stop here.
//  2. Backward sweep: the values the loss depends on through floating-point inputs.
//     A node is on a path when one of its inputs is active and one of its outputs reaches the
//     loss; only those nodes are differentiated.
//  3. Reverse topological walk over the on-path nodes: sum the contributions to each output's
//     gradient (Add), call the op's gradient entry with a builder that appends nodes at the end
//     of the graph, check the returned types, and record the contributions to the inputs.
// A node "reads" its inputs and, for If/Loop/Scan, the outer-scope values its regions capture;
// all three steps treat the captured values as inputs (autodiff/control_flow_gradient.h).
// Every appended node reads forward values (earlier in the order) and gradient values appended
// before it, so appending keeps the node order topological without a re-sort.
#include "autodiff/differentiate.h"

#include <unordered_map>
#include <unordered_set>

#include "autodiff/control_flow_gradient.h"
#include "autodiff/region.h"
#include "op/registry.h"
#include "pass/rewrite.h"
#include "support/error.h"

namespace kiln::autodiff {
namespace {

bool is_float_tensor(const ir::Value* v) { return v && v->type().is_tensor() && dtype_is_float(v->type().dtype); }

/// A value a gradient path runs through: floating-point elements, a tensor or not. A sequence
/// or optional of floats on a path is no gap: the node reading or making it has no gradient
/// entry, which is a named error (never a silently zero gradient).
bool is_float_value(const ir::Value* v) { return v && dtype_is_float(v->type().dtype); }

std::string node_label(const ir::Node& n) { return n.name().empty() ? n.op() : n.name(); }

/// Appends the nodes of the backward graph: every node is named "grad/<label>".
class Emitter {
public:
    explicit Emitter(ir::Graph& g) : g_(g) {}

    std::vector<ir::Value*> emit(const std::string& label, const std::string& op,
                                 const std::vector<ir::Value*>& inputs, ir::AttrMap attrs, int num_outputs) {
        const std::string name = std::string(kGradPrefix) + label;
        for (const ir::Value* in : inputs)
            KILN_CHECK(in == nullptr || in->type().is_static(), kInternal)
                << "bug in Kiln: gradient node " << op << " for '" << label << "' reads '" << in->name()
                << "' of non-static type " << in->type().str();
        ir::Node* n = pass::add_inferred_node(g_, op, inputs, std::move(attrs), num_outputs, name + "/");
        n->set_name(name);
        n->set_role(ir::NodeRole::kBackward);
        return n->outputs();
    }

    ir::Value* constant(const std::string& label, Tensor data) {
        return pass::add_constant_like(g_, std::string(kGradPrefix) + label + "/c", std::move(data));
    }

    /// The sum of `parts` (one Add per extra part), or nullptr when empty.
    ir::Value* sum(const std::string& label, const std::vector<ir::Value*>& parts) {
        if (parts.empty()) return nullptr;
        ir::Value* acc = parts[0];
        for (size_t i = 1; i < parts.size(); ++i) acc = emit(label, "Add", {acc, parts[i]}, {}, 1).at(0);
        return acc;
    }

private:
    ir::Graph& g_;
};

class Builder : public op::GradientBuilder {
public:
    Builder(const ir::Node& n, Emitter& e, std::vector<ir::Value*> out_grads, std::vector<bool> needs)
        : node_(n), emitter_(e), out_grads_(std::move(out_grads)), needs_(std::move(needs)) {}

    const ir::Node& node() const override { return node_; }
    ir::Value* output_grad(size_t i) const override { return i < out_grads_.size() ? out_grads_[i] : nullptr; }
    bool needs_grad(size_t i) const override { return i < needs_.size() && needs_[i]; }
    std::vector<ir::Value*> emit(const std::string& op, const std::vector<ir::Value*>& inputs, ir::AttrMap attrs,
                                 int num_outputs) override {
        return emitter_.emit(node_label(node_), op, inputs, std::move(attrs), num_outputs);
    }
    ir::Value* constant(Tensor data) override { return emitter_.constant(node_label(node_), std::move(data)); }

private:
    const ir::Node& node_;
    Emitter& emitter_;
    std::vector<ir::Value*> out_grads_;
    std::vector<bool> needs_;
};

Tensor filled(const ir::TensorType& t, double v) {
    Tensor out(t.dtype, t.static_shape());
    for (int64_t i = 0; i < out.numel(); ++i) {
        if (t.dtype == DType::kFloat64) out.data_as<double>()[i] = v;
        else out.data_as<float>()[i] = static_cast<float>(v);
    }
    return out;
}

void check_fillable(const ir::Value* v, const char* what) {
    KILN_CHECK(v->type().dtype == DType::kFloat32 || v->type().dtype == DType::kFloat64, kUnsupported)
        << "differentiate: " << what << " '" << v->name() << "' has dtype " << dtype_name(v->type().dtype)
        << " (f32 and f64 gradients only)";
}

/// Gives the final gradient of `w` the name "grad/<w>": renames the value when it is a fresh
/// node result of the backward graph, else adds an Identity (the value is a constant, another
/// wrt's gradient, or a forward value).
ir::Value* name_final(ir::Graph& g, Emitter& e, ir::Value* w, ir::Value* grad,
                      std::unordered_set<const ir::Value*>& named) {
    std::string want = std::string(kGradPrefix) + w->name();
    if (g.find_value(want)) want = g.fresh_name(want + "_");
    const bool fresh = grad->producer() && is_backward_node(*grad->producer()) && !named.count(grad);
    if (fresh) {
        grad->set_name(want);
    } else {
        grad = e.emit(w->name(), "Identity", {grad}, {}, 1).at(0);
        grad->set_name(want);
    }
    named.insert(grad);
    return grad;
}

/// What a node reads: its inputs, then the outer-scope values its regions capture.
std::vector<ir::Value*> node_reads(const ir::Graph& g, const ir::Node& n) {
    std::vector<ir::Value*> reads = n.inputs();
    if (has_region(n))
        for (ir::Value* v : captured_values(g, n)) reads.push_back(v);
    return reads;
}

/// One reverse sweep (the file comment's steps 1-3) from seeded outputs to `wrt`.
class Backward {
public:
    Backward(ir::Graph& g, std::string target, LoopValues mode)
        : g_(g), emitter_(g), target_(std::move(target)), mode_(mode) {}

    std::vector<ir::Value*> run(const std::vector<ir::Value*>& ys, const std::vector<ir::Value*>& dys,
                                const std::vector<ir::Value*>& wrt) {
        nodes_ = g_.nodes();
        for (const ir::Node* n : nodes_) reads_[n] = node_reads(g_, *n);
        mark_active(wrt);
        for (size_t k = 0; k < ys.size(); ++k)
            if (dys[k]) {
                to_loss_.insert(ys[k]);
                contributions_[ys[k]].push_back(dys[k]);
            }
        mark_reaching();
        for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it) backprop(**it);
        std::vector<ir::Value*> out;
        for (ir::Value* w : wrt) {
            auto c = contributions_.find(w);
            out.push_back(c == contributions_.end() ? nullptr : emitter_.sum(w->name(), c->second));
        }
        return out;
    }

    /// Erases the forward Loop/Scan nodes replaced by their copies (after the caller is done
    /// with the values it holds).
    void finish() {
        for (ir::Node* n : superseded_) g_.erase_node(n);
        superseded_.clear();
    }

private:
    // 1. Active values, each with the wrt value it comes from.
    void mark_active(const std::vector<ir::Value*>& wrt) {
        for (const ir::Value* w : wrt) origin_.emplace(w, w);
        for (const ir::Node* n : nodes_) {
            const ir::Value* from = nullptr;
            for (const ir::Value* in : reads_.at(n))
                if (in && origin_.count(in)) { from = origin_.at(in); break; }
            if (!from) continue;
            for (const ir::Value* o : n->outputs())
                if (is_float_value(o)) origin_.emplace(o, from);
        }
    }
    // 2. Values the seeded outputs depend on through floating-point values.
    void mark_reaching() {
        for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it) {
            const ir::Node* n = *it;
            bool reaches = false;
            for (const ir::Value* o : n->outputs()) reaches = reaches || to_loss_.count(o);
            if (!reaches) continue;
            for (const ir::Value* in : reads_.at(n))
                if (is_float_value(in)) to_loss_.insert(in);
        }
    }
    // 3. One node of the reverse walk.
    void backprop(ir::Node& n) {
        const std::vector<ir::Value*>& reads = reads_.at(&n);
        const ir::Value* from = nullptr;
        std::vector<bool> needs(reads.size(), false);
        for (size_t i = 0; i < reads.size(); ++i) {
            const ir::Value* in = reads[i];
            if (is_float_value(in) && origin_.count(in)) {
                needs[i] = true;
                if (!from) from = origin_.at(in);
            }
        }
        if (!from) return;
        bool on_path = false;
        for (const ir::Value* o : n.outputs()) on_path = on_path || (origin_.count(o) && to_loss_.count(o));
        if (!on_path) return;

        std::vector<ir::Value*> out_grads(n.num_outputs(), nullptr);
        bool any = false;
        for (size_t k = 0; k < n.num_outputs(); ++k) {
            auto c = contributions_.find(n.output(k));
            if (c == contributions_.end()) continue;
            out_grads[k] = emitter_.sum(node_label(n), c->second);
            any = true;
        }
        if (!any) return;  // every consumer's entry said "no gradient" for these outputs
        const std::vector<ir::Value*> grads = node_gradient(n, reads, needs, out_grads, from);
        for (size_t i = 0; i < grads.size(); ++i) {
            ir::Value* gi = grads[i];
            if (!gi || !needs[i]) continue;
            KILN_CHECK(gi->type() == reads[i]->type(), kInternal)
                << "bug in Kiln: gradient of " << n.op() << " for '" << reads[i]->name() << "' has type "
                << gi->type().str() << ", expected " << reads[i]->type().str() << " (" << n.describe() << ")";
            contributions_[reads[i]].push_back(gi);
        }
    }
    // The gradients of one node's reads: its op's entry, or the control-flow gradient.
    std::vector<ir::Value*> node_gradient(ir::Node& n, const std::vector<ir::Value*>& reads,
                                          const std::vector<bool>& needs, const std::vector<ir::Value*>& out_grads,
                                          const ir::Value* from) {
        if (is_control_flow(n)) {
            try {
                ControlFlowGradient cf = control_flow_gradient(g_, n, reads, needs, out_grads, mode_);
                if (cf.superseded) superseded_.push_back(cf.superseded);
                return cf.grads;
            } catch (Error& e) {
                e.add_context("while differentiating " + n.describe() + " for '" + target_ + "'");
                throw;
            }
        }
        const op::OpDef* def = op::OpRegistry::global().find(n.op());
        KILN_CHECK(def && def->gradient, kUnsupported)
            << "no gradient for op '" << n.op() << "' (node '" << node_label(n) << "'): needed to differentiate '"
            << target_ << "' with respect to '" << from->name() << "'";
        Builder b(n, emitter_, out_grads, std::vector<bool>(needs.begin(), needs.begin() + n.num_inputs()));
        std::vector<ir::Value*> grads = def->gradient(b);
        KILN_CHECK(grads.size() == n.num_inputs(), kInternal)
            << "bug in Kiln: gradient of " << n.op() << " returned " << grads.size() << " values for "
            << n.num_inputs() << " inputs (" << n.describe() << ")";
        return grads;
    }

    ir::Graph& g_;
    Emitter emitter_;
    std::string target_;
    LoopValues mode_;
    std::vector<ir::Node*> nodes_;
    std::unordered_map<const ir::Node*, std::vector<ir::Value*>> reads_;
    std::unordered_map<const ir::Value*, const ir::Value*> origin_;
    std::unordered_set<const ir::Value*> to_loss_;
    std::unordered_map<const ir::Value*, std::vector<ir::Value*>> contributions_;
    std::vector<ir::Node*> superseded_;  // forward Loop/Scan nodes replaced by their augmented copies
};

}  // namespace

std::vector<ir::Value*> vjp(ir::Graph& g, const std::vector<ir::Value*>& ys, const std::vector<ir::Value*>& dys,
                            const std::vector<ir::Value*>& wrt, LoopValues loop_values) {
    KILN_CHECK(ys.size() == dys.size(), kInternal) << "bug in Kiln: vjp with " << ys.size() << " outputs and "
                                                   << dys.size() << " output gradients";
    std::string target;
    for (size_t k = 0; k < ys.size(); ++k)
        if (dys[k]) target += (target.empty() ? "" : ", ") + ys[k]->name();
    Backward b(g, target, loop_values);
    std::vector<ir::Value*> out = b.run(ys, dys, wrt);
    b.finish();
    return out;
}

Gradients differentiate(ir::Graph& g, ir::Value* loss, const std::vector<ir::Value*>& wrt, const GradientOptions& opts) {
    KILN_CHECK(loss != nullptr, kInvalidArgument) << "differentiate: no loss value";
    KILN_CHECK(is_float_tensor(loss), kInvalidArgument)
        << "differentiate: loss '" << loss->name() << "' must be a floating-point tensor, got " << loss->type().str();
    KILN_CHECK(loss->type().is_static() && shape_numel(loss->type().static_shape()) == 1, kInvalidArgument)
        << "differentiate: loss '" << loss->name() << "' must be a scalar (one element), got " << loss->type().str();
    check_fillable(loss, "loss");
    for (const ir::Value* w : wrt) {
        KILN_CHECK(w != nullptr, kInvalidArgument) << "differentiate: a wrt value is null";
        KILN_CHECK(is_float_tensor(w), kInvalidArgument)
            << "differentiate: cannot differentiate '" << loss->name() << "' with respect to '" << w->name()
            << "' of type " << w->type().str() << " (floating-point values only)";
        check_fillable(w, "wrt value");
    }
    Emitter emitter(g);
    ir::Value* seed = emitter.constant("seed", filled(loss->type(), opts.seed));
    Backward backward(g, loss->name(), opts.loop_values);
    const std::vector<ir::Value*> sums = backward.run({loss}, {seed}, wrt);
    Gradients out;
    std::unordered_set<const ir::Value*> named;
    for (size_t i = 0; i < wrt.size(); ++i) {
        ir::Value* grad = sums[i];
        if (!grad) grad = emitter.constant(wrt[i]->name() + "/zero", filled(wrt[i]->type(), 0.0));
        out.grads.push_back(name_final(g, emitter, wrt[i], grad, named));
    }
    backward.finish();
    return out;
}

std::vector<ir::Value*> float_constants(const ir::Graph& g) {
    std::vector<ir::Value*> out;
    for (ir::Value* c : g.constants())
        if (is_float_tensor(c)) out.push_back(c);
    return out;
}

bool is_backward_node(const ir::Node& n) { return n.role() == ir::NodeRole::kBackward; }

}  // namespace kiln::autodiff
