// Synchronized BatchNormalization (see sync_batch_norm.h).
#include "autodiff/sync_batch_norm.h"

#include "pass/rewrite.h"
#include "support/error.h"

namespace kiln::autodiff {
namespace {

/// Appends the nodes of one BatchNormalization's rewrite, each named "<bn>/sync/<what>".
class SyncBatchNormWriter {
public:
    SyncBatchNormWriter(ir::Graph& g, const ir::Node& bn) : g_(g), prefix_(bn.name() + "/sync/") {}

    ir::Value* op(const std::string& what, const std::string& op, const std::vector<ir::Value*>& in,
                  ir::AttrMap attrs = {}) {
        ir::Node* n = pass::add_inferred_node(g_, op, in, std::move(attrs), 1, prefix_ + what);
        n->set_name(prefix_ + what);
        return n->output(0);
    }
    ir::Value* all_reduce_sum(const std::string& what, ir::Value* v) {
        return op(what, "AllReduce", {v}, {{"reduce", ir::Attr(std::string("sum"))}});
    }
    ir::Value* scalar(const std::string& what, double v, DType dtype, const Shape& shape) {
        Tensor t(dtype, shape);
        for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, v);
        return pass::add_constant_like(g_, prefix_ + what, t);
    }
    ir::Value* reshape(const std::string& what, ir::Value* v, const Shape& s) {
        return op(what, "Reshape", {v, pass::shape_constant(g_, s)});
    }
    ir::Value* ints(const std::string& what, const std::vector<int64_t>& v) {
        Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
        for (size_t i = 0; i < v.size(); ++i) t.set_i64(static_cast<int64_t>(i), v[i]);
        return pass::add_constant_like(g_, prefix_ + what, t);
    }

private:
    ir::Graph& g_;
    std::string prefix_;
};

void check_batch_norm(const ir::Node& bn) {
    const ir::TensorType& x = bn.input(0)->type();
    KILN_CHECK(x.rank() >= 2 && x.is_static(), kInvalidModel)
        << "BatchNormalization node '" << bn.name() << "': synchronized statistics need an input of static shape "
        << "[N, C, ...], got " << x.str();
    KILN_CHECK(x.dtype == DType::kFloat32 || x.dtype == DType::kFloat64, kInvalidModel)
        << "BatchNormalization node '" << bn.name() << "': synchronized statistics take float32 or float64, got "
        << dtype_name(x.dtype);
    const char* names[] = {"X", "scale", "B", "input_mean", "input_var"};
    for (size_t i = 1; i < 5; ++i)
        KILN_CHECK(bn.input(i) && bn.input(i)->type().dtype == x.dtype, kInvalidModel)
            << "BatchNormalization node '" << bn.name() << "': synchronized statistics need input " << names[i]
            << " of X's dtype " << dtype_name(x.dtype) << ", got "
            << (bn.input(i) ? dtype_name(bn.input(i)->type().dtype) : "none");
}

/// The rewrite of one training-mode BatchNormalization: its (Y, running_mean, running_var).
std::vector<ir::Value*> rewrite(ir::Graph& g, const ir::Node& bn) {
    check_batch_norm(bn);
    SyncBatchNormWriter w(g, bn);
    ir::Value* x = bn.input(0);
    const Shape xs = x->type().static_shape();
    const DType dt = x->type().dtype;
    const int64_t channels = xs[1];
    Shape keep(xs.size(), 1);  // [1, C, 1, ...]: the per-channel values broadcast over x
    keep[1] = channels;
    std::vector<int64_t> axes{0};
    for (int64_t a = 2; a < static_cast<int64_t>(xs.size()); ++a) axes.push_back(a);
    const double local_count = static_cast<double>(shape_numel(xs) / std::max<int64_t>(channels, 1));

    const ir::AttrMap keepdims{{"keepdims", ir::Attr(int64_t{1})}};
    ir::Value* axes_v = w.ints("axes", axes);
    ir::Value* n = w.all_reduce_sum("count", w.scalar("local_count", local_count, dt, {1}));
    ir::Value* sum = w.all_reduce_sum("sum", w.op("local_sum", "ReduceSum", {x, axes_v}, keepdims));
    ir::Value* mean = w.op("mean", "Div", {sum, n});
    ir::Value* d = w.op("centered", "Sub", {x, mean});
    ir::Value* sq = w.op("local_sq_sum", "ReduceSum", {w.op("sq", "Mul", {d, d}), axes_v}, keepdims);
    ir::Value* var = w.op("var", "Div", {w.all_reduce_sum("sq_sum", sq), n});
    const double eps = bn.attr_float("epsilon", 1e-5);
    ir::Value* stddev = w.op("stddev", "Sqrt", {w.op("var_eps", "Add", {var, w.scalar("epsilon", eps, dt, {})})});
    ir::Value* xhat = w.op("xhat", "Div", {d, stddev});
    ir::Value* scaled = w.op("scaled", "Mul", {xhat, w.reshape("scale", bn.input(1), keep)});
    ir::Value* y = w.op("y", "Add", {scaled, w.reshape("bias", bn.input(2), keep)});

    const double momentum = bn.attr_float("momentum", 0.9);
    ir::Value* keep_m = w.scalar("momentum", momentum, dt, {});
    ir::Value* take_m = w.scalar("one_minus_momentum", 1.0 - momentum, dt, {});
    auto running = [&](const std::string& what, ir::Value* input, ir::Value* batch) {
        ir::Value* old_part = w.op(what + "_kept", "Mul", {input, keep_m});
        ir::Value* new_part = w.op(what + "_taken", "Mul", {w.reshape(what + "_batch", batch, {channels}), take_m});
        return w.op(what, "Add", {old_part, new_part});
    };
    return {y, running("running_mean", bn.input(3), mean), running("running_var", bn.input(4), var)};
}

}  // namespace

std::vector<std::string> synchronize_batch_norm(ir::Graph& g,
                                                std::vector<std::pair<std::string, ir::Value*>>& stat_updates) {
    std::vector<std::string> rewritten;
    std::vector<ir::Node*> nodes;
    for (ir::Node* n : g.nodes())
        if (n->op() == "BatchNormalization" && n->attr_int("training_mode", 0) != 0) nodes.push_back(n);
    for (size_t k = 0; k < nodes.size(); ++k) {
        ir::Node* bn = nodes[k];
        // Collectives are matched across ranks by name: every rewrite needs its own.
        if (bn->name().empty()) bn->set_name("batch_norm_" + std::to_string(k));
        const std::vector<ir::Value*> out = rewrite(g, *bn);
        for (size_t i = 0; i < bn->num_outputs() && i < out.size(); ++i) {
            ir::Value* old = bn->output(i);
            for (auto& [name, v] : stat_updates)
                if (v == old) v = out[i];
            pass::replace_keeping_output_name(g, old, out[i]);
        }
        rewritten.push_back(bn->name());
        g.erase_node(bn);
    }
    if (!rewritten.empty()) g.topo_sort();
    return rewritten;
}

}  // namespace kiln::autodiff
