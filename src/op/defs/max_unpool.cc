// MaxUnpool (opset 9/11/22): scatters X [N, C, D1..Dk] into zeros at the flat positions given
// by `indices` (as MaxPool's Indices output: flat row-major over the whole N*C*spatial tensor of
// the inferred shape Di' = (Di - 1) * stride - pad_begin - pad_end + kernel). With the optional
// `output_shape` input (a compile-time constant) the inferred-shape result is placed in the
// leading corner of a zero tensor of that shape (onnx.reference's behaviour).
//
// TE form (a gather, since TE has no scatter): for each output element inside the inferred box,
//   last = max over input positions p of the same (n, c) plane of (indices[n,c,p] == flat ? p : -1)
//   y = last >= 0 ? X[n, c, p = last] : 0
// so of several inputs writing the same position the last (largest p) wins, as in ONNX Runtime.
// Cost: O(out_plane * in_plane) per (n, c) plane, i.e. QUADRATIC per plane — fine for the small
// planes unpooling sees in tests, slow for large images. Limitation: an index pointing into a
// different (n, c) plane than its own input element (never produced by MaxPool) is dropped.
#include <string>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

/// The inferred output spatial shape from the attributes.
std::vector<int64_t> inferred_spatial(const ir::Node& n, const ir::TensorType& x) {
    const int k = x.rank() - 2;
    const std::vector<int64_t> kernel = n.attr_ints("kernel_shape");
    KILN_CHECK(static_cast<int>(kernel.size()) == k, kInvalidModel)
        << node_label(n) << ": kernel_shape has " << kernel.size() << " entries, expected " << k;
    const std::vector<int64_t> strides = n.attr_ints("strides", std::vector<int64_t>(k, 1));
    const std::vector<int64_t> pads = n.attr_ints("pads", std::vector<int64_t>(2 * k, 0));
    KILN_CHECK(static_cast<int>(strides.size()) == k && static_cast<int>(pads.size()) == 2 * k,
               kInvalidModel)
        << node_label(n) << ": expected " << k << " strides and " << 2 * k << " pads, got "
        << strides.size() << " and " << pads.size();
    std::vector<int64_t> out(k);
    for (int i = 0; i < k; ++i) {
        const int64_t d = static_dim(n, x.shape[2 + i], "X");
        out[i] = (d - 1) * strides[i] - pads[i] - pads[k + i] + kernel[i];
        KILN_CHECK(out[i] > 0, kInvalidModel)
            << node_label(n) << ": inferred output dim " << i << " is " << out[i];
    }
    return out;
}

