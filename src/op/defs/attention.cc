// Transformer attention ops: Attention (opsets 23, 24) and RotaryEmbedding (opset 23).
//
// Attention (scaled dot-product attention, the ONNX reference semantics). Q is (B, qH, qS, hd)
// or 3-D (B, qS, qH*hd) with q_num_heads; K, V likewise with kv_num_heads (V's head size vhd may
// differ). Stages, in the compute type (f32 for f16/bf16):
//   present_key   = concat(past_key, K) on the sequence axis   (B, kvH, T, hd)    "attn_present_key"
//   present_value = concat(past_value, V)                      (B, kvH, T, vhd)   "attn_present_value"
//   qk     = scale * sum_d Q[b,h,s,d] * Kp[b,h/g,t,d]   g = qH/kvH (GQA)      "attn_qk"
//   biased = qk + mask, -inf where causal (t > s + past) or where a bool mask is false or where
//            t lies past the mask's last dimension (a shorter mask is padded, as the spec says)
//            or (opset 24) where t >= nonpad_kv_seqlen[b]
//   logits = softcap > 0 ? softcap * tanh(biased / softcap) : biased          "attn_logits"
//   probs  = softmax of logits over t (max, exp, sum stages)                    "attn_probs"
//   Y      = sum_t probs * Vp[b,h/g,t,d]  (3-D inputs: Y is written as (B, qS, qH*vhd))
// qk_matmul_output: mode 0 qk, 1 biased, 2 logits, 3 probs. scale defaults to 1/sqrt(hd).
// softmax_precision (1, 10, 11, 16) is accepted: the softmax always runs in at least f32.
//
// RotaryEmbedding: X is (B, H, S, hd) or 3-D (B, S, H*hd) with num_heads; the first rd =
// rotary_embedding_dim (default hd) features of each head rotate by cos/sin read from
// cache[position_ids[b,s], i] (or cache[b,s,i] without position_ids), pairing feature i with
// i + rd/2 (or 2i with 2i+1 when interleaved):  (x1, x2) -> (cos x1 - sin x2, sin x1 + cos x2).
// Both ops are kOpaque: their stages (matmuls, reductions) form kernels of their own.

#include <cmath>
#include <limits>
#include <string>

#include "op/defs/flush_subnormal.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

// ---- Attention ----

/// Static head geometry of an Attention node, derived from its input types.
struct AttnGeom {
    bool is3d = false;
    int64_t q_heads = 0, kv_heads = 0, head = 0, v_head = 0, past = 0;
};

int64_t checked_heads(const ir::Node& n, const char* attr, const char* what, int64_t hidden) {
    KILN_CHECK(n.has_attr(attr), kInvalidModel) << node_label(n) << ": 3-D input " << what << " needs attribute " << attr;
    const int64_t h = n.attr_int(attr, 0);
    KILN_CHECK(h > 0 && hidden % h == 0, kInvalidModel)
        << node_label(n) << ": attribute " << attr << "=" << h << " must be positive and divide the hidden size "
        << hidden << " of input " << what;
    return h;
}

