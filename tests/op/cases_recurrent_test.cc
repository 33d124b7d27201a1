// Op-harness cases: Recurrent ops (RNN, GRU, LSTM). op_harness_test.cc runs them (all_cases()).
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

void add_recurrent_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref, int nout = 1) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), nout});
    };
    (void)add;
    // RNN / GRU / LSTM reference: the spec's per-time-step equations, run per direction and batch
    // entry over its own length L (sequence_lens, else T); reverse consumes times L-1 .. 0;
    // Y stays 0 at times >= L; Y_h / Y_c are the state after the last processed step.
    auto recurrent_ref = [](int kind) -> RefFn {  // 0 RNN, 1 GRU, 2 LSTM
        return [kind](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
            const Arr& X = x[0];
            const Arr& W = x[1];
            const Arr& R = x[2];
            auto opt = [&](size_t i) -> const Arr* { return i < x.size() && x[i].present ? &x[i] : nullptr; };
            const Arr* B = opt(3);
            const Arr* lens = opt(4);
            const Arr* h0 = opt(5);
            const Arr* c0 = kind == 2 ? opt(6) : nullptr;
            const Arr* P = kind == 2 ? opt(7) : nullptr;
            const bool l1 = n.attr_int("layout", 0) == 1;
            const std::string dir = n.attr_string("direction", "forward");
            const int64_t D = dir == "bidirectional" ? 2 : 1;
            const int64_t T = X.shape[l1 ? 1 : 0], N = X.shape[l1 ? 0 : 1], I = X.shape[2], H = R.shape[2];
            const int64_t G = kind == 0 ? 1 : kind == 1 ? 3 : 4;
            const int per = kind == 0 ? 1 : kind == 1 ? 2 : 3;
            std::vector<std::string> acts;
            if (auto it = n.attrs().find("activations"); it != n.attrs().end())
                acts = std::get<std::vector<std::string>>(it->second);
            if (acts.empty())
                acts = kind == 0 ? std::vector<std::string>{"Tanh"}
                       : kind == 1 ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                   : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
            if (static_cast<int>(acts.size()) == per && D == 2) {
                const std::vector<std::string> once = acts;  // (self-insert would be undefined)
                acts.insert(acts.end(), once.begin(), once.end());
            }
            // Alphas / betas are taken in order by the functions that use them.
            std::vector<double> al = n.attr_floats("activation_alpha"), be = n.attr_floats("activation_beta");
            std::vector<double> fa(acts.size()), fb(acts.size());
            size_t ia = 0, ib = 0;
            for (size_t i = 0; i < acts.size(); ++i) {
                const std::string& f = acts[i];
                const bool ua = f == "Affine" || f == "LeakyRelu" || f == "ThresholdedRelu" || f == "ScaledTanh" ||
                                f == "HardSigmoid" || f == "Elu";
                const bool ub = f == "Affine" || f == "ScaledTanh" || f == "HardSigmoid";
                fa[i] = f == "LeakyRelu" ? 0.01 : f == "HardSigmoid" ? 0.2 : 1.0;
                fb[i] = f == "HardSigmoid" ? 0.5 : f == "ScaledTanh" ? 1.0 : 0.0;
                if (ua && ia < al.size()) fa[i] = al[ia++];
                if (ub && ib < be.size()) fb[i] = be[ib++];
            }
            const bool has_clip = n.has_attr("clip");
            const double clip = n.attr_float("clip", 0);
            // clip bounds the gates' activation inputs; LSTM's h(c) reads c unclipped (raw_act):
            // ONNX Runtime and OpenVINO both compute it so (the spec's wording leaves it open).
            auto raw_act = [&](int64_t d, int which, double v) {
                const size_t k = static_cast<size_t>(d * per + which);
                const std::string& f = acts[k];
                const double a = fa[k], b = fb[k];
                if (f == "Relu") return std::max(v, 0.0);
                if (f == "Tanh") return std::tanh(v);
                if (f == "Sigmoid") return 1 / (1 + std::exp(-v));
                if (f == "Affine") return a * v + b;
                if (f == "LeakyRelu") return v >= 0 ? v : a * v;
                if (f == "ThresholdedRelu") return v >= a ? v : 0.0;
                if (f == "ScaledTanh") return a * std::tanh(b * v);
                if (f == "HardSigmoid") return std::min(std::max(a * v + b, 0.0), 1.0);
                if (f == "Elu") return v >= 0 ? v : a * (std::exp(v) - 1);
                if (f == "Softsign") return v / (1 + std::fabs(v));
                if (f == "Softplus") return std::log(1 + std::exp(v));
                ADD_FAILURE() << "reference: unknown activation " << f;
                return 0.0;
            };
            auto act = [&](int64_t d, int which, double v) {
                return raw_act(d, which, has_clip ? std::min(std::max(v, -clip), clip) : v);
            };
            const bool lbr = n.attr_int("linear_before_reset", 0) != 0;
            const bool couple = n.attr_int("input_forget", 0) != 0;
            Arr Y(out[0]);
            const Shape state = l1 ? Shape{N, D, H} : Shape{D, N, H};
            Arr Yh(state), Yc(state);
            auto st = [&](int64_t d, int64_t b, int64_t j) {
                return l1 ? std::vector<int64_t>{b, d, j} : std::vector<int64_t>{d, b, j};
            };
            for (int64_t d = 0; d < D; ++d) {
                const bool rev = dir == "reverse" || d == 1;
                for (int64_t b = 0; b < N; ++b) {
                    const int64_t L = lens ? static_cast<int64_t>(lens->v[b]) : T;
                    std::vector<double> h(H, 0.0), c(H, 0.0);
                    for (int64_t j = 0; j < H; ++j) {
                        if (h0) h[j] = h0->at(st(d, b, j));
                        if (c0) c[j] = c0->at(st(d, b, j));
                    }
                    for (int64_t s = 0; s < L; ++s) {
                        const int64_t t = rev ? L - 1 - s : s;
                        // xg[g] = x W^T + Wb;  hg[g] = h R^T + Rb  (g over all G*H gate rows)
                        std::vector<double> xg(G * H), hg(G * H);
                        for (int64_t g = 0; g < G * H; ++g) {
                            double sx = B ? B->at({d, g}) : 0.0, sh = B ? B->at({d, G * H + g}) : 0.0;
                            for (int64_t k = 0; k < I; ++k) sx += X.at(l1 ? Ints{b, t, k} : Ints{t, b, k}) * W.at({d, g, k});
                            for (int64_t k = 0; k < H; ++k) sh += h[k] * R.at({d, g, k});
                            xg[g] = sx;
                            hg[g] = sh;
                        }
                        std::vector<double> hn(H);
                        if (kind == 0) {
                            for (int64_t j = 0; j < H; ++j) hn[j] = act(d, 0, xg[j] + hg[j]);
                        } else if (kind == 1) {
                            std::vector<double> z(H), r(H);
                            for (int64_t j = 0; j < H; ++j) {
                                z[j] = act(d, 0, xg[j] + hg[j]);
                                r[j] = act(d, 0, xg[H + j] + hg[H + j]);
                            }
                            for (int64_t j = 0; j < H; ++j) {
                                const double rbh = B ? B->at({d, 5 * H + j}) : 0.0;
                                double rec;
                                if (lbr) {
                                    rec = r[j] * hg[2 * H + j];  // r * (h Rh^T + Rbh)
                                } else {
                                    rec = rbh;
                                    for (int64_t k = 0; k < H; ++k) rec += r[k] * h[k] * R.at({d, 2 * H + j, k});
                                }
                                const double ht = act(d, 1, xg[2 * H + j] + rec);
                                hn[j] = (1 - z[j]) * ht + z[j] * h[j];
                            }
                        } else {
                            for (int64_t j = 0; j < H; ++j) {
                                auto p = [&](int q) { return P ? P->at({d, q * H + j}) : 0.0; };  // i o f
                                const double ig = act(d, 0, xg[j] + hg[j] + p(0) * c[j]);
                                const double fg = couple ? 1 - ig : act(d, 0, xg[2 * H + j] + hg[2 * H + j] + p(2) * c[j]);
                                const double cc = act(d, 1, xg[3 * H + j] + hg[3 * H + j]);
                                c[j] = fg * c[j] + ig * cc;
                                const double og = act(d, 0, xg[H + j] + hg[H + j] + p(1) * c[j]);
                                hn[j] = og * raw_act(d, 2, c[j]);
                            }
                        }
                        h = hn;
                        for (int64_t j = 0; j < H; ++j)
                            Y.v[Y.ravel(l1 ? Ints{b, t, d, j} : Ints{t, d, b, j})] = h[j];
                    }
                    for (int64_t j = 0; j < H && L > 0; ++j) {  // L = 0: zeros (as ONNX Runtime)
                        Yh.v[Yh.ravel(st(d, b, j))] = h[j];
                        Yc.v[Yc.ravel(st(d, b, j))] = c[j];
                    }
                }
            }
            Refs r{Y, Yh, Yc};
            r.resize(out.size());
            return r;
        };
    };
    using Strs = std::vector<std::string>;
    using Flts = std::vector<double>;
    const std::string kBidir = "bidirectional", kRev = "reverse";
    add("rnn_forward_defaults", "RNN", {in(F32, {4, 3, 5}), in(F32, {1, 6, 5}), in(F32, {1, 6, 6})},
        {{"hidden_size", int64_t{6}}}, recurrent_ref(0), 2);
    add("rnn_bidir_layout1_seq_init_acts", "RNN",
        {in(F32, {3, 5, 4}), in(F32, {2, 4, 4}), in(F32, {2, 4, 4}), in(F32, {2, 8}), in(I32, {3}, 1, 5),
         in(F32, {3, 2, 4})},
        {{"direction", kBidir}, {"layout", int64_t{1}}, {"activations", Strs{"Relu", "Affine"}},
         {"activation_alpha", Flts{0.7}}, {"activation_beta", Flts{0.1}}, {"clip", 1.5}},
        recurrent_ref(0), 2);
    add("rnn_reverse_y_only_f64", "RNN", {in(F64, {3, 2, 3}), in(F64, {1, 2, 3}), in(F64, {1, 2, 2}), in(F64, {1, 4})},
        {{"direction", kRev}, {"activations", Strs{"ThresholdedRelu"}}, {"activation_alpha", Flts{0.2}}},
        recurrent_ref(0), 1);
    add("gru_forward_bias_f64", "GRU",
        {in(F64, {3, 2, 4}), in(F64, {1, 15, 4}), in(F64, {1, 15, 5}), in(F64, {1, 30})}, {},
        recurrent_ref(1), 2);
    add("gru_reverse_lbr_seq_init_clip", "GRU",
        {in(F32, {4, 3, 3}), in(F32, {1, 9, 3}), in(F32, {1, 9, 3}), in(F32, {1, 18}), in(I32, {3}, 1, 4),
         in(F32, {1, 3, 3})},
        {{"direction", kRev}, {"linear_before_reset", int64_t{1}}, {"clip", 0.8}}, recurrent_ref(1), 2);
    add("gru_bidir_layout1_acts_init", "GRU",
        {in(F32, {2, 3, 3}), in(F32, {2, 12, 3}), in(F32, {2, 12, 4}), omitted(), omitted(), in(F32, {2, 2, 4})},
        {{"direction", kBidir}, {"layout", int64_t{1}},
         {"activations", Strs{"HardSigmoid", "Softsign", "Sigmoid", "Elu"}},
         {"activation_alpha", Flts{0.3, 0.5}}, {"activation_beta", Flts{0.4}}},
        recurrent_ref(1), 2);
    add("lstm_forward_peephole_init", "LSTM",
        {in(F32, {4, 2, 3}), in(F32, {1, 16, 3}), in(F32, {1, 16, 4}), in(F32, {1, 32}), omitted(),
         in(F32, {1, 2, 4}), in(F32, {1, 2, 4}), in(F32, {1, 12})},
        {{"hidden_size", int64_t{4}}}, recurrent_ref(2), 3);
    add("lstm_bidir_layout1_seq_forget_clip", "LSTM",
        {in(F32, {3, 4, 2}), in(F32, {2, 12, 2}), in(F32, {2, 12, 3}), in(F32, {2, 24}), in(I32, {3}, 0, 4),
         in(F32, {3, 2, 3}), in(F32, {3, 2, 3}), in(F32, {2, 9})},
        {{"direction", kBidir}, {"layout", int64_t{1}}, {"input_forget", int64_t{1}}, {"clip", 1.2}},
        recurrent_ref(2), 3);
    add("lstm_reverse_acts_f16", "LSTM",
        {in(F16, {3, 2, 3}, -1, 1), in(F16, {1, 8, 3}, -1, 1), in(F16, {1, 8, 2}, -1, 1)},
        {{"direction", kRev}, {"activations", Strs{"LeakyRelu", "Softplus", "ScaledTanh"}},
         {"activation_alpha", Flts{0.1, 0.9}}, {"activation_beta", Flts{1.2}}},
        recurrent_ref(2), 3);
    add("lstm_large_batch", "LSTM",
        {in(F32, {3, 64, 16}, -0.5, 0.5), in(F32, {1, 128, 16}, -0.5, 0.5), in(F32, {1, 128, 32}, -0.5, 0.5)}, {},
        recurrent_ref(2), 3);
    // END add_recurrent_cases
}

}  // namespace kiln::op::testing
