// Op harness cases of the gradient kernels' ops (op/defs/conv_grad.cc, pool_grad.cc, batch_norm_grad.cc): their TE
// computes, generated and run, against naive scatter references (each dY element's
// contributions added where the forward window put it: the transpose of the forward's gather).
#include <gtest/gtest.h>

#include <cmath>

#include "op_harness_cases.h"

namespace kiln::op::testing {
namespace {

using Ints = std::vector<int64_t>;
constexpr DType F32 = DType::kFloat32, F64 = DType::kFloat64;

// Walks every (dY element, input channel of its group, kernel offset) of a convolution and calls
// f(dy flat index, x flat index, w flat index) where the window position lies inside X.
template <typename F>
void for_each_tap(const Shape& xs, const Shape& ws, const Shape& ys, const ir::Node& n, F f) {
    const size_t sp = xs.size() - 2;
    const Ints st = n.attr_ints("strides"), dil = n.attr_ints("dilations"), pads = n.attr_ints("pads");
    const int64_t g = n.attr_int("group", 1), cg = ws[1], mg = ws[0] / g;
    Arr y(ys), x(xs), w(ws), kb(Shape(ws.begin() + 2, ws.end()));
    for (int64_t f_y = 0; f_y < y.numel(); ++f_y) {
        const auto yi = y.unravel(f_y);
        for (int64_t c = 0; c < cg; ++c)
            for (int64_t kf = 0; kf < kb.numel(); ++kf) {
                const auto k = kb.unravel(kf);
                std::vector<int64_t> xi = {yi[0], yi[1] / mg * cg + c}, wi = {yi[1], c};
                bool inside = true;
                for (size_t d = 0; d < sp; ++d) {
                    const int64_t p = yi[2 + d] * st[d] + k[d] * dil[d] - pads[d];
                    inside = inside && p >= 0 && p < xs[2 + d];
                    xi.push_back(p);
                    wi.push_back(k[d]);
                }
                if (inside) f(f_y, x.ravel(xi), w.ravel(wi));
            }
    }
}

Refs grad_data_ref(const std::vector<Arr>& in, const ir::Node& n, const std::vector<Shape>& out) {
    Arr dx(out[0]);
    for_each_tap(out[0], in[1].shape, in[0].shape, n,
                 [&](int64_t y, int64_t x, int64_t w) { dx.v[x] += in[0].v[y] * in[1].v[w]; });
    return Refs{dx};
}

Refs grad_weight_ref(const std::vector<Arr>& in, const ir::Node& n, const std::vector<Shape>& out) {
    Arr dw(out[0]);
    for_each_tap(in[0].shape, out[0], in[1].shape, n,
                 [&](int64_t y, int64_t x, int64_t w) { dw.v[w] += in[1].v[y] * in[0].v[x]; });
    return Refs{dw};
}

// dX[Indices[o]] += dY[o] (Indices flat over the whole tensor).
Refs max_pool_grad_ref(const std::vector<Arr>& in, const ir::Node&, const std::vector<Shape>& out) {
    Arr dx(out[0]);
    for (int64_t o = 0; o < in[0].numel(); ++o) dx.v[static_cast<int64_t>(in[1].v[o])] += in[0].v[o];
    return Refs{dx};
}

// Indices of a 2-D pool of X [N, C, H, W]: per output a pseudo-random in-bounds position of its
// window (the forward's argmax would be one such), as a constant input.
In window_indices(const Shape& xs, const Shape& ys, const Ints& k, const Ints& st, const Ints& dil, const Ints& pads) {
    In ind{DType::kInt64, ys};
    Arr y(ys);
    for (int64_t f = 0; f < y.numel(); ++f) {
        const auto o = y.unravel(f);
        std::vector<int64_t> hits;
        for (int64_t a = 0; a < k[0]; ++a)
            for (int64_t b = 0; b < k[1]; ++b) {
                const int64_t h = o[2] * st[0] + a * dil[0] - pads[0], w = o[3] * st[1] + b * dil[1] - pads[1];
                if (h >= 0 && h < xs[2] && w >= 0 && w < xs[3]) hits.push_back(((o[0] * xs[1] + o[1]) * xs[2] + h) * xs[3] + w);
            }
        ind.constant.push_back(static_cast<double>(hits.at(static_cast<size_t>(f * 7919 % static_cast<int64_t>(hits.size())))));
    }
    return ind;
}

// KilnBatchNormGrad: per channel, the batch mean and population variance of X (two passes, in
// double), g = dY (where R > 0 when R is given), then dB, dscale and dX by the textbook formula.
Refs batch_norm_grad_ref(const std::vector<Arr>& in, const ir::Node& n, const std::vector<Shape>& out) {
    const Arr &x = in[0], &dy = in[1], &scale = in[2];
    const int64_t c = x.shape[1];
    Arr dx(out[0]), ds(out[1]), db(out[2]);
    std::vector<double> mean(c), var(c), count(c);
    auto g = [&](int64_t f) { return in.size() > 3 && in[3].v[f] <= 0 ? 0.0 : dy.v[f]; };
    auto ch = [&](int64_t f) { return x.unravel(f)[1]; };
    for (int64_t f = 0; f < x.numel(); ++f) mean[ch(f)] += x.v[f], count[ch(f)] += 1;
    for (int64_t k = 0; k < c; ++k) mean[k] /= count[k];
    for (int64_t f = 0; f < x.numel(); ++f) var[ch(f)] += (x.v[f] - mean[ch(f)]) * (x.v[f] - mean[ch(f)]) / count[ch(f)];
    std::vector<double> inv(c);
    for (int64_t k = 0; k < c; ++k) inv[k] = 1 / std::sqrt(var[k] + n.attr_float("epsilon", 1e-5));
    for (int64_t f = 0; f < x.numel(); ++f) {
        db.v[ch(f)] += g(f);
        ds.v[ch(f)] += g(f) * (x.v[f] - mean[ch(f)]) * inv[ch(f)];
    }
    for (int64_t f = 0; f < x.numel(); ++f) {
        const int64_t k = ch(f);
        const double xhat = (x.v[f] - mean[k]) * inv[k];
        dx.v[f] = scale.v[k] * inv[k] * (g(f) - db.v[k] / count[k] - xhat * ds.v[k] / count[k]);
    }
    return Refs{dx, ds, db};
}

}  // namespace

void add_grad_op_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, ir::AttrMap attrs, RefFn ref) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), 1});
    };
    // X [2, 4, 7, 8], W [6, 2, 3, 2], group 2, strides (2, 1), dilations (1, 2), pads (1, 0, 2, 1): dY [2, 6, 4, 7].
    const ir::AttrMap g2 = {{"group", int64_t{2}}, {"strides", Ints{2, 1}}, {"dilations", Ints{1, 2}},
                            {"pads", Ints{1, 0, 2, 1}}};
    ir::AttrMap data = g2, weight = g2;
    data["input_shape"] = Ints{7, 8};
    weight["kernel_shape"] = Ints{3, 2};
    add("conv_grad_data_grouped_strided", "KilnConvGradData", {in(F32, {2, 6, 4, 7}), in(F32, {6, 2, 3, 2})}, data,
        grad_data_ref);
    add("conv_grad_weight_grouped_strided", "KilnConvGradWeight", {in(F32, {2, 4, 7, 8}), in(F32, {2, 6, 4, 7})}, weight,
        grad_weight_ref);
    // 1-D, stride 3 leaving the last inputs unread, float64.
    const ir::AttrMap s3 = {{"strides", Ints{3}}, {"dilations", Ints{1}}, {"pads", Ints{1, 0}}};
    ir::AttrMap data1 = s3, weight1 = s3;
    data1["input_shape"] = Ints{12};
    weight1["kernel_shape"] = Ints{2};
    add("conv_grad_data_1d_f64", "KilnConvGradData", {in(F64, {2, 3, 4}), in(F64, {3, 5, 2})}, data1, grad_data_ref);
    add("conv_grad_weight_1d_f64", "KilnConvGradWeight", {in(F64, {2, 5, 12}), in(F64, {2, 3, 4})}, weight1,
        grad_weight_ref);
    // MaxPool 3x3 stride 2 pad 1 over [2, 3, 7, 6]: dY [2, 3, 4, 3].
    const Ints k = {3, 3}, st = {2, 2}, dil = {1, 1}, pads = {1, 1, 1, 1};
    add("max_pool_grad_overlapping_padded", "KilnMaxPoolGrad",
        {in(F32, {2, 3, 4, 3}), window_indices({2, 3, 7, 6}, {2, 3, 4, 3}, k, st, dil, pads)},
        {{"kernel_shape", k}, {"strides", st}, {"dilations", dil}, {"pads", pads}, {"input_shape", Ints{7, 6}}},
        max_pool_grad_ref);
    // BatchNormalization's training gradient: 4-D with a ReLU's mask, 3-D float64 without.
    const ir::AttrMap eps = {{"epsilon", 1e-3}};
    c.push_back({"batch_norm_grad_relu_mask", "KilnBatchNormGrad",
                 {in(F32, {2, 3, 4, 5}), in(F32, {2, 3, 4, 5}), in(F32, {3}, 0.5, 1.5), in(F32, {2, 3, 4, 5})}, eps,
                 batch_norm_grad_ref, 3});
    c.push_back({"batch_norm_grad_f64", "KilnBatchNormGrad", {in(F64, {3, 2, 5}), in(F64, {3, 2, 5}), in(F64, {2}, 0.5, 1.5)},
                 eps, batch_norm_grad_ref, 3});
}

}  // namespace kiln::op::testing