OpDef max_unpool_op() {
    OpDef d;
    d.name = "MaxUnpool";
    d.onnx_versions = {9, 11, 22};
    d.min_inputs = 2;
    d.max_inputs = 3;
    d.value_inputs = {2};
    d.attrs = {{"kernel_shape", AttrKind::kInts, std::nullopt, /*required=*/true},
               {"pads", AttrKind::kInts, std::nullopt},
               {"strides", AttrKind::kInts, std::nullopt}};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        const auto& idx = input_type(n, 1, "I");
        check_dtype(n, "X", x.dtype, float_types());
        check_dtype(n, "I", idx.dtype, {DType::kInt64});
        KILN_CHECK(x.rank() >= 3, kInvalidModel)
            << node_label(n) << ": X must have rank >= 3, got " << x.rank();
        KILN_CHECK(idx.rank() == x.rank(), kInvalidModel)
            << node_label(n) << ": I must have X's shape " << dims_str(x.shape) << ", got "
            << dims_str(idx.shape);
        for (int i = 0; i < x.rank(); ++i)
            KILN_CHECK(static_dim(n, idx.shape[i], "I") == static_dim(n, x.shape[i], "X"), kInvalidModel)
                << node_label(n) << ": I must have X's shape " << dims_str(x.shape) << ", got "
                << dims_str(idx.shape);
        const std::vector<int64_t> inf = inferred_spatial(n, x);
        std::vector<ir::Dim> out = {x.shape[0], x.shape[1]};
        if (has_input(n, 2)) {
            const std::vector<int64_t> os = constant_ints(n, 2, "output_shape");
            KILN_CHECK(static_cast<int>(os.size()) == x.rank(), kInvalidModel)
                << node_label(n) << ": output_shape must have " << x.rank() << " entries, got "
                << os.size();
            KILN_CHECK(os[0] == static_dim(n, x.shape[0], "X") &&
                           os[1] == static_dim(n, x.shape[1], "X"),
                       kInvalidModel)
                << node_label(n) << ": output_shape must keep N and C of X";
            for (size_t i = 0; i < inf.size(); ++i) {
                KILN_CHECK(os[2 + i] >= inf[i], kUnsupported)
                    << node_label(n) << ": output_shape dim " << 2 + i << " is " << os[2 + i]
                    << ", smaller than the inferred " << inf[i];
                out.push_back(ir::Dim(os[2 + i]));
            }
        } else {
            for (int64_t v : inf) out.push_back(ir::Dim(v));
        }
        return std::vector<ir::TensorType>{{x.dtype, out}};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0), ind = a.in(1);
        const int k = x->ndim() - 2;
        const DType cdt = te::compute_dtype(a.out_dtype());
        ir::TensorType xt{x->dtype, to_dims(x->shape)};
        const std::vector<int64_t> inf = inferred_spatial(a.node, xt);
        const Shape out_shape = a.out_shape();
        const int64_t channels = x->shape[1];
        // Stage 1: the last input position (flat within the plane) writing each output element.
        te::Tensor last = te::compute(
            out_shape,
            [&](const std::vector<Var>& o) {
                std::vector<te::IterVar> r;
                for (int i = 0; i < k; ++i) r.push_back(te::reduce_axis(x->shape[2 + i], "r" + std::to_string(i)));
                // Flat index of the output element in the inferred-shape tensor.
                Expr flat = Expr(o[0]) * channels + Expr(o[1]);
                Expr inside;
                for (int i = 0; i < k; ++i) {
                    flat = flat * inf[i] + Expr(o[2 + i]);
                    const Expr in = Expr(o[2 + i]) < te::int_imm(inf[i]);
                    inside = inside ? te::logical_and(inside, in) : in;
                }
                std::vector<Expr> idx = {o[0], o[1]};
                Expr p = te::int_imm(0);
                for (int i = 0; i < k; ++i) {
                    idx.push_back(r[i]->var);
                    p = p * x->shape[2 + i] + Expr(r[i]->var);
                }
                const Expr match = te::logical_and(inside, te::eq(te::read(ind, idx), flat));
                return te::max_reduce(te::select(match, p, te::int_imm(-1)), r);
            },
            "maxunpool_last", DType::kInt64);
        te::Tensor y = te::compute(
            out_shape,
            [&](const std::vector<Var>& o) {
                const Expr l = te::read(last, o);
                std::vector<Expr> idx = {o[0], o[1]};
                Expr rest = te::max(l, te::int_imm(0));
                std::vector<Expr> sp(k);
                for (int i = k - 1; i >= 0; --i) {
                    sp[i] = te::floormod(rest, te::int_imm(x->shape[2 + i]));
                    rest = te::floordiv(rest, te::int_imm(x->shape[2 + i]));
                }
                idx.insert(idx.end(), sp.begin(), sp.end());
                return te::select(l >= te::int_imm(0), te::cast(cdt, te::read(x, idx)), te::make_const(cdt, 0.0));
            },
            "MaxUnpool", a.out_dtype());
        return std::vector<te::Tensor>{y};
    };
    return d;
}

}  // namespace

void register_max_unpool_ops(OpRegistry& r) { r.add(max_unpool_op()); }

}  // namespace kiln::op
