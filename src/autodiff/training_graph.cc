// The training graphs of a model (see training_graph.h).
#include "autodiff/training_graph.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <set>

#include "autodiff/differentiate.h"
#include "autodiff/region.h"
#include "autodiff/sync_batch_norm.h"
#include "op/registry.h"
#include "pass/gelu_from_erf.h"
#include "pass/rewrite.h"
#include "support/error.h"

namespace kiln::autodiff {

namespace {

constexpr const char* kBatchNorm = "BatchNormalization";

bool is_stat_slot(const ir::Node& n, size_t i) { return n.op() == kBatchNorm && (i == 3 || i == 4); }

bool is_value_slot(const ir::Node& n, size_t i) {
    const op::OpDef* def = op::OpRegistry::global().find(n.op());
    if (!def) return false;
    return std::find(def->value_inputs.begin(), def->value_inputs.end(), static_cast<int>(i)) != def->value_inputs.end();
}

/// Turns constant `name` into a graph input of the same name and type (its data is dropped:
/// the session feeds the value).
void constant_to_input(ir::Graph& g, const std::string& name) {
    ir::Value* c = g.find_value(name);
    KILN_CHECK(c && c->is_constant(), kInternal) << "bug in Kiln: '" << name << "' is not a constant of the model";
    const ir::TensorType type = c->type();
    c->set_name(g.fresh_name(name + "/initializer"));
    ir::Value* in = g.add_input(name, type);
    g.replace_all_uses(c, in);
    g.erase_constant(c);
}

ir::Value* model_output(const ir::Graph& g, const LossSpec& loss) {
    KILN_CHECK(!g.outputs().empty(), kInvalidArgument) << "the model has no outputs to train";
    if (loss.output.empty()) return g.outputs()[0];
    std::string names;
    for (ir::Value* o : g.outputs()) {
        if (o->name() == loss.output) return o;
        names += (names.empty() ? "'" : ", '") + o->name() + "'";
    }
    KILN_THROW(kInvalidArgument) << "loss output '" << loss.output << "' is not an output of the model (outputs: " << names
                                 << ")";
    return nullptr;
}

/// BatchNormalization nodes reading running statistics (inputs) switch to training mode: a
/// new node with the running mean / var outputs replaces each. Returns (stat name, its updated
/// value) pairs.
std::vector<std::pair<std::string, ir::Value*>> batch_norm_to_training(ir::Graph& g, const std::set<std::string>& stats) {
    std::vector<std::pair<std::string, ir::Value*>> updated;
    for (ir::Node* n : g.nodes()) {
        if (n->op() != kBatchNorm || n->attr_int("training_mode", 0) != 0) continue;
        ir::Value* mean = n->input(3);
        ir::Value* var = n->input(4);
        if (!mean || !var || !stats.count(mean->name()) || !stats.count(var->name())) continue;
        ir::AttrMap attrs = n->attrs();
        attrs["training_mode"] = ir::Attr(int64_t{1});
        ir::Node* t = pass::add_inferred_node(g, kBatchNorm, n->inputs(), attrs, 3, n->name().empty() ? "bn" : n->name());
        t->set_name(n->name());
        g.replace_all_uses(n->output(0), t->output(0));
        g.erase_node(n);
        updated.emplace_back(mean->name(), t->output(1));
        updated.emplace_back(var->name(), t->output(2));
    }
    g.topo_sort();
    return updated;
}

/// Dropout nodes get a constant true training_mode input.
void dropout_to_training(ir::Graph& g, uint64_t seed) {
    uint64_t index = 0;
    for (ir::Node* n : g.nodes()) {
        if (n->op() != "Dropout") continue;
        ++index;
        ir::AttrMap attrs = n->attrs();
        if (seed != 0 && !attrs.count("seed"))
            attrs["seed"] = ir::Attr(static_cast<int64_t>((seed * 0x9E3779B97F4A7C15ull + index) & 0x7fffffff));
        std::vector<ir::Value*> in = n->inputs();
        in.resize(3, nullptr);
        Tensor on(DType::kBool, {});
        on.set_i64(0, 1);
        in[2] = pass::add_constant_like(g, (n->name().empty() ? std::string("dropout") : n->name()) + "/training_mode", on);
        ir::Node* t = pass::add_inferred_node(g, "Dropout", in, attrs, static_cast<int>(n->num_outputs()),
                                              n->name().empty() ? "dropout" : n->name());
        t->set_name(n->name());
        for (size_t k = 0; k < n->num_outputs(); ++k) g.replace_all_uses(n->output(k), t->output(k));
        g.erase_node(n);
    }
    g.topo_sort();
}

/// MaxPool nodes on a computed value (a gradient may flow through them) get their row-major
/// Indices output: MaxPool's gradient reads them (op/defs/pool.cc), which otherwise runs a second
/// MaxPool for them beside the forward's; with both outputs one kernel writes the values and the
/// Indices in one pass (runtime/maxpool_kernel.h).
void max_pool_with_indices(ir::Graph& g) {
    for (ir::Node* n : g.nodes()) {
        if (n->op() != "MaxPool" || n->num_outputs() != 1 || !n->input(0)->producer()) continue;
        ir::AttrMap attrs = n->attrs();
        attrs.erase("storage_order");  // only orders the Indices, which the node did not have
        ir::Node* t = pass::add_inferred_node(g, "MaxPool", n->inputs(), attrs, 2, n->name().empty() ? "maxpool" : n->name());
        t->set_name(n->name());
        g.replace_all_uses(n->output(0), t->output(0));
        g.erase_node(n);
    }
    g.topo_sort();
}

/// MatMul(A, Transpose(W)) with W a 2-D graph input (a parameter: PyTorch's Linear exports its
/// [out, in] weight this way) becomes Gemm(A as [rows, K], W, transB=1), reshaped back to the
/// MatMul's shape. The forward then reads W through the trans flag instead of transposing it
/// every step, and Gemm's gradient writes dW in W's layout (G^T A) instead of a Transpose of
/// A^T G: BERT-style layers spent ~10% of the step in these Transposes. A bias Add after it
/// becomes Gemm's C (its gradient the rows' sum).
void transposed_weights_to_gemm(ir::Graph& g) {
    bool changed = false;
    for (ir::Node* n : g.nodes()) {  // a Transpose comes before its MatMuls: erased once visited
        if (n->op() != "MatMul") continue;
        ir::Node* t = n->input(1)->producer();
        if (!t || t->op() != "Transpose" || t->input(0)->producer()) continue;
        const ir::TensorType& wt = t->input(0)->type();
        const ir::TensorType& at = n->input(0)->type();
        if (wt.rank() != 2 || at.rank() < 2 || !at.is_static() || !n->output(0)->type().is_static() ||
            t->attr_ints("perm", {1, 0}) != std::vector<int64_t>{1, 0} || at.dtype != wt.dtype ||
            (at.dtype != DType::kFloat32 && at.dtype != DType::kFloat64))
            continue;
        const Shape as = at.static_shape(), ys = n->output(0)->type().static_shape();
        ir::Value* a = n->input(0);
        if (as.size() > 2) {
            ir::Value* rows = pass::shape_constant(g, {shape_numel(as) / as.back(), as.back()});
            a = pass::add_inferred_node(g, "Reshape", {a, rows})->output(0);
        }
        // A following bias Add ([N]) becomes Gemm's C: the Reshape would otherwise stand between
        // the product and the Add that oneDNN fuses into it.
        ir::Node* add = pass::sole_user(g, n->output(0));
        ir::Value* bias = nullptr;
        if (add && add->op() == "Add") {
            bias = add->input(0) == n->output(0) ? add->input(1) : add->input(0);
            const ir::TensorType& bt = bias->type();
            if (bt.rank() != 1 || !bt.is_static() || bt.static_shape()[0] != ys.back() || bt.dtype != at.dtype ||
                add->output(0)->type().static_shape() != ys)
                add = nullptr, bias = nullptr;
        } else {
            add = nullptr;
        }
        std::vector<ir::Value*> in{a, t->input(0)};
        if (bias) in.push_back(bias);
        ir::Value* y = pass::add_inferred_node(g, "Gemm", in, {{"transB", int64_t{1}}}, 1, n->name())->output(0);
        if (as.size() > 2) y = pass::add_inferred_node(g, "Reshape", {y, pass::shape_constant(g, ys)})->output(0);
        pass::replace_keeping_output_name(g, (add ? add : n)->output(0), y);
        if (add) g.erase_node(add);
        g.erase_node(n);
        if (t->output(0)->users().empty() && !pass::is_graph_output(g, t->output(0))) g.erase_node(t);
        changed = true;
    }
    if (changed) g.topo_sort();
}

/// The labels input's type for `loss` over model output `out`, or nullopt ("output" loss).
std::optional<ir::TensorType> labels_type(const ir::Value* out, const LossSpec& loss) {
    const ir::TensorType& t = out->type();
    if (loss.kind == "output") return std::nullopt;
    if (loss.kind == "mse") return t;
    Shape s = t.static_shape();
    s.erase(s.begin() + 1);
    return ir::TensorType::of_static(DType::kInt64, s);
}

TrainingGraph build_apply_graph(const ir::Graph& model, const ModelState& state, const OptimizerSpec& optimizer) {
    TrainingGraph t;
    std::vector<ir::Value*> params, grads;
    for (const std::string& p : state.params) params.push_back(t.graph.add_input(p, model.find_value(p)->type()));
    for (const std::string& p : state.params) grads.push_back(t.graph.add_input(gradient_input_name(p), model.find_value(p)->type()));
    OptimizerGraph og = append_optimizer(t.graph, optimizer, params, grads);
    for (size_t i = 0; i < params.size(); ++i) {
        t.graph.add_output(og.new_params[i]);
        t.outputs.push_back("param:" + state.params[i]);
    }
    for (size_t i = 0; i < params.size(); ++i)
        for (size_t k = 0; k < og.state[i].size(); ++k) {
            t.graph.add_output(og.new_state[i][k]);
            t.outputs.push_back("state:" + og.state[i][k]->name());
        }
    return t;
}

}  // namespace

std::string gradient_input_name(const std::string& param) { return "grad/" + param; }

std::pair<std::string, std::string> split_role_key(const std::string& key) {
    const size_t colon = key.find(':');
    return {key.substr(0, colon), colon == std::string::npos ? std::string() : key.substr(colon + 1)};
}

ir::Value* append_loss(ir::Graph& g, ir::Value* out, const LossSpec& loss) {
    auto add = [&](const std::string& op, const std::vector<ir::Value*>& in, ir::AttrMap attrs = {}) {
        ir::Node* n = pass::add_inferred_node(g, op, in, std::move(attrs), 1, "loss/" + op);
        n->set_name("loss/" + op);
        return n->output(0);
    };
    if (loss.kind == "output") return out;
    ir::Value* labels = g.add_input(loss.labels, *labels_type(out, loss));
    if (loss.kind == "cross_entropy") return add("SoftmaxCrossEntropyLoss", {out, labels}, {{"reduction", ir::Attr(std::string("mean"))}});
    if (loss.kind == "nll") return add("NegativeLogLikelihoodLoss", {out, labels}, {{"reduction", ir::Attr(std::string("mean"))}});
    ir::Value* d = add("Sub", {out, labels});
    return add("ReduceMean", {add("Mul", {d, d})}, {{"keepdims", ir::Attr(int64_t{0})}});
}


std::vector<std::pair<std::string, ir::Value*>> convert_for_training(ir::Graph& g, const ModelState& state, uint64_t seed) {
    for (const std::string& name : state.params) constant_to_input(g, name);
    for (const std::string& name : state.stats) constant_to_input(g, name);
    std::vector<std::pair<std::string, ir::Value*>> stat_updates =
        batch_norm_to_training(g, std::set<std::string>(state.stats.begin(), state.stats.end()));
    dropout_to_training(g, seed);
    max_pool_with_indices(g);
    transposed_weights_to_gemm(g);
    // KILN_TRAIN_GELU=0 keeps the written-out form (for A/Bs).
    const char* gelu = std::getenv("KILN_TRAIN_GELU");
    if (!(gelu && std::string(gelu) == "0")) pass::gelu_from_erf(g);
    return stat_updates;
}


ModelState find_model_state(const ir::Graph& g, const std::vector<std::string>& initializers,
                            const std::vector<std::string>& requested) {
    std::set<std::string> stats, value_read, differentiable_read;
    for (ir::Node* n : g.nodes())
        for (size_t i = 0; i < n->num_inputs(); ++i) {
            ir::Value* v = n->input(i);
            if (!v || !v->is_constant()) continue;
            if (is_stat_slot(*n, i)) stats.insert(v->name());
            else if (is_value_slot(*n, i)) value_read.insert(v->name());
            else differentiable_read.insert(v->name());
        }
    // A parameter read only inside an If/Loop/Scan region (by name) is read too.
    for (ir::Node* n : g.nodes())
        if (has_region(*n))
            for (const ir::Value* v : captured_values(g, *n))
                if (v->is_constant()) differentiable_read.insert(v->name());
    ModelState s;
    const std::set<std::string> known(initializers.begin(), initializers.end());
    auto is_float_init = [&](const std::string& name) {
        ir::Value* v = g.find_value(name);
        return known.count(name) && v && v->is_constant() && dtype_is_float(v->type().dtype);
    };
    for (const std::string& name : initializers)
        if (stats.count(name) && is_float_init(name)) s.stats.push_back(name);
    if (!requested.empty()) {
        std::set<std::string> seen;
        for (const std::string& name : requested) {
            KILN_CHECK(is_float_init(name), kInvalidArgument)
                << "trainable '" << name << "' is not a floating-point initializer of the model";
            KILN_CHECK(!stats.count(name), kInvalidArgument)
                << "trainable '" << name << "' is a BatchNormalization running statistic, not a parameter";
            KILN_CHECK(!value_read.count(name), kInvalidArgument)
                << "trainable '" << name << "' is read as a shape or attribute-like value input; it cannot train";
            KILN_CHECK(seen.insert(name).second, kInvalidArgument) << "trainable '" << name << "' is listed twice";
        }
        for (const std::string& name : initializers)  // model order
            if (seen.count(name)) s.params.push_back(name);
        return s;
    }
    for (const std::string& name : initializers)
        if (is_float_init(name) && differentiable_read.count(name) && !stats.count(name) && !value_read.count(name))
            s.params.push_back(name);
    KILN_CHECK(!s.params.empty(), kInvalidArgument) << "the model has no floating-point initializers to train";
    return s;
}

void check_loss(const ir::Graph& g, const LossSpec& loss) {
    KILN_CHECK(loss.kind == "cross_entropy" || loss.kind == "nll" || loss.kind == "mse" || loss.kind == "output",
               kInvalidArgument)
        << "loss must be cross_entropy, nll, mse or output, got '" << loss.kind << "'";
    const ir::Value* out = model_output(g, loss);
    const ir::TensorType& t = out->type();
    KILN_CHECK(t.kind == ir::TypeKind::kTensor && dtype_is_float(t.dtype), kInvalidArgument)
        << "loss " << loss.kind << ": output '" << out->name() << "' must be a floating-point tensor, got "
        << t.str();
    KILN_CHECK(t.is_static(), kInvalidArgument)
        << "loss " << loss.kind << ": output '" << out->name() << "' has no static shape (" << t.str()
        << "); bind the model's symbolic dimensions (dims)";
    if (loss.kind == "output") {
        KILN_CHECK(shape_numel(t.static_shape()) == 1, kInvalidArgument)
            << "loss output: output '" << out->name() << "' must be a scalar (the loss), got " << t.str();
        return;
    }
    if (loss.kind == "cross_entropy" || loss.kind == "nll") {
        KILN_CHECK(t.rank() >= 2, kInvalidArgument)
            << "loss " << loss.kind << ": output '" << out->name() << "' must have shape [N, C, ...] (class scores), got "
            << t.str();
    }
    KILN_CHECK(!loss.labels.empty(), kInvalidArgument) << "loss " << loss.kind << " needs a labels input name";
    KILN_CHECK(!g.find_value(loss.labels), kInvalidArgument)
        << "labels input '" << loss.labels << "' is already a value of the model; choose another name";
}

TrainingGraph build_training_graph(ir::Graph model, const ModelState& state, const LossSpec& loss,
                                   const OptimizerSpec& optimizer, TrainingGraphKind kind, uint64_t seed,
                                   BatchNormStatistics bn_stats) {
    check_loss(model, loss);
    check_optimizer_options(optimizer);
    if (kind == TrainingGraphKind::kApply) return build_apply_graph(model, state, optimizer);

    TrainingGraph t;
    ir::Graph& g = t.graph;
    g = std::move(model);
    const ir::Value* chosen = model_output(g, loss);
    const size_t out_index = static_cast<size_t>(
        std::find(g.outputs().begin(), g.outputs().end(), chosen) - g.outputs().begin());
    const bool training = kind != TrainingGraphKind::kEval;
    std::vector<std::pair<std::string, ir::Value*>> stat_updates;
    if (training) {
        stat_updates = convert_for_training(g, state, seed);
        if (bn_stats == BatchNormStatistics::kGlobal) t.synchronized_batch_norms = synchronize_batch_norm(g, stat_updates);
    } else {
        for (const std::string& name : state.params) constant_to_input(g, name);
        for (const std::string& name : state.stats) constant_to_input(g, name);
    }
    // The conversions replaced nodes: read the outputs now.
    const std::vector<ir::Value*> model_outputs = g.outputs();
    ir::Value* loss_value = append_loss(g, model_outputs[out_index], loss);

    std::vector<ir::Value*> outs{loss_value};
    t.outputs.push_back("loss");
    for (size_t i = 0; i < model_outputs.size(); ++i) {
        outs.push_back(model_outputs[i]);
        t.outputs.push_back("output:" + std::to_string(i));
    }
    if (training) {
        std::vector<ir::Value*> params;
        for (const std::string& name : state.params) params.push_back(g.find_value(name));
        std::vector<std::string> out_names;
        for (const ir::Value* v : outs) out_names.push_back(v->name());
        Gradients grads = differentiate(g, loss_value, params);
        // differentiate() replaces a Loop/Scan on the path by a copy (same output names).
        for (size_t i = 0; i < outs.size(); ++i) outs[i] = g.find_value(out_names[i]);
        if (kind == TrainingGraphKind::kGradients) {
            for (size_t i = 0; i < params.size(); ++i) {
                outs.push_back(grads.grads[i]);
                t.outputs.push_back("grad:" + state.params[i]);
            }
        } else {
            OptimizerGraph og = append_optimizer(g, optimizer, params, grads.grads);
            for (size_t i = 0; i < params.size(); ++i) {
                outs.push_back(og.new_params[i]);
                t.outputs.push_back("param:" + state.params[i]);
            }
            for (size_t i = 0; i < params.size(); ++i)
                for (size_t k = 0; k < og.state[i].size(); ++k) {
                    outs.push_back(og.new_state[i][k]);
                    t.outputs.push_back("state:" + og.state[i][k]->name());
                }
        }
        for (const auto& [name, v] : stat_updates) {
            outs.push_back(v);
            t.outputs.push_back("stat:" + name);
        }
    }
    g.set_outputs(outs);
    return t;
}

}  // namespace kiln::autodiff
