// Op-harness cases: Transformer ops (attention, layer norms, embeddings). op_harness_test.cc runs them (all_cases()).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <vector>

#include "op_harness_refs.h"

namespace kiln::op::testing {

void add_transformer_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref, int nout = 1) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), nout});
    };
    // RMSNormalization from the spec: y = x / sqrt(mean(x^2 over [axis, rank)) + eps) * scale.
    auto rms_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
        const int rank = x[0].rank();
        int axis = static_cast<int>(n.attr_int("axis", -1));
        if (axis < 0) axis += rank;
        const double eps = n.attr_float("epsilon", 1e-5);
        int64_t cols = 1;
        for (int k = axis; k < rank; ++k) cols *= x[0].shape[k];
        Arr y(x[0].shape);
        for (int64_t row = 0; row < x[0].numel() / cols; ++row) {
            double ms = 0;
            for (int64_t j = 0; j < cols; ++j) ms += x[0].v[row * cols + j] * x[0].v[row * cols + j];
            const double inv = 1.0 / std::sqrt(ms / cols + eps);
            for (int64_t j = 0; j < cols; ++j) {
                const int64_t f = row * cols + j;
                y.v[f] = x[0].v[f] * inv * x[1].bread(y.unravel(f));
            }
        }
        return Refs{y};
    };
    add("rms_norm_last_axis", "RMSNormalization", {in(F32, {3, 5, 16}), in(F32, {16})}, {}, rms_ref);
    add("rms_norm_axis1_eps", "RMSNormalization", {in(F32, {2, 3, 4, 5}), in(F32, {4, 1})},
        {{"axis", int64_t{1}}, {"epsilon", 1e-2}}, rms_ref);
    add("rms_norm_f16", "RMSNormalization", {in(F16, {4, 8}), in(F16, {8})}, {}, rms_ref);
    add("rms_norm_f64_neg_axis", "RMSNormalization", {in(F64, {2, 3, 4}), in(F64, {3, 4})},
        {{"axis", int64_t{-2}}}, rms_ref);
    // RotaryEmbedding from the spec: per head, feature pairs (i, i + rd/2) (interleaved: (2i, 2i+1))
    // rotate by the angle whose cos / sin the caches hold at the token's position.
    auto rope_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
        const Arr& xa = x[0];
        const bool is3d = xa.rank() == 3;
        const int64_t nh = is3d ? n.attr_int("num_heads", 0) : xa.shape[1];
        const int64_t b_n = xa.shape[0], s_n = is3d ? xa.shape[1] : xa.shape[2];
        const int64_t hd = is3d ? xa.shape[2] / nh : xa.shape[3];
        const int64_t rd = n.attr_int("rotary_embedding_dim", 0) ? n.attr_int("rotary_embedding_dim", 0) : hd;
        const bool inter = n.attr_int("interleaved", 0) != 0;
        const bool has_pos = x.size() > 3 && x[3].present;
        Arr y = xa;
        auto at = [&](int64_t b, int64_t h, int64_t s, int64_t d) {
            return is3d ? xa.ravel({b, s, h * hd + d}) : xa.ravel({b, h, s, d});
        };
        for (int64_t b = 0; b < b_n; ++b)
            for (int64_t h = 0; h < nh; ++h)
                for (int64_t s = 0; s < s_n; ++s)
                    for (int64_t i = 0; i < rd / 2; ++i) {
                        double c, sn;
                        if (has_pos) {
                            const auto p = static_cast<int64_t>(x[3].at({b, s}));
                            c = x[1].at({p, i}), sn = x[2].at({p, i});
                        } else {
                            c = x[1].at({b, s, i}), sn = x[2].at({b, s, i});
                        }
                        const int64_t d1 = inter ? 2 * i : i, d2 = inter ? 2 * i + 1 : i + rd / 2;
                        const double x1 = xa.v[at(b, h, s, d1)], x2 = xa.v[at(b, h, s, d2)];
                        y.v[at(b, h, s, d1)] = c * x1 - sn * x2;
                        y.v[at(b, h, s, d2)] = sn * x1 + c * x2;
                    }
        return Refs{y};
    };
    add("rope_4d_pos_ids", "RotaryEmbedding", {in(F32, {2, 3, 5, 8}), in(F32, {20, 4}), in(F32, {20, 4}),
        in(I64, {2, 5}, 0, 19)}, {}, rope_ref);
    add("rope_3d_interleaved_partial", "RotaryEmbedding", {in(F32, {2, 4, 24}), in(F32, {2, 4, 2}),
        in(F32, {2, 4, 2})}, {{"num_heads", int64_t{3}}, {"interleaved", int64_t{1}}, {"rotary_embedding_dim", int64_t{4}}},
        rope_ref);
    add("rope_4d_partial_f16", "RotaryEmbedding", {in(F16, {1, 2, 3, 8}), in(F16, {16, 2}), in(F16, {16, 2}),
        in(I64, {1, 3}, 0, 15)}, {{"rotary_embedding_dim", int64_t{4}}}, rope_ref);
    // Attention, naive per (b, h, s): scores over the concatenated past + current keys, mask /
    // causal / softcap, softmax, weighted sum of values. GQA: q head h reads kv head h / (qH/kvH).
    auto attn_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const bool is3d = x[0].rank() == 3;
        const int64_t b_n = x[0].shape[0];
        const int64_t qh = is3d ? n.attr_int("q_num_heads", 0) : x[0].shape[1];
        const int64_t kvh = is3d ? n.attr_int("kv_num_heads", 0) : x[1].shape[1];
        const int64_t qs = is3d ? x[0].shape[1] : x[0].shape[2];
        const int64_t kvs = is3d ? x[1].shape[1] : x[1].shape[2];
        const int64_t hd = is3d ? x[0].shape[2] / qh : x[0].shape[3];
        const int64_t vd = is3d ? x[2].shape[2] / kvh : x[2].shape[3];
        const bool has_past = x.size() > 4 && x[4].present;
        const int64_t past = has_past ? x[4].shape[2] : 0, total = past + kvs;
        const bool has_mask = x.size() > 3 && x[3].present;
        const bool causal = n.attr_int("is_causal", 0) != 0;
        const double scale = n.has_attr("scale") ? n.attr_float("scale", 1) : 1.0 / std::sqrt(double(hd));
        const double cap = n.attr_float("softcap", 0);
        const int64_t mode = n.attr_int("qk_matmul_output_mode", 0);
        auto q4 = [&](const Arr& a, int64_t b, int64_t h, int64_t s, int64_t d, int64_t hs) {
            return is3d ? a.at({b, s, h * hs + d}) : a.at({b, h, s, d});
        };
        Refs r{Arr(out[0])};
        for (size_t i = 1; i < out.size(); ++i) r.emplace_back(out[i]);
        auto kv = [&](int idx_cur, int idx_past, int64_t b, int64_t h, int64_t t, int64_t d, int64_t hs) {
            return t < past ? x[idx_past].at({b, h, t, d}) : q4(x[idx_cur], b, h, t - past, d, hs);
        };
        for (int64_t b = 0; b < b_n; ++b)
            for (int64_t h = 0; h < qh; ++h)
                for (int64_t s = 0; s < qs; ++s) {
                    const int64_t g = h / (qh / kvh);
                    std::vector<double> raw(total), biased(total), lg(total);
                    double mx = -INFINITY;
                    for (int64_t t = 0; t < total; ++t) {
                        double dot = 0;
                        for (int64_t d = 0; d < hd; ++d) dot += q4(x[0], b, h, s, d, hd) * kv(1, 4, b, g, t, d, hd);
                        raw[t] = dot * scale;
                        double v = raw[t];
                        if (causal && t > s + past) v = -INFINITY;
                        if (has_mask) {
                            const Arr& m = x[3];
                            const int64_t ml = m.shape.back();
                            std::vector<int64_t> oi{b, h, s, std::min(t, ml - 1)};
                            const double mv = m.bread(oi);
                            if (t >= ml) v = -INFINITY;
                            else if (m.present && n.input(3)->type().dtype == DType::kBool) v = mv != 0 ? v : -INFINITY;
                            else v += mv;
                        }
                        biased[t] = v;
                        lg[t] = cap > 0 ? cap * std::tanh(v / cap) : v;
                        mx = std::max(mx, lg[t]);
                    }
                    double sum = 0;
                    std::vector<double> p(total);
                    for (int64_t t = 0; t < total; ++t) sum += p[t] = std::exp(lg[t] - mx);
                    for (int64_t t = 0; t < total; ++t) p[t] /= sum;
                    for (int64_t d = 0; d < vd; ++d) {
                        double acc = 0;
                        for (int64_t t = 0; t < total; ++t) acc += p[t] * kv(2, 5, b, g, t, d, vd);
                        if (is3d) r[0].v[r[0].ravel({b, s, h * vd + d})] = acc;
                        else r[0].v[r[0].ravel({b, h, s, d})] = acc;
                    }
                    if (r.size() > 3)
                        for (int64_t t = 0; t < total; ++t)
                            r[3].v[r[3].ravel({b, h, s, t})] = mode == 0 ? raw[t] : mode == 1 ? biased[t] : mode == 2 ? lg[t] : p[t];
                }
        for (size_t o = 1; o < 3 && o < r.size(); ++o) {
            const int64_t hs = o == 1 ? hd : vd;
            for (int64_t f = 0; f < r[o].numel(); ++f) {
                auto i = r[o].unravel(f);
                r[o].v[f] = kv(static_cast<int>(o), static_cast<int>(o) + 3, i[0], i[1], i[2], i[3], hs);
            }
        }
        return r;
    };
    const DType BOOL = DType::kBool;
    add("attention_4d_basic", "Attention", {in(F32, {2, 3, 4, 8}), in(F32, {2, 3, 6, 8}), in(F32, {2, 3, 6, 8})}, {},
        attn_ref);
    add("attention_3d_gqa_causal_scaled", "Attention", {in(F32, {2, 5, 32}), in(F32, {2, 5, 16}), in(F32, {2, 5, 24})},
        {{"q_num_heads", int64_t{4}}, {"kv_num_heads", int64_t{2}}, {"is_causal", int64_t{1}}, {"scale", 0.3}}, attn_ref);
    add("attention_4d_past_bool_mask_softcap", "Attention",
        {in(F32, {1, 2, 3, 4}), in(F32, {1, 2, 3, 4}), in(F32, {1, 2, 3, 6}), in(BOOL, {3, 5}, 0, 1),
         in(F32, {1, 2, 2, 4}), in(F32, {1, 2, 2, 6})},
        {{"softcap", 1.5}}, attn_ref, 3);
    add("attention_4d_float_mask_qk_out", "Attention",
        {in(F32, {2, 4, 3, 8}), in(F32, {2, 2, 5, 8}), in(F32, {2, 2, 5, 8}), in(F32, {2, 1, 3, 5})},
        {{"qk_matmul_output_mode", int64_t{1}}}, attn_ref, 4);
    add("attention_4d_causal_past_probs_out", "Attention",
        {in(F32, {1, 2, 3, 4}), in(F32, {1, 2, 3, 4}), in(F32, {1, 2, 3, 4}), omitted(), in(F32, {1, 2, 4, 4}),
         in(F32, {1, 2, 4, 4})},
        {{"is_causal", int64_t{1}}, {"qk_matmul_output_mode", int64_t{3}}}, attn_ref, 4);
    add("attention_4d_f16", "Attention", {in(F16, {1, 2, 4, 8}), in(F16, {1, 2, 4, 8}), in(F16, {1, 2, 4, 8})}, {},
        attn_ref);
    // END add_transformer_cases
}

// Harness cases of the loss op family (kept in their own block so families grow independently).

}  // namespace kiln::op::testing
