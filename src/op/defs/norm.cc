// Normalizations over trailing / chosen axes: LayerNormalization (opset 17). (ReduceMean is a
// row of the Reduce* table in reduce.cc.)
//
// LayerNormalization follows the ONNX function body (two-pass, as the spec writes it):
//   sum  = sum of x over axes [axis, rank)                      (reduce stage "ln_sum")
//   mean = sum / N
//   sq   = sum of (x - mean)^2 over the same axes               (reduce stage "ln_sqsum")
//   inv  = 1 / sqrt(sq / N + epsilon)                           (per row, stage "ln_inv")
//   Y    = (x - mean) * inv * Scale + B                          (Scale, B broadcast to x[axis:])
// Optional outputs Mean and InvStdDev have shape x.shape[:axis] + [1] * (rank - axis) and the
// stash dtype (f32 for stash_type=1, the only stash type supported). The statistics compute in
// the input's compute type (f32 for f16/bf16, f64 for f64).
// Pattern: kOpaque. TVM has no fused layer_norm kernel in Relay (SimplifyInference decomposes
// it into reductions and elementwise ops); as one node here it is two chained reductions plus
// an elementwise epilogue, like Softmax, which this registry also marks opaque so the fusion
// pass keeps it a kernel of its own.

#include <string>

#include "op/broadcast.h"
#include "op/defs/row_reduce.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

// ---- LayerNormalization ----