AttnGeom attn_geometry(const ir::Node& n) {
    const auto& q = input_type(n, 0, "Q");
    const auto& k = input_type(n, 1, "K");
    const auto& v = input_type(n, 2, "V");
    KILN_CHECK(q.rank() == 3 || q.rank() == 4, kInvalidModel)
        << node_label(n) << ": input Q must have rank 3 or 4, got rank " << q.rank();
    check_rank(n, "K", k.rank(), q.rank());
    check_rank(n, "V", v.rank(), q.rank());
    AttnGeom g;
    g.is3d = q.rank() == 3;
    const int last = q.rank() - 1;
    if (g.is3d) {
        const int64_t qh = static_dim(n, q.shape[2], "Q hidden size");
        const int64_t kh = static_dim(n, k.shape[2], "K hidden size");
        const int64_t vh = static_dim(n, v.shape[2], "V hidden size");
        g.q_heads = checked_heads(n, "q_num_heads", "Q", qh);
        g.kv_heads = checked_heads(n, "kv_num_heads", "K", kh);
        KILN_CHECK(vh % g.kv_heads == 0, kInvalidModel)
            << node_label(n) << ": kv_num_heads=" << g.kv_heads << " does not divide V's hidden size " << vh;
        g.head = qh / g.q_heads;
        KILN_CHECK(kh / g.kv_heads == g.head, kInvalidModel)
            << node_label(n) << ": K head size " << kh / g.kv_heads << " differs from Q head size " << g.head;
        g.v_head = vh / g.kv_heads;
    } else {
        g.q_heads = static_dim(n, q.shape[1], "Q heads");
        g.kv_heads = static_dim(n, k.shape[1], "K heads");
        KILN_CHECK(static_dim(n, v.shape[1], "V heads") == g.kv_heads, kInvalidModel)
            << node_label(n) << ": V has " << v.shape[1].str() << " heads, K has " << g.kv_heads;
        g.head = static_dim(n, q.shape[3], "Q head size");
        KILN_CHECK(static_dim(n, k.shape[3], "K head size") == g.head, kInvalidModel)
            << node_label(n) << ": K head size " << k.shape[3].str() << " differs from Q head size " << g.head;
        g.v_head = static_dim(n, v.shape[3], "V head size");
    }
    KILN_CHECK(g.q_heads % g.kv_heads == 0, kInvalidModel)
        << node_label(n) << ": q heads " << g.q_heads << " must be a multiple of kv heads " << g.kv_heads;
    const int seq = g.is3d ? 1 : 2;
    KILN_CHECK(k.shape[seq] == v.shape[seq] || !k.shape[seq].is_static() || !v.shape[seq].is_static(), kInvalidModel)
        << node_label(n) << ": K and V sequence lengths differ: " << k.shape[seq].str() << " vs " << v.shape[seq].str();
    (void)last;
    KILN_CHECK(has_input(n, 4) == has_input(n, 5), kInvalidModel)
        << node_label(n) << ": past_key and past_value must be given together";
    if (has_input(n, 4)) {
        const auto& pk = n.input(4)->type();
        const auto& pv = n.input(5)->type();
        check_rank(n, "past_key", pk.rank(), 4);
        check_rank(n, "past_value", pv.rank(), 4);
        g.past = static_dim(n, pk.shape[2], "past_key sequence length");
        const bool ok = static_dim(n, pk.shape[1], "past_key heads") == g.kv_heads &&
                        static_dim(n, pk.shape[3], "past_key head size") == g.head &&
                        static_dim(n, pv.shape[1], "past_value heads") == g.kv_heads &&
                        static_dim(n, pv.shape[2], "past_value sequence length") == g.past &&
                        static_dim(n, pv.shape[3], "past_value head size") == g.v_head;
        KILN_CHECK(ok, kInvalidModel) << node_label(n) << ": past_key " << dims_str(pk.shape) << " / past_value "
                                      << dims_str(pv.shape) << " do not match " << g.kv_heads << " kv heads, head sizes "
                                      << g.head << " / " << g.v_head;
    }
    return g;
}

