// Op-harness cases: Losses and training ops. op_harness_test.cc runs them (all_cases()).
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

void add_loss_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref, int nout = 1) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), nout});
    };
    (void)add;
    // NLL / softmax cross-entropy from the ONNX reference: per target position p = (n, d..),
    // lp = x (NLL) or log_softmax(x) over axis 1 (SCE); w_p = (t == ignore_index) ? 0 : weight[t]
    // (1 without weight); loss_p = -lp[n, t, d..] * w_p; none / sum / mean = sum(loss) / sum(w).
    auto loss_ref = [](bool softmax) -> RefFn {
        return [softmax](const std::vector<Arr>& x, const ir::Node& n,
                         const std::vector<Shape>& out) {
            const Arr& X = x[0];
            const Arr& T = x[1];
            const bool has_w = x.size() > 2 && x[2].present;
            const bool has_ii = n.has_attr("ignore_index");
            const int64_t ii = n.attr_int("ignore_index", 0);
            const std::string red = n.attr_string("reduction", "mean");
            const int64_t C = X.shape[1];
            Arr lp = X;
            if (softmax) {
                for_each_line(X.shape, 1, [&](const std::vector<int64_t>& line) {
                    double m = -INFINITY, s = 0;
                    for (int64_t p : line) m = std::max(m, X.v[p]);
                    for (int64_t p : line) s += std::exp(X.v[p] - m);
                    for (int64_t p : line) lp.v[p] = X.v[p] - m - std::log(s);
                });
            }
            Arr loss(T.shape);
            double total = 0, wsum = 0;
            for (int64_t f = 0; f < T.numel(); ++f) {
                const auto p = T.unravel(f);
                const int64_t t = static_cast<int64_t>(T.v[f]);
                if (has_ii && t == ii) continue;
                const double w = has_w ? x[2].v[t] : 1.0;
                std::vector<int64_t> idx{p[0], t};
                idx.insert(idx.end(), p.begin() + 1, p.end());
                EXPECT_TRUE(t >= 0 && t < C) << "reference target out of range";
                loss.v[f] = -lp.at(idx) * w;
                total += loss.v[f];
                wsum += w;
            }
            Refs r;
            if (red == "none") {
                r.push_back(loss);
            } else {
                Arr y(Shape{});
                y.v[0] = red == "sum" ? total : total / wsum;
                r.push_back(y);
            }
            if (out.size() > 1) r.push_back(lp);
            return r;
        };
    };
    using Attrs = AttrMap;
    const std::string kNone = "none", kSum = "sum", kMean = "mean";
    add("nll_nc_none", "NegativeLogLikelihoodLoss", {in(F32, {4, 5}), in(I64, {4}, 0, 4)},
        Attrs{{"reduction", kNone}}, loss_ref(false));
    add("nll_ncd1_mean_weight", "NegativeLogLikelihoodLoss",
        {in(F32, {3, 5, 4}), in(I64, {3, 4}, 0, 4), in(F32, {5}, 0.1, 2)}, Attrs{},
        loss_ref(false));
    add("nll_ncd1d2_sum_ii_i32_f64", "NegativeLogLikelihoodLoss",
        {in(F64, {2, 4, 3, 5}), in(I32, {2, 3, 5}, 0, 3), in(F64, {4}, 0.1, 2)},
        Attrs{{"reduction", kSum}, {"ignore_index", int64_t{1}}}, loss_ref(false));
    // ignore_index outside [0, C): the ignored targets must not read out of bounds.
    add("nll_ncd1_mean_negative_ii", "NegativeLogLikelihoodLoss",
        {in(F32, {3, 5, 6}), in(I64, {3, 6}, -1, 4)},
        Attrs{{"ignore_index", int64_t{-1}}}, loss_ref(false));
    add("nll_nc_mean_high_ii_f16", "NegativeLogLikelihoodLoss",
        {in(F16, {6, 3}, -1, 1), in(I64, {6}, 0, 3), in(F16, {3}, 0.5, 1)},
        Attrs{{"ignore_index", int64_t{3}}}, loss_ref(false));
    add("sce_nc_mean", "SoftmaxCrossEntropyLoss", {in(F32, {4, 5}), in(I64, {4}, 0, 4)}, Attrs{},
        loss_ref(true));
    add("sce_ncd1_none_weight_log_prob", "SoftmaxCrossEntropyLoss",
        {in(F32, {3, 5, 2}), in(I64, {3, 2}, 0, 4), in(F32, {5}, 0.1, 2)},
        Attrs{{"reduction", kNone}}, loss_ref(true), 2);
    add("sce_ncd1d2_mean_weight_ii_f64", "SoftmaxCrossEntropyLoss",
        {in(F64, {2, 4, 3, 3}, -5, 5), in(I32, {2, 3, 3}, 0, 4), in(F64, {4}, 0.1, 2)},
        Attrs{{"reduction", kMean}, {"ignore_index", int64_t{4}}}, loss_ref(true), 2);
    add("sce_ncd1_sum_f16", "SoftmaxCrossEntropyLoss",
        {in(F16, {3, 4, 2}, -1, 1), in(I64, {3, 2}, 0, 3)},
        Attrs{{"reduction", kSum}}, loss_ref(true));
    // END add_loss_cases
}