OpDef layer_norm_op() {
    OpDef d;
    d.name = "LayerNormalization";
    d.onnx_versions = {17};
    d.min_inputs = 2;
    d.max_inputs = 3;
    d.min_outputs = 1;
    d.max_outputs = 3;
    d.attrs = {{"axis", AttrKind::kInt, ir::Attr(int64_t{-1})},
               {"epsilon", AttrKind::kFloat, ir::Attr(1e-5)},
               {"stash_type", AttrKind::kInt, ir::Attr(int64_t{1})}};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        check_dtype(n, "X", x.dtype, float_types());
        KILN_CHECK(x.rank() >= 1, kInvalidModel) << node_label(n) << ": input X must have rank >= 1, got rank 0";
        const int axis = normalize_axis(n, n.attr_int("axis", -1), x.rank());
        const int64_t stash = n.attr_int("stash_type", 1);
        KILN_CHECK(stash == 1, kUnsupported)
            << node_label(n) << ": stash_type=" << stash << " is not supported (only 1, float32)";
        const std::vector<ir::Dim> norm_dims(x.shape.begin() + axis, x.shape.end());
        const char* names[] = {"X", "Scale", "B"};
        for (size_t i = 1; i < 3; ++i) {
            if (!has_input(n, i)) continue;
            const auto& t = n.input(i)->type();
            check_same_dtype(n, "X", x.dtype, names[i], t.dtype);
            // Unidirectional broadcast of Scale / B to the normalized shape x.shape[axis:].
            bool ok = t.rank() <= static_cast<int>(norm_dims.size());
            for (int k = 0; ok && k < t.rank(); ++k) {
                const ir::Dim& s = t.shape[t.rank() - 1 - k];
                const ir::Dim& want = norm_dims[norm_dims.size() - 1 - k];
                ok = (s.is_static() && s.value == 1) || !s.is_static() || !want.is_static() || s == want;
            }
            KILN_CHECK(ok, kInvalidModel)
                << node_label(n) << ": input " << names[i] << " of shape " << dims_str(t.shape)
                << " does not broadcast to the normalized shape " << dims_str(norm_dims) << " (axis " << axis << ")";
        }
        std::vector<ir::TensorType> out{x};
        std::vector<ir::Dim> stat(x.shape.begin(), x.shape.begin() + axis);
        stat.resize(x.shape.size(), ir::Dim(1));
        for (size_t i = 1; i < n.num_outputs(); ++i) out.push_back({DType::kFloat32, stat});
        return out;
    };
    d.schedule = row_reduce_schedule;
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        te::Tensor scale = a.in(1);
        te::Tensor bias = a.has_input(2) ? a.in(2) : nullptr;
        const int rank = x->ndim();
        const int axis = normalize_axis(a.node, a.node.attr_int("axis", -1), rank);
        const DType cdt = te::compute_dtype(x->dtype);
        const double eps = a.node.attr_float("epsilon", 1e-5);
        int64_t count = 1;
        Shape stat = x->shape;
        for (int k = axis; k < rank; ++k) {
            count *= x->shape[k];
            stat[k] = 1;
        }
        const Expr inv_n = te::make_const(cdt, 1.0 / static_cast<double>(count));
        auto stat_idx = [&](const std::vector<Var>& i) {
            std::vector<Expr> idx(i.begin(), i.end());
            for (int k = axis; k < rank; ++k) idx[k] = te::int_imm(0);
            return idx;
        };
        // Reads x at the row of stat index i with the normalized axes at the reduce vars.
        auto row_read = [&](const std::vector<Var>& i, const std::vector<te::IterVar>& r) {
            std::vector<Expr> idx(i.begin(), i.end());
            for (int k = axis; k < rank; ++k) idx[k] = r[k - axis]->var;
            return te::cast(cdt, te::read(x, idx));
        };
        auto reduce_vars = [&] {
            std::vector<te::IterVar> r;
            for (int k = axis; k < rank; ++k) r.push_back(te::reduce_axis(x->shape[k], "r" + std::to_string(k)));
            return r;
        };
        // Normalizing the last axis only, the row sums reduce in vector lanes (row_reduce.h).
        const int64_t lanes = axis == rank - 1 ? row_lanes(cdt, x->shape[axis]) : 0;
        auto at = [&](const std::vector<Var>& i, Expr k) {
            std::vector<Expr> idx(i.begin(), i.end());
            idx[rank - 1] = std::move(k);
            return te::cast(cdt, te::read(x, idx));
        };
        auto stat_of = [&](const std::vector<Var>& i) {
            std::vector<Expr> idx(i.begin(), i.end());
            idx[rank - 1] = te::int_imm(0);
            return idx;
        };
        te::Tensor sum, sqsum;
        if (lanes > 0) {
            sum = lane_reduce(x->shape, lanes, te::ReduceOp::kSum, cdt, at, "ln_sum");
            sqsum = lane_reduce(
                x->shape, lanes, te::ReduceOp::kSum, cdt,
                [&](const std::vector<Var>& i, Expr k) {
                    Expr dev = at(i, std::move(k)) - te::read(sum, stat_of(i)) * inv_n;
                    return dev * dev;
                },
                "ln_sqsum");
        } else {
            const std::vector<te::IterVar> r1 = reduce_vars();
            sum = te::compute(
                stat, [&](const std::vector<Var>& i) { return te::sum(row_read(i, r1), r1); }, "ln_sum", cdt);
            const std::vector<te::IterVar> r2 = reduce_vars();
            sqsum = te::compute(
                stat, [&](const std::vector<Var>& i) {
                    Expr dev = row_read(i, r2) - te::read(sum, i) * inv_n;
                    return te::sum(dev * dev, r2);
                },
                "ln_sqsum", cdt);
        }
        auto inv_std = [&](const std::vector<Expr>& idx) {
            return te::make_const(cdt, 1.0) /
                   te::unary(te::UnaryOp::kSqrt, te::read(sqsum, idx) * inv_n + te::make_const(cdt, eps));
        };
        te::Tensor inv = te::compute(
            stat, [&](const std::vector<Var>& i) { return inv_std(std::vector<Expr>(i.begin(), i.end())); }, "ln_inv",
            cdt);
        // Scale / B read with the output index right-aligned (they broadcast to x[axis:]).
        te::Tensor y = te::compute(
            x->shape, [&](const std::vector<Var>& i) {
                const std::vector<Expr> s = stat_idx(i);
                Expr v = (te::cast(cdt, te::read(x, i)) - te::read(sum, s) * inv_n) * te::read(inv, s) *
                         te::cast(cdt, broadcast_read(scale, i));
                if (bias) v = v + te::cast(cdt, broadcast_read(bias, i));
                return v;
            },
            "LayerNormalization", a.out_dtype());
        std::vector<te::Tensor> outs{y};
        if (a.output_types.size() > 1) {
            outs.push_back(te::compute(
                stat, [&](const std::vector<Var>& i) { return te::read(sum, i) * inv_n; }, "ln_mean", a.out_dtype(1)));
        }
        if (a.output_types.size() > 2) {
            outs.push_back(te::compute(
                stat, [&](const std::vector<Var>& i) { return inv_std(std::vector<Expr>(i.begin(), i.end())); },
                "ln_inv_std_dev", a.out_dtype(2)));
        }
        return outs;
    };
    return d;
}

}  // namespace

void register_norm_ops(OpRegistry& r) {
    r.add(layer_norm_op());
}

}  // namespace kiln::op