OpDef attention_op() {
    OpDef d;
    d.name = "Attention";
    d.onnx_versions = {23, 24};
    d.min_inputs = 3;
    d.max_inputs = 7;
    d.min_outputs = 1;
    d.max_outputs = 4;
    d.attrs = {{"is_causal", AttrKind::kInt, ir::Attr(int64_t{0})},
               {"kv_num_heads", AttrKind::kInt, std::nullopt},
               {"q_num_heads", AttrKind::kInt, std::nullopt},
               {"qk_matmul_output_mode", AttrKind::kInt, ir::Attr(int64_t{0})},
               {"scale", AttrKind::kFloat, std::nullopt},
               {"softcap", AttrKind::kFloat, ir::Attr(0.0)},
               {"softmax_precision", AttrKind::kInt, std::nullopt}};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& q = input_type(n, 0, "Q");
        check_dtype(n, "Q", q.dtype, float_types());
        check_same_dtype(n, "Q", q.dtype, "K", input_type(n, 1, "K").dtype);
        check_same_dtype(n, "Q", q.dtype, "V", input_type(n, 2, "V").dtype);
        if (has_input(n, 4)) check_same_dtype(n, "Q", q.dtype, "past_key", n.input(4)->type().dtype);
        if (has_input(n, 5)) check_same_dtype(n, "Q", q.dtype, "past_value", n.input(5)->type().dtype);
        const AttnGeom g = attn_geometry(n);
        const int64_t mode = n.attr_int("qk_matmul_output_mode", 0);
        KILN_CHECK(mode >= 0 && mode <= 3, kUnsupported)
            << node_label(n) << ": qk_matmul_output_mode=" << mode << " is not supported (0..3)";
        if (n.has_attr("softmax_precision")) {
            const int64_t p = n.attr_int("softmax_precision", 1);
            KILN_CHECK(p == 1 || p == 10 || p == 11 || p == 16, kUnsupported)
                << node_label(n) << ": softmax_precision=" << p << " is not supported (1, 10, 11, 16)";
        }
        const int seq = g.is3d ? 1 : 2;
        const auto& k = n.input(1)->type();
        ir::Dim total = k.shape[seq];
        if (g.past > 0 || has_input(n, 4)) total = ir::Dim(g.past + static_dim(n, k.shape[seq], "K sequence length"));
        const ir::Dim batch = q.shape[0];
        const ir::Dim qs = q.shape[seq];
        if (has_input(n, 3)) {
            const auto& m = n.input(3)->type();
            KILN_CHECK(m.dtype == DType::kBool || m.dtype == q.dtype, kInvalidModel)
                << node_label(n) << ": attn_mask must be bool or " << dtype_name(q.dtype) << ", got "
                << dtype_name(m.dtype);
            KILN_CHECK(m.rank() >= 2 && m.rank() <= 4, kInvalidModel)
                << node_label(n) << ": attn_mask must have rank 2..4, got rank " << m.rank();
            const std::vector<ir::Dim> want{batch, ir::Dim(g.q_heads), qs, total};
            for (int i = 0; i < m.rank(); ++i) {
                const ir::Dim& md = m.shape[i];
                const ir::Dim& wd = want[4 - m.rank() + i];
                if (!md.is_static() || !wd.is_static()) continue;
                const bool ok = i == m.rank() - 1 ? md.value <= wd.value : (md.value == 1 || md.value == wd.value);
                KILN_CHECK(ok, kInvalidModel) << node_label(n) << ": attn_mask of shape " << dims_str(m.shape)
                                              << " does not broadcast to " << dims_str(want);
            }
        }
        std::vector<ir::TensorType> out;
        if (g.is3d) {
            out.push_back({q.dtype, {batch, qs, ir::Dim(g.q_heads * g.v_head)}});
        } else {
            out.push_back({q.dtype, {batch, ir::Dim(g.q_heads), qs, ir::Dim(g.v_head)}});
        }
        if (has_input(n, 6)) {
            const auto& np = n.input(6)->type();
            check_dtype(n, "nonpad_kv_seqlen", np.dtype, {DType::kInt64});
            check_rank(n, "nonpad_kv_seqlen", np.rank(), 1);
        }
        if (n.num_outputs() > 1) out.push_back({q.dtype, {batch, ir::Dim(g.kv_heads), total, ir::Dim(g.head)}});
        if (n.num_outputs() > 2) out.push_back({q.dtype, {batch, ir::Dim(g.kv_heads), total, ir::Dim(g.v_head)}});
        if (n.num_outputs() > 3) out.push_back({q.dtype, {batch, ir::Dim(g.q_heads), qs, total}});
        return out;
    };
    d.compute = [](const ComputeArgs& a) {
        const ir::Node& n = a.node;
        const AttnGeom g = attn_geometry(n);
        te::Tensor q = a.in(0), k = a.in(1), v = a.in(2);
        te::Tensor mask = a.has_input(3) ? a.in(3) : nullptr;
        te::Tensor past_k = a.has_input(4) ? a.in(4) : nullptr;
        te::Tensor past_v = a.has_input(5) ? a.in(5) : nullptr;
        te::Tensor nonpad = a.has_input(6) ? a.in(6) : nullptr;
        const DType odt = a.out_dtype();
        const DType cdt = te::compute_dtype(odt);
        const int64_t batch = q->shape[0];
        const int64_t qs = g.is3d ? q->shape[1] : q->shape[2];
        const int64_t kvs = g.is3d ? k->shape[1] : k->shape[2];
        const int64_t total = g.past + kvs;
        const int64_t group = g.q_heads / g.kv_heads;
        const double scale = n.has_attr("scale") ? n.attr_float("scale", 1.0)
                                                 : 1.0 / std::sqrt(static_cast<double>(g.head));
        const double softcap = n.attr_float("softcap", 0.0);
        const bool causal = n.attr_int("is_causal", 0) != 0;
        const int64_t mode = n.attr_int("qk_matmul_output_mode", 0);
        const Expr neg_inf = te::make_const(cdt, -std::numeric_limits<double>::infinity());

        // Element (b, h, s, d) of a Q/K/V input in the 4-D view.
        auto read4 = [&](const te::Tensor& t, Expr b, Expr h, Expr s, Expr dd, int64_t hs) {
            if (!g.is3d) return te::cast(cdt, te::read(t, {b, h, s, dd}));
            return te::cast(cdt, te::read(t, {b, s, h * hs + dd}));
        };
        // present = concat(past, cur) along the sequence axis.
        auto present = [&](const te::Tensor& past, const te::Tensor& cur, int64_t hs, const char* name) {
            return te::compute(
                {batch, g.kv_heads, total, hs}, [&](const std::vector<Var>& i) {
                    if (!past) return read4(cur, i[0], i[1], i[2], i[3], hs);
                    Expr from_past = te::cast(cdt, te::read(past, {i[0], i[1], clamp_index(i[2], g.past), i[3]}));
                    Expr from_cur = read4(cur, i[0], i[1], clamp_index(Expr(i[2]) - g.past, kvs), i[3], hs);
                    return te::select(Expr(i[2]) < te::int_imm(g.past), from_past, from_cur);
                },
                name, odt);
        };
        te::Tensor pk = present(past_k, k, g.head, "attn_present_key");
        te::Tensor pv = present(past_v, v, g.v_head, "attn_present_value");

        const Shape sshape{batch, g.q_heads, qs, total};
        te::IterVar rd = te::reduce_axis(g.head, "rd");
        te::Tensor qk = te::compute(
            sshape, [&](const std::vector<Var>& i) {
                Expr kh = te::floordiv(Expr(i[1]), te::int_imm(group));
                Expr prod = read4(q, i[0], i[1], i[2], rd->var, g.head) *
                            te::cast(cdt, te::read(pk, {i[0], kh, i[3], rd->var}));
                return te::sum(prod * te::make_const(cdt, scale), {rd});
            },
            "attn_qk", cdt);
        te::Tensor biased = qk;
        if (mask || causal || nonpad) {
            biased = te::compute(
                sshape, [&](const std::vector<Var>& i) {
                    Expr val = te::read(qk, i);
                    Expr drop;  // true where the score is masked to -inf
                    auto add_drop = [&](Expr c) { drop = drop ? te::logical_or(drop, c) : c; };
                    if (causal) add_drop(Expr(i[3]) > Expr(i[2]) + g.past);
                    if (nonpad) add_drop(Expr(i[3]) >= te::cast(DType::kInt64, te::read(nonpad, {Expr(i[0])})));
                    if (mask) {
                        const int mr = mask->ndim();
                        const int64_t ml = mask->shape[mr - 1];
                        std::vector<Expr> idx;
                        for (int m = 0; m < mr - 1; ++m) {
                            idx.push_back(mask->shape[m] == 1 ? te::int_imm(0) : Expr(i[4 - mr + m]));
                        }
                        idx.push_back(ml == total ? Expr(i[3]) : clamp_index(i[3], ml));
                        if (ml < total) add_drop(Expr(i[3]) >= te::int_imm(ml));
                        Expr mv = te::read(mask, idx);
                        if (mask->dtype == DType::kBool) {
                            add_drop(te::unary(te::UnaryOp::kNot, mv));
                        } else {
                            val = val + te::cast(cdt, mv);
                        }
                    }
                    return drop ? te::select(drop, neg_inf, val) : val;
                },
                "attn_biased", cdt);
        }
        te::Tensor logits = biased;
        if (softcap > 0) {
            logits = te::compute(
                sshape, [&](const std::vector<Var>& i) {
                    const Expr c = te::make_const(cdt, softcap);
                    return te::unary(te::UnaryOp::kTanh, te::read(biased, i) / c) * c;
                },
                "attn_logits", cdt);
        }
        // Softmax over t.
        const Shape red{batch, g.q_heads, qs, 1};
        auto row = [](const std::vector<Var>& i, Expr t) { return std::vector<Expr>{i[0], i[1], i[2], std::move(t)}; };
        te::IterVar r1 = te::reduce_axis(total, "rt");
        te::Tensor mx = te::compute(
            red, [&](const std::vector<Var>& i) { return te::max_reduce(te::read(logits, row(i, r1->var)), {r1}); },
            "attn_max", cdt);
        te::Tensor ex = te::compute(
            sshape, [&](const std::vector<Var>& i) {
                return flushed_exp(te::read(logits, i) - te::read(mx, row(i, te::int_imm(0))), cdt);
            },
            "attn_exp", cdt);
        te::IterVar r2 = te::reduce_axis(total, "rt");
        te::Tensor sm = te::compute(
            red, [&](const std::vector<Var>& i) { return te::sum(te::read(ex, row(i, r2->var)), {r2}); }, "attn_sum",
            cdt);
        te::Tensor probs = te::compute(
            sshape,
            [&](const std::vector<Var>& i) {
                return flush_subnormal(te::read(ex, i) / te::read(sm, row(i, te::int_imm(0))), cdt);
            },
            "attn_probs", cdt);
        // Y = probs @ V.
        te::IterVar r3 = te::reduce_axis(total, "rt");
        te::Tensor y;
        if (g.is3d) {
            y = te::compute(
                {batch, qs, g.q_heads * g.v_head}, [&](const std::vector<Var>& i) {
                    Expr h = te::floordiv(Expr(i[2]), te::int_imm(g.v_head));
                    Expr dd = te::floormod(Expr(i[2]), te::int_imm(g.v_head));
                    Expr kh = te::floordiv(h, te::int_imm(group));
                    Expr p = te::read(probs, {i[0], h, i[1], r3->var});
                    return te::sum(p * te::cast(cdt, te::read(pv, {i[0], kh, r3->var, dd})), {r3});
                },
                "Attention", odt);
        } else {
            y = te::compute(
                {batch, g.q_heads, qs, g.v_head}, [&](const std::vector<Var>& i) {
                    Expr kh = te::floordiv(Expr(i[1]), te::int_imm(group));
                    Expr p = te::read(probs, std::vector<Var>{i[0], i[1], i[2], r3->var});
                    return te::sum(p * te::cast(cdt, te::read(pv, {i[0], kh, r3->var, i[3]})), {r3});
                },
                "Attention", odt);
        }
        std::vector<te::Tensor> outs{y};
        if (a.output_types.size() > 1) outs.push_back(pk);
        if (a.output_types.size() > 2) outs.push_back(pv);
        if (a.output_types.size() > 3) {
            te::Tensor src = mode == 0 ? qk : mode == 1 ? biased : mode == 2 ? logits : probs;
            outs.push_back(te::compute(
                sshape, [&](const std::vector<Var>& i) { return te::read(src, i); }, "attn_qk_out", odt));
        }
        return outs;
    };
    return d;
}

