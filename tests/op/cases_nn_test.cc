// Op-harness cases: Neural-network ops (convolutions, pools, normalizations, activations). op_harness_test.cc runs them (all_cases()).
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

void add_nn_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref, int nout = 1) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), nout});
    };
    (void)add;
    // LpPool: (sum over the in-bounds window of |x|^p)^(1/p), pads from the spec (ref_window).
    auto lp_pool_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const double p = static_cast<double>(n.attr_int("p", 2));
        const Ints kernel = n.attr_ints("kernel_shape");
        RefWindow g = ref_window(n, x[0].shape, kernel, out[0]);
        Arr y(out[0]);
        for (int64_t f = 0; f < y.numel(); ++f) {
            const auto o = y.unravel(f);
            double s = 0;
            for (const auto& k : kernel_offsets(kernel)) {
                std::vector<int64_t> idx = {o[0], o[1]};
                bool inside = true;
                for (size_t d = 0; d < k.size(); ++d) {
                    const int64_t pos = o[2 + d] * g.s[d] + k[d] * g.d[d] - g.pb[d];
                    inside = inside && pos >= 0 && pos < g.in[d];
                    idx.push_back(pos);
                }
                if (inside) s += std::pow(std::fabs(x[0].at(idx)), p);
            }
            y.v[f] = std::pow(s, 1.0 / p);
        }
        return Refs{y};
    };
    add("lppool2d_p2_pad_stride", "LpPool", {in(F32, {1, 2, 7, 7})},
        {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}, lp_pool_ref);
    add("lppool1d_p3_dilation", "LpPool", {in(F64, {2, 1, 11})},
        {{"kernel_shape", Ints{3}}, {"dilations", Ints{2}}, {"p", int64_t{3}}}, lp_pool_ref);
    add("lppool2d_p1_same_upper", "LpPool", {in(F32, {1, 1, 5, 6})},
        {{"kernel_shape", Ints{2, 3}}, {"auto_pad", std::string("SAME_UPPER")}, {"p", int64_t{1}}}, lp_pool_ref);
    // Global pools: one reduction over all spatial positions of each (n, c).
    auto global_ref = [](bool is_max) -> RefFn {
        return [is_max](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
            const double p = static_cast<double>(n.attr_int("p", 2));
            Arr y(out[0]);
            const int64_t per = x[0].numel() / y.numel();
            for (int64_t i = 0; i < y.numel(); ++i) {
                double acc = is_max ? -INFINITY : 0;
                for (int64_t k = 0; k < per; ++k) {
                    const double v = x[0].v[i * per + k];
                    acc = is_max ? std::max(acc, v) : acc + std::pow(std::fabs(v), p);
                }
                y.v[i] = is_max ? acc : std::pow(acc, 1.0 / p);
            }
            return Refs{y};
        };
    };
    add("global_max_pool_2d", "GlobalMaxPool", {in(F32, {2, 3, 5, 5})}, {}, global_ref(true));
    add("global_max_pool_3d_f64", "GlobalMaxPool", {in(F64, {1, 2, 3, 2, 4})}, {}, global_ref(true));
    add("global_lp_pool_p2", "GlobalLpPool", {in(F32, {2, 3, 4, 4})}, {}, global_ref(false));
    add("global_lp_pool_p3_1d", "GlobalLpPool", {in(F64, {1, 2, 9})}, {{"p", int64_t{3}}}, global_ref(false));
    // Instance / Group / MeanVariance normalization: elements grouped by key(flat index);
    // y = (x - mean) / sqrt(var + eps) (MVN: / (sqrt(var) + 1e-9)), then * scale + bias per channel
    // (GroupNormalization with G-entry scale: per group).
    auto grouped_norm_ref = [](std::function<int64_t(const Arr&, const std::vector<int64_t>&, const ir::Node&)> key,
                               bool mvn) -> RefFn {
        return [key, mvn](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
            const double eps = mvn ? 1e-9 : n.attr_float("epsilon", 1e-5);
            std::map<int64_t, std::vector<int64_t>> groups;
            for (int64_t f = 0; f < x[0].numel(); ++f) groups[key(x[0], x[0].unravel(f), n)].push_back(f);
            Arr y(x[0].shape);
            for (const auto& [k, members] : groups) {
                double mean = 0, var = 0;
                for (int64_t f : members) mean += x[0].v[f];
                mean /= static_cast<double>(members.size());
                for (int64_t f : members) var += (x[0].v[f] - mean) * (x[0].v[f] - mean);
                var /= static_cast<double>(members.size());
                for (int64_t f : members)
                    y.v[f] = (x[0].v[f] - mean) / (mvn ? std::sqrt(var) + eps : std::sqrt(var + eps));
            }
            if (x.size() > 1) {
                const int64_t channels = x[0].shape[1];
                for (int64_t f = 0; f < y.numel(); ++f) {
                    int64_t c = x[0].unravel(f)[1];
                    if (x[1].numel() != channels) c /= channels / x[1].numel();
                    y.v[f] = y.v[f] * x[1].v[c] + x[2].v[c];
                }
            }
            return Refs{y};
        };
    };
    auto by_nc = [](const Arr& a, const std::vector<int64_t>& i, const ir::Node&) { return i[0] * a.shape[1] + i[1]; };
    auto by_group = [](const Arr& a, const std::vector<int64_t>& i, const ir::Node& n) {
        const int64_t g = n.attr_int("num_groups", 1);
        return i[0] * g + i[1] / (a.shape[1] / g);
    };
    auto by_unmasked = [](const Arr& a, const std::vector<int64_t>& i, const ir::Node& n) {
        std::vector<int64_t> k = i;
        for (int64_t ax : n.attr_ints("axes", {0, 2, 3})) k[norm_axis(ax, a.rank())] = 0;
        return a.ravel(k);
    };
    add("instance_norm_4d", "InstanceNormalization", {in(F32, {2, 3, 4, 5}), in(F32, {3}), in(F32, {3})},
        {{"epsilon", 1e-3}}, grouped_norm_ref(by_nc, false));
    add("instance_norm_3d_f16", "InstanceNormalization", {in(F16, {1, 2, 8}), in(F16, {2}), in(F16, {2})}, {},
        grouped_norm_ref(by_nc, false));
    add("group_norm_per_channel", "GroupNormalization", {in(F32, {2, 6, 3, 2}), in(F32, {6}), in(F32, {6})},
        {{"num_groups", int64_t{3}}}, grouped_norm_ref(by_group, false));
    add("group_norm_per_group_f64", "GroupNormalization", {in(F64, {3, 4, 5}), in(F64, {2}), in(F64, {2})},
        {{"num_groups", int64_t{2}}, {"epsilon", 1e-2}}, grouped_norm_ref(by_group, false));
    add("mvn_default_axes", "MeanVarianceNormalization", {in(F32, {3, 2, 4, 3})}, {}, grouped_norm_ref(by_unmasked, true));
    add("mvn_axis1_f64", "MeanVarianceNormalization", {in(F64, {2, 5, 3})}, {{"axes", Ints{1}}},
        grouped_norm_ref(by_unmasked, true));
    // LpNormalization along the axis.
    auto lp_norm_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
        Arr y(x[0].shape);
        const bool l1 = n.attr_int("p", 2) == 1;
        for_each_line(x[0].shape, norm_axis(n.attr_int("axis", -1), x[0].rank()), [&](const std::vector<int64_t>& line) {
            double s = 0;
            for (int64_t p : line) s += l1 ? std::fabs(x[0].v[p]) : x[0].v[p] * x[0].v[p];
            if (!l1) s = std::sqrt(s);
            for (int64_t p : line) y.v[p] = x[0].v[p] / s;
        });
        return Refs{y};
    };
    add("lp_norm_p2_last", "LpNormalization", {in(F32, {3, 4, 5})}, {}, lp_norm_ref);
    // Rows of at least two vectors reduce in lanes (a row of 70: four lane steps and a tail of 6).
    add("lp_norm_p2_lanes_tail", "LpNormalization", {in(F32, {3, 70})}, {}, lp_norm_ref);
    add("lp_norm_p1_lanes", "LpNormalization", {in(F32, {2, 2, 64})}, {{"p", int64_t{1}}}, lp_norm_ref);
    add("lp_norm_p1_axis0_f64", "LpNormalization", {in(F64, {4, 3})}, {{"axis", int64_t{0}}, {"p", int64_t{1}}},
        lp_norm_ref);
    // KilnBlockedAttention (pass/fuse_long_attention.h): softmax(scale * Q Kt) V per (b, h), in
    // double; the op's TE compute is the reference kernel (the runtime's blocked one:
    // tests/models/test_long_attention_vs_numpy.py).
    add("blocked_attention", "KilnBlockedAttention", {in(F32, {2, 2, 5, 4}), in(F32, {2, 2, 4, 7}), in(F32, {2, 2, 7, 3})},
        {{"scale", 0.5}}, [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
            const double scale = n.attr_float("scale", 1.0);
            Arr y(out[0]);
            const int64_t B = 2, H = 2, S = 5, D = 4, T = 7, Dv = 3;
            for (int64_t b = 0; b < B; ++b)
                for (int64_t h = 0; h < H; ++h)
                    for (int64_t s = 0; s < S; ++s) {
                        std::vector<double> e(T);
                        double m = -1e300, sum = 0;
                        for (int64_t t = 0; t < T; ++t) {
                            double qk = 0;
                            for (int64_t d = 0; d < D; ++d) qk += x[0].at({b, h, s, d}) * x[1].at({b, h, d, t});
                            e[t] = qk * scale;
                            m = std::max(m, e[t]);
                        }
                        for (double& v : e) sum += v = std::exp(v - m);
                        for (int64_t j = 0; j < Dv; ++j) {
                            double acc = 0;
                            for (int64_t t = 0; t < T; ++t) acc += e[t] / sum * x[2].at({b, h, t, j});
                            y.v[y.ravel({b, h, s, j})] = acc;
                        }
                    }
            return Refs{y};
        });
    // LRN across channels.
    auto lrn_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
        const int64_t size = n.attr_int("size", 1), C = x[0].shape[1];
        const double alpha = n.attr_float("alpha", 1e-4), beta = n.attr_float("beta", 0.75), bias = n.attr_float("bias", 1);
        Arr y(x[0].shape);
        for (int64_t f = 0; f < y.numel(); ++f) {
            auto idx = x[0].unravel(f);
            const int64_t c = idx[1];
            double s = 0;
            for (int64_t cc = std::max<int64_t>(0, c - (size - 1) / 2); cc <= std::min(C - 1, c + size / 2); ++cc) {
                idx[1] = cc;
                s += x[0].at(idx) * x[0].at(idx);
            }
            y.v[f] = x[0].v[f] / std::pow(bias + alpha / static_cast<double>(size) * s, beta);
        }
        return Refs{y};
    };
    add("lrn_size3", "LRN", {in(F32, {2, 5, 3, 3})}, {{"size", int64_t{3}}, {"alpha", 2e-2}, {"beta", 0.5}, {"bias", 2.0}},
        lrn_ref);
    add("lrn_size4_f64", "LRN", {in(F64, {1, 6, 4})}, {{"size", int64_t{4}}}, lrn_ref);
    // ConvTranspose as a scatter: every input element adds x * w into out[i*s + k*d - pad_begin].
    auto conv_transpose_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const Arr &X = x[0], &W = x[1];
        const size_t sp = X.shape.size() - 2;
        const int64_t group = n.attr_int("group", 1), cg = X.shape[1] / group, mg = W.shape[1];
        const Ints strides = n.attr_ints("strides", Ints(sp, 1)), dil = n.attr_ints("dilations", Ints(sp, 1));
        const Ints pads = n.attr_ints("pads"), opad = n.attr_ints("output_padding", Ints(sp, 0));
        const Ints oshape = n.attr_ints("output_shape");
        const std::string ap = n.attr_string("auto_pad", "NOTSET");
        std::vector<int64_t> pb(sp, 0);
        for (size_t d = 0; d < sp; ++d) {
            const int64_t full = strides[d] * (X.shape[2 + d] - 1) + opad[d] + (W.shape[2 + d] - 1) * dil[d] + 1;
            if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
                const int64_t total = full - X.shape[2 + d] * strides[d];
                const int64_t half = static_cast<int64_t>(std::floor(total / 2.0));
                pb[d] = ap == "SAME_UPPER" ? half : total - half;
            } else if (!oshape.empty() && pads.empty()) {
                const int64_t total = std::max<int64_t>(0, full - oshape[d]);
                pb[d] = total - total / 2;
            } else if (!pads.empty()) {
                pb[d] = pads[d];
            }
        }
        Arr y(out[0]);
        std::vector<int64_t> kernel(W.shape.begin() + 2, W.shape.end());
        for (int64_t f = 0; f < X.numel(); ++f) {
            const auto xi = X.unravel(f);
            const int64_t g = xi[1] / cg;
            for (int64_t m = 0; m < mg; ++m)
                for (const auto& k : kernel_offsets(kernel)) {
                    std::vector<int64_t> o = {xi[0], g * mg + m}, wi = {xi[1], m};
                    bool inside = true;
                    for (size_t d = 0; d < sp; ++d) {
                        const int64_t pos = xi[2 + d] * strides[d] + k[d] * dil[d] - pb[d];
                        inside = inside && pos >= 0 && pos < out[0][2 + d];
                        o.push_back(pos);
                        wi.push_back(k[d]);
                    }
                    if (inside) y.v[y.ravel(o)] += X.v[f] * W.at(wi);
                }
        }
        if (x.size() > 2 && x[2].present)
            for (int64_t f = 0; f < y.numel(); ++f) y.v[f] += x[2].v[y.unravel(f)[1]];
        return Refs{y};
    };
    add("conv_transpose2d_stride_pads", "ConvTranspose", {in(F32, {1, 2, 4, 3}), in(F32, {2, 3, 3, 3})},
        {{"strides", Ints{3, 2}}, {"pads", Ints{1, 2, 1, 0}}}, conv_transpose_ref);
    add("conv_transpose2d_group_dilation_bias", "ConvTranspose",
        {in(F32, {2, 4, 3, 3}), in(F32, {4, 3, 2, 3}), in(F32, {6})},
        {{"group", int64_t{2}}, {"dilations", Ints{2, 1}}, {"strides", Ints{1, 2}}}, conv_transpose_ref);
    add("conv_transpose2d_output_padding", "ConvTranspose", {in(F64, {1, 1, 3, 3}), in(F64, {1, 2, 3, 3})},
        {{"strides", Ints{3, 2}}, {"output_padding", Ints{1, 1}}}, conv_transpose_ref);
    add("conv_transpose2d_output_shape", "ConvTranspose", {in(F32, {1, 1, 3, 3}), in(F32, {1, 2, 3, 3})},
        {{"strides", Ints{3, 2}}, {"output_shape", Ints{10, 8}}}, conv_transpose_ref);
    add("conv_transpose2d_same_upper", "ConvTranspose", {in(F32, {1, 1, 3, 3}), in(F32, {1, 2, 3, 3})},
        {{"strides", Ints{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}}, conv_transpose_ref);
    add("conv_transpose2d_same_lower_k1", "ConvTranspose", {in(F32, {1, 2, 3, 2}), in(F32, {2, 1, 1, 2})},
        {{"strides", Ints{2, 3}}, {"auto_pad", std::string("SAME_LOWER")}}, conv_transpose_ref);
    add("conv_transpose1d_bias_f16", "ConvTranspose", {in(F16, {1, 2, 5}, -1, 1), in(F16, {2, 3, 3}, -1, 1), in(F16, {3})},
        {{"strides", Ints{2}}}, conv_transpose_ref);
    add("conv_transpose3d", "ConvTranspose", {in(F32, {1, 2, 2, 3, 2}), in(F32, {2, 2, 2, 2, 3})},
        {{"strides", Ints{2, 1, 2}}, {"pads", Ints{0, 1, 1, 1, 0, 0}}}, conv_transpose_ref);
    // END add_nn_cases
}

