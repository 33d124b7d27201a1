// KilnBlockedAttention (pass/fuse_long_attention.h writes it): softmax(scale * Q Kt) V over long
// sequences, one op so that the runtime computes it a block of query rows at a time and the
// [S, T] scores never leave the cache (runtime/attention_kernel.h).
//   Q [B, H, S, D], Kt [B, H, D, T], V [B, H, T, Dv] -> Y [B, H, S, Dv]; attribute scale.
// The compute here is the reference (and the `--kernels generated` path), stage by stage:
//   qk = sum_d Q Kt                              "blocked_attn_qk"
//   m = max_t scale qk, e = flushed_exp(scale qk - m)   "blocked_attn_max", "blocked_attn_exp"
//   p = flush_subnormal(e / sum_t e)             "blocked_attn_sum", "blocked_attn_probs"
//   Y = sum_t p V                                "KilnBlockedAttention"
// (the Softmax's semantics, op/defs/flush_subnormal.h). Pattern kOpaque.
#include <string>

#include "op/defs/flush_subnormal.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

/// Element [a, b, c, d] of a 4-D tensor.
Expr at(const te::Tensor& t, Expr a, Expr b, Expr c, Expr d) {
    return te::read(t, std::vector<Expr>{std::move(a), std::move(b), std::move(c), std::move(d)});
}

std::vector<ir::TensorType> blocked_attention_infer(const ir::Node& n) {
    const auto& q = input_type(n, 0, "Q");
    const auto& kt = input_type(n, 1, "Kt");
    const auto& v = input_type(n, 2, "V");
    check_dtype(n, "Q", q.dtype, {DType::kFloat32});
    check_dtype(n, "Kt", kt.dtype, {DType::kFloat32});
    check_dtype(n, "V", v.dtype, {DType::kFloat32});
    check_rank(n, "Q", q.rank(), 4);
    check_rank(n, "Kt", kt.rank(), 4);
    check_rank(n, "V", v.rank(), 4);
    const Shape qs = q.static_shape(), ks = kt.static_shape(), vs = v.static_shape();
    KILN_CHECK(ks[0] == qs[0] && ks[1] == qs[1] && ks[2] == qs[3], kInvalidModel)
        << node_label(n) << ": Kt must be [B, H, D, T] = [" << qs[0] << ", " << qs[1] << ", " << qs[3]
        << ", T] for Q " << shape_str(qs) << ", got " << shape_str(ks);
    KILN_CHECK(vs[0] == qs[0] && vs[1] == qs[1] && vs[2] == ks[3], kInvalidModel)
        << node_label(n) << ": V must be [B, H, T, Dv] with T = " << ks[3] << ", got " << shape_str(vs);
    return {{DType::kFloat32, {qs[0], qs[1], qs[2], vs[3]}}};
}

std::vector<te::Tensor> blocked_attention_compute(const ComputeArgs& a) {
    const te::Tensor q = a.in(0), kt = a.in(1), v = a.in(2);
    const int64_t B = q->shape[0], H = q->shape[1], S = q->shape[2], D = q->shape[3], T = kt->shape[3];
    const DType f32 = DType::kFloat32;
    const Expr scale = te::make_const(f32, a.node.attr_float("scale", 1.0));
    te::IterVar rd = te::reduce_axis(D, "d");
    te::Tensor qk = te::compute(
        {B, H, S, T},
        [&](const std::vector<Var>& i) {
            return te::sum(at(q, i[0], i[1], i[2], rd->var) * at(kt, i[0], i[1], rd->var, i[3]), {rd});
        },
        "blocked_attn_qk", f32);
    te::IterVar rm = te::reduce_axis(T, "t");
    te::Tensor m = te::compute(
        {B, H, S, 1}, [&](const std::vector<Var>& i) { return te::max_reduce(at(qk, i[0], i[1], i[2], rm->var) * scale, {rm}); },
        "blocked_attn_max", f32);
    te::Tensor e = te::compute(
        {B, H, S, T},
        [&](const std::vector<Var>& i) {
            return flushed_exp(at(qk, i[0], i[1], i[2], i[3]) * scale - at(m, i[0], i[1], i[2], te::int_imm(0)), f32);
        },
        "blocked_attn_exp", f32);
    te::IterVar rs = te::reduce_axis(T, "t");
    te::Tensor s = te::compute(
        {B, H, S, 1}, [&](const std::vector<Var>& i) { return te::sum(at(e, i[0], i[1], i[2], rs->var), {rs}); },
        "blocked_attn_sum", f32);
    te::Tensor p = te::compute(
        {B, H, S, T},
        [&](const std::vector<Var>& i) {
            return flush_subnormal(at(e, i[0], i[1], i[2], i[3]) /
                                       at(s, i[0], i[1], i[2], te::int_imm(0)),
                                   f32);
        },
        "blocked_attn_probs", f32);
    te::IterVar rt = te::reduce_axis(T, "t");
    te::Tensor y = te::compute(
        a.out_shape(),
        [&](const std::vector<Var>& i) {
            return te::sum(at(p, i[0], i[1], i[2], rt->var) * at(v, i[0], i[1], rt->var, i[3]), {rt});
        },
        "KilnBlockedAttention", f32);
    return {y};
}

OpDef blocked_attention_op() {
    OpDef d;
    d.name = "KilnBlockedAttention";
    d.internal = true;  // made by pass/fuse_long_attention.h
    d.min_inputs = d.max_inputs = 3;
    d.attrs = {{"scale", AttrKind::kFloat, ir::Attr(1.0)}};
    d.pattern = OpPattern::kOpaque;
    d.flops = [](const ir::Node& n) {  // the two products: 2 * B * H * S * T * (D + Dv)
        const Shape q = n.input(0)->type().static_shape(), v = n.input(2)->type().static_shape();
        return 2.0 * static_cast<double>(shape_numel(q) / q[3]) * static_cast<double>(v[2]) *
               static_cast<double>(q[3] + v[3]);
    };
    d.infer = blocked_attention_infer;
    d.compute = blocked_attention_compute;
    return d;
}

}  // namespace

void register_blocked_attention_ops(OpRegistry& r) { r.add(blocked_attention_op()); }

}  // namespace kiln::op