// ---- RotaryEmbedding ----

OpDef rotary_embedding_op() {
    OpDef d;
    d.name = "RotaryEmbedding";
    d.onnx_versions = {23};
    d.min_inputs = 3;
    d.max_inputs = 4;
    d.attrs = {{"interleaved", AttrKind::kInt, ir::Attr(int64_t{0})},
               {"num_heads", AttrKind::kInt, ir::Attr(int64_t{0})},
               {"rotary_embedding_dim", AttrKind::kInt, ir::Attr(int64_t{0})}};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "X");
        const auto& cs = input_type(n, 1, "cos_cache");
        const auto& sn = input_type(n, 2, "sin_cache");
        check_dtype(n, "X", x.dtype, float_types());
        check_same_dtype(n, "X", x.dtype, "cos_cache", cs.dtype);
        check_same_dtype(n, "X", x.dtype, "sin_cache", sn.dtype);
        KILN_CHECK(x.rank() == 3 || x.rank() == 4, kInvalidModel)
            << node_label(n) << ": input X must have rank 3 or 4, got rank " << x.rank();
        int64_t head = 0;
        if (x.rank() == 3) {
            const int64_t hidden = static_dim(n, x.shape[2], "X hidden size");
            const int64_t nh = n.attr_int("num_heads", 0);
            KILN_CHECK(nh > 0 && hidden % nh == 0, kInvalidModel)
                << node_label(n) << ": 3-D input X needs attribute num_heads dividing its hidden size " << hidden
                << ", got num_heads=" << nh;
            head = hidden / nh;
        } else {
            head = static_dim(n, x.shape[3], "X head size");
        }
        const int64_t rd_attr = n.attr_int("rotary_embedding_dim", 0);
        const int64_t rd = rd_attr == 0 ? head : rd_attr;
        KILN_CHECK(rd > 0 && rd <= head && rd % 2 == 0, kInvalidModel)
            << node_label(n) << ": rotary_embedding_dim=" << rd << " must be even and in (0, head size " << head << "]";
        const int cache_rank = has_input(n, 3) ? 2 : 3;
        check_rank(n, "cos_cache", cs.rank(), cache_rank);
        check_rank(n, "sin_cache", sn.rank(), cache_rank);
        KILN_CHECK(cs.shape == sn.shape, kInvalidModel) << node_label(n) << ": cos_cache " << dims_str(cs.shape)
                                                        << " and sin_cache " << dims_str(sn.shape) << " differ";
        KILN_CHECK(static_dim(n, cs.shape.back(), "cos_cache last dim") == rd / 2, kInvalidModel)
            << node_label(n) << ": cos_cache last dimension must be rotary_embedding_dim/2 = " << rd / 2 << ", got "
            << cs.shape.back().str();
        if (has_input(n, 3)) {
            const auto& p = n.input(3)->type();
            check_dtype(n, "position_ids", p.dtype, {DType::kInt64});
            check_rank(n, "position_ids", p.rank(), 2);
        }
        return std::vector<ir::TensorType>{x};
    };
    d.compute = [](const ComputeArgs& a) {
        const ir::Node& n = a.node;
        te::Tensor x = a.in(0), cs = a.in(1), sn = a.in(2);
        te::Tensor pos = a.has_input(3) ? a.in(3) : nullptr;
        const bool is3d = x->ndim() == 3;
        const int64_t head = is3d ? x->shape[2] / n.attr_int("num_heads", 1) : x->shape[3];
        const int64_t rd = n.attr_int("rotary_embedding_dim", 0) == 0 ? head : n.attr_int("rotary_embedding_dim", 0);
        const int64_t half = rd / 2;
        const bool interleaved = n.attr_int("interleaved", 0) != 0;
        const DType cdt = te::compute_dtype(a.out_dtype());
        te::Tensor y = te::compute(
            x->shape, [&](const std::vector<Var>& i) {
                const Expr b = i[0];
                const Expr s = is3d ? Expr(i[1]) : Expr(i[2]);
                const Expr dd = is3d ? te::floormod(Expr(i[2]), te::int_imm(head)) : Expr(i[3]);
                // X at feature f of the same head.
                auto xr = [&](Expr f) {
                    if (is3d) return te::cast(cdt, te::read(x, {i[0], i[1], Expr(i[2]) - dd + f}));
                    return te::cast(cdt, te::read(x, {i[0], i[1], i[2], f}));
                };
                Expr first, fi, f1, f2;
                if (interleaved) {
                    fi = te::floordiv(dd, te::int_imm(2));
                    first = te::eq(te::floormod(dd, te::int_imm(2)), te::int_imm(0));
                } else {
                    first = dd < te::int_imm(half);
                    fi = te::select(first, dd, dd - half);
                }
                fi = clamp_index(fi, half);
                if (interleaved) {
                    f1 = fi * 2;
                    f2 = fi * 2 + 1;
                } else {
                    f1 = fi;
                    f2 = fi + half;
                }
                auto cache = [&](const te::Tensor& c) {
                    if (pos) return te::cast(cdt, te::read(c, {clamp_index(te::read(pos, {b, s}), cs->shape[0]), fi}));
                    return te::cast(cdt, te::read(c, {b, s, fi}));
                };
                const Expr cv = cache(cs), sv = cache(sn), x1 = xr(f1), x2 = xr(f2);
                Expr rot = te::select(first, cv * x1 - sv * x2, sv * x1 + cv * x2);
                return te::select(dd < te::int_imm(rd), rot, xr(dd));
            },
            "RotaryEmbedding", a.out_dtype());
        return std::vector<te::Tensor>{y};
    };
    return d;
}

}  // namespace

void register_attention_ops(OpRegistry& r) {
    r.add(attention_op());
    r.add(rotary_embedding_op());
}

}  // namespace kiln::op
