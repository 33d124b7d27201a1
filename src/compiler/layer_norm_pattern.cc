// fuse_decomposed_layer_norms (layer_norm_pattern.h).
#include "compiler/layer_norm_pattern.h"

#include <optional>

#include "pass/rewrite.h"
#include "support/error.h"

namespace kiln::compiler {
namespace {

/// The node producing `v` when it is `op` and `v` has exactly `users` users.
ir::Node* producer_of(const ir::Value* v, const char* op, size_t users = 1) {
    if (!v || !v->producer() || v->producer()->op() != op || v->users().size() != users) return nullptr;
    return v->producer();
}

/// A constant scalar (or one-element) float; nullopt otherwise.
std::optional<double> scalar(const ir::Value* v) {
    if (!v || !v->is_constant() || v->constant().numel() != 1 || !dtype_is_float(v->constant().dtype())) return std::nullopt;
    return v->constant().get_f64(0);
}

/// ReduceMean over the last axis only, keeping it.
bool last_axis_mean(const ir::Node* n) {
    if (!n || n->attr_int("keepdims", 1) != 1) return false;
    const int rank = n->input(0)->type().rank();
    std::vector<int64_t> axes = n->attr_ints("axes");
    if (n->num_inputs() > 1 && n->input(1)) {
        if (!n->input(1)->is_constant()) return false;
        const Tensor& t = n->input(1)->constant();
        axes.clear();
        for (int64_t i = 0; i < t.numel(); ++i) axes.push_back(t.get_i64(i));
    }
    return axes.size() == 1 && (axes[0] == -1 || axes[0] == rank - 1);
}

/// A constant of shape [c] (c = x's static last dim), for gamma and beta.
bool per_channel(const ir::Value* v, const ir::Value* x) {
    const auto& xs = x->type().shape;
    return v && v->is_constant() && v->type().dtype == DType::kFloat32 && v->type().rank() == 1 && !xs.empty() &&
           xs.back().is_static() && v->type().shape[0] == xs.back();
}

/// From the output Add: the pattern's nodes, outermost first, and x, gamma, beta, eps.
struct Match {
    std::vector<ir::Node*> nodes;
    ir::Value *x = nullptr, *gamma = nullptr, *beta = nullptr;
    double eps = 0;
};

std::optional<Match> match(ir::Node* add) {
    Match m;
    if (add->op() != "Add" || add->num_inputs() != 2) return std::nullopt;
    for (int side = 0; side < 2; ++side) {
        ir::Node* mul = producer_of(add->input(static_cast<size_t>(side)), "Mul");
        ir::Node* div = nullptr;
        if (!mul) continue;
        for (int ms = 0; ms < 2 && !div; ++ms)
            if ((div = producer_of(mul->input(static_cast<size_t>(ms)), "Div"))) m.gamma = mul->input(static_cast<size_t>(1 - ms));
        ir::Node* sqrt = div ? producer_of(div->input(1), "Sqrt") : nullptr;
        ir::Node* sub = div ? producer_of(div->input(0), "Sub", 2) : nullptr;
        ir::Node* eps_add = sqrt ? producer_of(sqrt->input(0), "Add") : nullptr;
        ir::Node* var = nullptr;
        for (int es = 0; eps_add && es < 2 && !var; ++es)
            if ((var = producer_of(eps_add->input(static_cast<size_t>(es)), "ReduceMean")))
                m.eps = scalar(eps_add->input(static_cast<size_t>(1 - es))).value_or(-1);
        ir::Node* pow = var ? producer_of(var->input(0), "Pow") : nullptr;
        ir::Node* mean = sub ? producer_of(sub->input(1), "ReduceMean") : nullptr;
        if (!pow || !mean || pow->input(0) != sub->output(0) || scalar(pow->input(1)) != 2.0 || m.eps < 0 ||
            !last_axis_mean(var) || !last_axis_mean(mean) || mean->input(0) != sub->input(0))
            continue;
        m.x = sub->input(0);
        m.beta = add->input(static_cast<size_t>(1 - side));
        if (m.x->type().dtype != DType::kFloat32 || !per_channel(m.gamma, m.x) || !per_channel(m.beta, m.x)) continue;
        m.nodes = {add, mul, div, sqrt, eps_add, var, pow, sub, mean};
        return m;
    }
    return std::nullopt;
}

}  // namespace

int fuse_decomposed_layer_norms(ir::Graph& g) {
    int fused = 0;
    for (ir::Node* n : g.nodes()) {
        if (n->op() != "Add") continue;  // nodes erased below are never an Add visited later
        auto m = match(n);
        bool hidden = m.has_value();  // no intermediate may be a graph output (users() omits those)
        for (size_t k = 1; hidden && k < m->nodes.size(); ++k)
            for (const ir::Value* out : g.outputs()) hidden &= out != m->nodes[k]->output(0);
        if (!hidden) continue;
        ir::Node* ln = g.add_node("LayerNormalization", {m->x, m->gamma, m->beta},
                                  {{"axis", ir::Attr(int64_t{-1})}, {"epsilon", ir::Attr(m->eps)}},
                                  {n->output(0)->type()}, {}, n->name() + "/fused");
        pass::replace_keeping_output_name(g, n->output(0), ln->output(0));
        for (ir::Node* dead : m->nodes) g.erase_node(dead);
        ++fused;
    }
    if (fused) g.topo_sort();
    return fused;
}

}  // namespace kiln::compiler
