// RMSNormalization (opset 23): normalization by the root mean square over axes [axis, rank).
//
//   sq  = sum of x^2 over axes [axis, rank)                        (reduce stage "rms_sqsum")
//   inv = 1 / sqrt(sq / N + epsilon)                               (per row, stage "rms_inv")
//   Y   = x * inv * Scale                                          (Scale broadcast to x)
// The statistics compute in the input's compute type (f32 for f16/bf16, f64 for f64); stash_type
// 1 (float32) is the only stash type supported, as in the ONNX reference implementation.
// Pattern: kOpaque, like LayerNormalization (norm.cc): a reduction plus an elementwise epilogue
// form one kernel.

#include <string>

#include "op/broadcast.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

OpDef rms_norm_op() {
    OpDef d;
    d.name = "RMSNormalization";
    d.onnx_versions = {23};
    d.min_inputs = d.max_inputs = 2;
    d.attrs = {{"axis", AttrKind::kInt, ir::Attr(int64_t{-1})},
               {"epsilon", AttrKind::kFloat, ir::Attr(1e-5)},
               {"stash_type", AttrKind::kInt, ir::Attr(int64_t{1})}};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        const auto& s = input_type(n, 1, "scale");
        check_dtype(n, "X", x.dtype, float_types());
        check_same_dtype(n, "X", x.dtype, "scale", s.dtype);
        KILN_CHECK(x.rank() >= 1, kInvalidModel) << node_label(n) << ": input X must have rank >= 1, got rank 0";
        normalize_axis(n, n.attr_int("axis", -1), x.rank());
        const int64_t stash = n.attr_int("stash_type", 1);
        KILN_CHECK(stash == 1, kUnsupported)
            << node_label(n) << ": stash_type=" << stash << " is not supported (only 1, float32)";
        // Scale broadcasts (numpy, right-aligned) to X; the result keeps X's shape.
        bool ok = s.rank() <= x.rank();
        for (int k = 0; ok && k < s.rank(); ++k) {
            const ir::Dim& sd = s.shape[s.rank() - 1 - k];
            const ir::Dim& xd = x.shape[x.rank() - 1 - k];
            ok = !sd.is_static() || !xd.is_static() || sd.value == 1 || sd == xd;
        }
        KILN_CHECK(ok, kInvalidModel)
            << node_label(n) << ": input scale of shape " << dims_str(s.shape) << " does not broadcast to X of shape "
            << dims_str(x.shape);
        return std::vector<ir::TensorType>{x};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0);
        te::Tensor scale = a.in(1);
        const int rank = x->ndim();
        const int axis = normalize_axis(a.node, a.node.attr_int("axis", -1), rank);
        const DType cdt = te::compute_dtype(x->dtype);
        const double eps = a.node.attr_float("epsilon", 1e-5);
        int64_t count = 1;
        Shape stat = x->shape;
        std::vector<te::IterVar> r;
        for (int k = axis; k < rank; ++k) {
            count *= x->shape[k];
            stat[k] = 1;
            r.push_back(te::reduce_axis(x->shape[k], "r" + std::to_string(k)));
        }
        te::Tensor sq = te::compute(
            stat, [&](const std::vector<Var>& i) {
                std::vector<Expr> idx(i.begin(), i.end());
                for (int k = axis; k < rank; ++k) idx[k] = r[k - axis]->var;
                Expr v = te::cast(cdt, te::read(x, idx));
                return te::sum(v * v, r);
            },
            "rms_sqsum", cdt);
        const Expr inv_n = te::make_const(cdt, 1.0 / static_cast<double>(count));
        te::Tensor inv = te::compute(
            stat, [&](const std::vector<Var>& i) {
                return te::make_const(cdt, 1.0) /
                       te::unary(te::UnaryOp::kSqrt, te::read(sq, i) * inv_n + te::make_const(cdt, eps));
            },
            "rms_inv", cdt);
        te::Tensor y = te::compute(
            x->shape, [&](const std::vector<Var>& i) {
                std::vector<Expr> s(i.begin(), i.end());
                for (int k = axis; k < rank; ++k) s[k] = te::int_imm(0);
                return te::cast(cdt, te::read(x, i)) * te::read(inv, s) * te::cast(cdt, broadcast_read(scale, i));
            },
            "RMSNormalization", a.out_dtype());
        return std::vector<te::Tensor>{y};
    };
    return d;
}

}  // namespace

void register_rms_norm_ops(OpRegistry& r) {
    r.add(rms_norm_op());
}

}  // namespace kiln::op
