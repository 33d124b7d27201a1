// TensorScatter (24): writes `update` into a KV cache along the sequence axis.
//   past_cache [B, ..., S_max, ...], update [B, ..., S, ...] (S <= S_max along `axis`, default
//   -2; every other dim equal), write_indices [B] (int64, default zeros).
//   present[b, .., s, ..] = update[b, .., p, ..] if 0 <= p < S else past[b, .., s, ..], with
//   p = s - w[b] (mode "linear") or (s - w[b]) mod S_max ("circular"): the gather form of the
//   spec's scatter (each cache slot takes at most one update row).
#include <string>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

OpDef tensor_scatter_op() {
    OpDef d;
    d.name = "TensorScatter";
    d.onnx_versions = {24};
    d.min_inputs = 2;
    d.max_inputs = 3;
    d.attrs = {{"axis", AttrKind::kInt, ir::Attr(int64_t{-2})},
               {"mode", AttrKind::kString, ir::Attr(std::string("linear"))}};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& past = input_type(n, 0, "past_cache");
        const auto& upd = input_type(n, 1, "update");
        check_dtype(n, "past_cache", past.dtype, all_types());
        check_same_dtype(n, "past_cache", past.dtype, "update", upd.dtype);
        const std::string mode = n.attr_string("mode", "linear");
        KILN_CHECK(mode == "linear" || mode == "circular", kInvalidModel)
            << node_label(n) << ": mode must be 'linear' or 'circular', got '" << mode << "'";
        check_rank(n, "update", upd.rank(), past.rank());
        const int axis = normalize_axis(n, n.attr_int("axis", -2), past.rank());
        KILN_CHECK(axis >= 1, kInvalidModel) << node_label(n) << ": axis must not be the batch axis";
        for (int i = 0; i < past.rank(); ++i) {
            const int64_t p = static_dim(n, past.shape[i], "past_cache dim"), u = static_dim(n, upd.shape[i], "update dim");
            KILN_CHECK(i == axis ? u <= p : u == p, kInvalidModel)
                << node_label(n) << ": update of shape " << dims_str(upd.shape) << " does not fit past_cache of shape "
                << dims_str(past.shape) << " along axis " << axis;
        }
        if (has_input(n, 2)) {
            const auto& w = input_type(n, 2, "write_indices");
            check_dtype(n, "write_indices", w.dtype, {DType::kInt64});
            KILN_CHECK(w.rank() == 1 && w.shape[0] == past.shape[0], kInvalidModel)
                << node_label(n) << ": write_indices must have shape [" << past.shape[0].str() << "], got "
                << dims_str(w.shape);
        }
        return std::vector<ir::TensorType>{past};
    };
    d.compute = [](const ComputeArgs& a) {
        const te::Tensor &past = a.in(0), &upd = a.in(1);
        const int axis = normalize_axis(a.node, a.node.attr_int("axis", -2), past->ndim());
        const bool circular = a.node.attr_string("mode", "linear") == "circular";
        const int64_t smax = past->shape[axis], s = upd->shape[axis];
        auto out = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) {
                Expr w = a.has_input(2) ? te::read(a.in(2), {Expr(i[0])}) : te::int_imm(0);
                Expr p = Expr(i[axis]) - w;
                if (circular) p = te::floormod(p, te::int_imm(smax));
                Expr inside = te::logical_and(p >= te::int_imm(0), p < te::int_imm(s));
                std::vector<Expr> ui(i.begin(), i.end());
                ui[axis] = clamp_index(p, s);
                return te::select(inside, te::read(upd, ui), te::read(past, i));
            },
            "TensorScatter", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    return d;
}

}  // namespace

void register_tensor_scatter_ops(OpRegistry& r) { r.add(tensor_scatter_op()); }

}  // namespace kiln::op