// Harness cases of the transformer op family (kept in their own block so families grow independently).

void add_nn2_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref, int nout = 1) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), nout});
    };
    // BatchNormalization, training_mode=1: batch statistics over N and spatial axes.
    RefFn bn_train_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
        const double eps = n.attr_float("epsilon", 1e-5), mom = n.attr_float("momentum", 0.9);
        const Arr& X = x[0];
        const int64_t C = X.shape[1];
        std::vector<double> sum(C, 0.0), sq(C, 0.0), cnt(C, 0.0);
        for (int64_t f = 0; f < X.numel(); ++f) {
            int64_t ch = X.unravel(f)[1];
            sum[ch] += X.v[f];
            cnt[ch] += 1;
        }
        for (int64_t f = 0; f < X.numel(); ++f) {
            int64_t ch = X.unravel(f)[1];
            double d = X.v[f] - sum[ch] / cnt[ch];
            sq[ch] += d * d;
        }
        Arr y(X.shape), rm(Shape{C}), rv(Shape{C});
        for (int64_t f = 0; f < X.numel(); ++f) {
            int64_t ch = X.unravel(f)[1];
            y.v[f] = (X.v[f] - sum[ch] / cnt[ch]) / std::sqrt(sq[ch] / cnt[ch] + eps) * x[1].v[ch] + x[2].v[ch];
        }
        for (int64_t ch = 0; ch < C; ++ch) {
            rm.v[ch] = x[3].v[ch] * mom + sum[ch] / cnt[ch] * (1 - mom);
            rv.v[ch] = x[4].v[ch] * mom + sq[ch] / cnt[ch] * (1 - mom);
        }
        return Refs{y, rm, rv};
    };
    add("bn_training_4d", "BatchNormalization",
        {in(F32, {2, 3, 4, 5}), in(F32, {3}), in(F32, {3}), in(F32, {3}), in(F32, {3}, 0.5, 2)},
        {{"training_mode", int64_t{1}}, {"momentum", 0.8}, {"epsilon", 1e-3}}, bn_train_ref, 3);
    add("bn_training_3d_f64", "BatchNormalization",
        {in(F64, {3, 2, 7}), in(F64, {2}), in(F64, {2}), in(F64, {2}), in(F64, {2}, 0.5, 2)},
        {{"training_mode", int64_t{1}}}, bn_train_ref, 3);
    // MaxUnpool: scatter with the last write winning, into the inferred (or given) shape.
    RefFn unpool_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const Arr& X = x[0];
        const Ints ks = n.attr_ints("kernel_shape"), st = n.attr_ints("strides", Ints(ks.size(), 1));
        const Ints pd = n.attr_ints("pads", Ints(2 * ks.size(), 0));
        Shape inf = {X.shape[0], X.shape[1]};
        for (size_t i = 0; i < ks.size(); ++i) inf.push_back((X.shape[2 + i] - 1) * st[i] - pd[i] - pd[ks.size() + i] + ks[i]);
        Arr flat(inf);
        for (int64_t f = 0; f < X.numel(); ++f) flat.v[static_cast<int64_t>(x[1].v[f])] = X.v[f];
        Arr y(out[0]);
        for (int64_t f = 0; f < flat.numel(); ++f) y.v[y.ravel(flat.unravel(f))] = flat.v[f];
        return Refs{y};
    };
    // Indices drawn from the (single) output plane, duplicates included.
    add("maxunpool_2d_dup", "MaxUnpool", {in(F32, {1, 1, 2, 3}), in(I64, {1, 1, 2, 3}, 0, 23)},
        {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}, unpool_ref);
    add("maxunpool_1d_pads", "MaxUnpool", {in(F64, {1, 1, 4}), in(I64, {1, 1, 4}, 0, 6)},
        {{"kernel_shape", Ints{3}}, {"strides", Ints{2}}, {"pads", Ints{1, 1}}}, unpool_ref);
    add("maxunpool_output_shape", "MaxUnpool",
        {in(F32, {1, 1, 2, 2}), in(I64, {1, 1, 2, 2}, 0, 15), constant({1, 1, 5, 6})},
        {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}, unpool_ref);
    // DeformConv: per-tap bilinear sampling with zero padding, written straight from the spec.
    RefFn deform_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const Arr& X = x[0];
        const Arr& W = x[1];
        const Arr& O = x[2];
        const bool has_b = x.size() > 3 && x[3].present, has_m = x.size() > 4 && x[4].present;
        const Ints st = n.attr_ints("strides", {1, 1}), dl = n.attr_ints("dilations", {1, 1}),
                   pd = n.attr_ints("pads", {0, 0, 0, 0});
        const int64_t grp = n.attr_int("group", 1), og = n.attr_int("offset_group", 1);
        const int64_t C = X.shape[1], H = X.shape[2], Wd = X.shape[3], M = W.shape[0], Cg = W.shape[1];
        const int64_t KH = W.shape[2], KW = W.shape[3];
        auto px = [&](int64_t b, int64_t ch, int64_t h, int64_t w) {
            return h < 0 || h >= H || w < 0 || w >= Wd ? 0.0 : X.at({b, ch, h, w});
        };
        Arr y(out[0]);
        const Shape& o = out[0];
        for (int64_t b = 0; b < o[0]; ++b)
            for (int64_t m = 0; m < M; ++m)
                for (int64_t oh = 0; oh < o[2]; ++oh)
                    for (int64_t ow = 0; ow < o[3]; ++ow) {
                        double s = has_b ? x[3].v[m] : 0.0;
                        for (int64_t cc = 0; cc < Cg; ++cc) {
                            int64_t ch = (m / (M / grp)) * Cg + cc, g = ch / (C / og);
                            for (int64_t i = 0; i < KH; ++i)
                                for (int64_t j = 0; j < KW; ++j) {
                                    int64_t k = (g * KH + i) * KW + j;
                                    double h = oh * st[0] - pd[0] + i * dl[0] + O.at({b, 2 * k, oh, ow});
                                    double w = ow * st[1] - pd[1] + j * dl[1] + O.at({b, 2 * k + 1, oh, ow});
                                    int64_t h0 = static_cast<int64_t>(std::floor(h)), w0 = static_cast<int64_t>(std::floor(w));
                                    double lh = h - h0, lw = w - w0;
                                    double v = (1 - lh) * (1 - lw) * px(b, ch, h0, w0) + (1 - lh) * lw * px(b, ch, h0, w0 + 1) +
                                               lh * (1 - lw) * px(b, ch, h0 + 1, w0) + lh * lw * px(b, ch, h0 + 1, w0 + 1);
                                    double mk = has_m ? x[4].at({b, k, oh, ow}) : 1.0;
                                    s += W.at({m, cc, i, j}) * mk * v;
                                }
                        }
                        y.v[y.ravel({b, m, oh, ow})] = s;
                    }
        return Refs{y};
    };
    add("deform_conv_basic_pad", "DeformConv",
        {in(F32, {1, 2, 5, 4}), in(F32, {3, 2, 2, 2}), in(F32, {1, 8, 6, 5}, -1.5, 1.5)},
        {{"pads", Ints{1, 1, 1, 1}}}, deform_ref);
    add("deform_conv_groups_mask_bias", "DeformConv",
        {in(F32, {2, 4, 6, 5}), in(F32, {4, 2, 3, 2}), in(F32, {2, 24, 2, 3}, -2, 2), in(F32, {4}),
         in(F32, {2, 12, 2, 3}, 0, 1)},
        {{"group", int64_t{2}}, {"offset_group", int64_t{2}}, {"strides", Ints{2, 1}}, {"dilations", Ints{1, 2}}},
        deform_ref);
    add("deform_conv_f64_offset_groups4", "DeformConv",
        {in(F64, {1, 4, 4, 4}), in(F64, {2, 4, 2, 2}), in(F64, {1, 32, 3, 3}, -3, 3)},
        {{"offset_group", int64_t{4}}}, deform_ref);
    // END add_nn2_cases
}

// DFT / STFT / RoiAlign (signal2): naive std::complex<double> transforms and the RoiAlign spec
// loops (per-ROI sampling grid, bilinear weights, avg / weighted-corner max).

}  // namespace kiln::op::testing