// Harness cases of the resize op family (kept in their own block so families grow independently).

// ai.onnx.preview.training optimizers: the spec's pseudo code per element, in double. Inputs are
// R, T, then k groups of n tensors; outputs k' groups of n.
RefFn optimizer_ref(int k, int k_out,
                    std::function<std::vector<double>(double r, int64_t t, const std::vector<double>& e, const ir::Node& n)> f) {
    return [=](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
        const size_t groups = (x.size() - 2) / k;
        const double r = x[0].v[0];
        const auto t = static_cast<int64_t>(x[1].v[0]);
        Refs out(k_out * groups);
        for (size_t i = 0; i < groups; ++i) {
            for (int j = 0; j < k_out; ++j) out[j * groups + i] = Arr(x[2 + i].shape);
            for (int64_t p = 0; p < x[2 + i].numel(); ++p) {
                std::vector<double> e;
                for (int m = 0; m < k; ++m) e.push_back(x[2 + m * groups + i].v[p]);
                const std::vector<double> y = f(r, t, e, n);
                for (int j = 0; j < k_out; ++j) out[j * groups + i].v[p] = y[j];
            }
        }
        return out;
    };
}

void add_training_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref, int nout) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), nout});
    };
    RefFn adagrad = optimizer_ref(3, 2, [](double r, int64_t t, const std::vector<double>& e, const ir::Node& n) {
        const double x = e[0], g = e[1], h = e[2];
        const double rate = r / (1 + t * n.attr_float("decay_factor", 0.0));
        const double gr = n.attr_float("norm_coefficient", 0.0) * x + g;
        const double h_new = h + gr * gr;
        return std::vector<double>{x - rate * gr / (std::sqrt(h_new) + n.attr_float("epsilon", 1e-6)), h_new};
    });
    RefFn adam = optimizer_ref(4, 3, [](double r, int64_t t, const std::vector<double>& e, const ir::Node& n) {
        const double x = e[0], g = e[1], v = e[2], h = e[3];
        const double alpha = n.attr_float("alpha", 0.9), beta = n.attr_float("beta", 0.999);
        const double gr = n.attr_float("norm_coefficient", 0.0) * x + g;
        const double v_new = alpha * v + (1 - alpha) * gr;
        const double h_new = beta * h + (1 - beta) * gr * gr;
        const double ra = t > 0 ? r * std::sqrt(1 - std::pow(beta, t)) / (1 - std::pow(alpha, t)) : r;
        const double x_new = x - ra * v_new / (std::sqrt(h_new) + n.attr_float("epsilon", 1e-6));
        return std::vector<double>{(1 - n.attr_float("norm_coefficient_post", 0.0)) * x_new, v_new, h_new};
    });
    RefFn momentum = optimizer_ref(3, 2, [](double r, int64_t t, const std::vector<double>& e, const ir::Node& n) {
        const double x = e[0], g = e[1], v = e[2];
        const double alpha = n.attr_float("alpha", 0), beta = t > 0 ? n.attr_float("beta", 0) : 1.0;
        const double gr = n.attr_float("norm_coefficient", 0) * x + g;
        const double v_new = alpha * v + beta * gr;
        const bool nesterov = n.attr_string("mode", "") == "nesterov";
        return std::vector<double>{nesterov ? x - r * (gr + alpha * v_new) : x - r * v_new, v_new};
    });
    add("adagrad_t0_defaults", "Adagrad", {in(F32, {}, 0.05, 0.5), in(I64, {}, 0, 0), in(F32, {3, 4}), in(F32, {3, 4}),
        in(F32, {3, 4}, 0, 2)}, {}, adagrad, 2);
    add("adagrad_two_tensors_decay", "Adagrad",
        {in(F32, {}, 0.05, 0.5), in(I64, {}, 1, 9), in(F32, {5}), in(F32, {2, 3}), in(F32, {5}), in(F32, {2, 3}),
         in(F32, {5}, 0, 2), in(F32, {2, 3}, 0, 2)},
        {{"decay_factor", 0.1}, {"epsilon", 1e-3}, {"norm_coefficient", 0.01}}, adagrad, 4);
    add("adagrad_f64_r_f32", "Adagrad", {in(F32, {}, 0.05, 0.5), in(I64, {}, 0, 5), in(F64, {33}), in(F64, {33}),
        in(F64, {33}, 0, 3)}, {{"decay_factor", 0.5}}, adagrad, 2);
    add("adam_t0", "Adam", {in(F32, {}, 0.05, 0.5), in(I64, {}, 0, 0), in(F32, {2, 5}), in(F32, {2, 5}),
        in(F32, {2, 5}), in(F32, {2, 5}, 0, 2)},
        {{"alpha", 0.95}, {"beta", 0.1}, {"epsilon", 1e-7}, {"norm_coefficient", 0.001}}, adam, 3);
    add("adam_t_pos_two_tensors_post", "Adam",
        {in(F32, {}, 0.05, 0.5), in(I64, {}, 1, 6), in(F32, {4}), in(F32, {1, 17}), in(F32, {4}), in(F32, {1, 17}),
         in(F32, {4}), in(F32, {1, 17}), in(F32, {4}, 0, 2), in(F32, {1, 17}, 0, 2)},
        {{"alpha", 0.8}, {"beta", 0.85}, {"epsilon", 1e-2}, {"norm_coefficient", 0.02}, {"norm_coefficient_post", 0.1}},
        adam, 6);
    add("adam_f64_defaults", "Adam", {in(F64, {}, 0.05, 0.5), in(I64, {}, 1, 4), in(F64, {3, 3}), in(F64, {3, 3}),
        in(F64, {3, 3}), in(F64, {3, 3}, 0, 2)}, {}, adam, 3);
    add("momentum_standard_t0", "Momentum", {in(F32, {}, 0.05, 0.5), in(I64, {}, 0, 0), in(F32, {6}), in(F32, {6}),
        in(F32, {6})},
        {{"alpha", 0.95}, {"beta", 0.1}, {"mode", std::string("standard")}, {"norm_coefficient", 0.001}}, momentum, 2);
    add("momentum_standard_two_tensors", "Momentum",
        {in(F32, {}, 0.05, 0.5), in(I64, {}, 1, 9), in(F32, {3}), in(F32, {2, 2}), in(F32, {3}), in(F32, {2, 2}),
         in(F32, {3}), in(F32, {2, 2})},
        {{"alpha", 0.9}, {"beta", 0.3}, {"mode", std::string("standard")}, {"norm_coefficient", 0.01}}, momentum, 4);
    add("momentum_nesterov_f64", "Momentum", {in(F64, {}, 0.05, 0.5), in(I64, {}, 1, 9), in(F64, {4, 5}),
        in(F64, {4, 5}), in(F64, {4, 5})},
        {{"alpha", 0.7}, {"beta", 0.4}, {"mode", std::string("nesterov")}, {"norm_coefficient", 0.05}}, momentum, 2);
    // END add_training_cases
}

}  // namespace kiln::op::testing
