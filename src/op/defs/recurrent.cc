// Recurrent ops: RNN, GRU, LSTM (ONNX since-versions 7, 14, 22; 14 adds `layout`, 22 bf16).
//
// Shapes (D = 2 for direction=bidirectional, else 1; G gates: RNN 1, GRU 3 (z r h), LSTM 4
// (i o f c)):  W [D, G*H, I], R [D, G*H, H], B [D, 2*G*H] (Wb then Rb), sequence_lens [batch]
// int32, initial_h / initial_c [D, batch, H] (layout 1: [batch, D, H]), P [D, 3*H] (i o f).
// X is [T, batch, I] (layout 1: [batch, T, I]); Y is [T, D, batch, H] (layout 1: [batch, T, D,
// H]); Y_h / Y_c are shaped like initial_h.
//
// The recurrence is expressed in TE by UNROLLING TIME: T is static at compile time, so each time
// step gets its own compute stages reading the previous step's state tensors. Per direction d:
//   xw[t, b, g]   = sum_k X[t, b, k] * W[d, g, k] + Wb[d, g] (+ Rb[d, g])   one batched stage
//   step s (s = 0 .. T-1):
//     RNN:  rec_s[b, g] = sum_k h_{s-1}[b, k] * R[d, g, k];  h_s = f(xw + rec_s)
//     GRU:  zr_s = h_{s-1} R[z r (h if linear_before_reset)]^T; r = f(.), z = f(.);
//           linear_before_reset=0: rh_s = r * h_{s-1}, hh_s = rh_s Rh^T
//           h~ = g(xw_h + hh_s + Rbh)  or  g(xw_h + r * (h_{s-1} Rh^T + Rbh));
//           h_s = (1 - z) h~ + z h_{s-1}
//     LSTM: gates_s = h_{s-1} R^T;  i = f(. + Pi c_{s-1}), f = f(. + Pf c_{s-1}) (or 1 - i with
//           input_forget), c~ = g(.), c_s = f c_{s-1} + i c~, o = f(. + Po c_s), h_s = o h(c_s)
// `clip` bounds every gate's activation input to [-clip, clip]; LSTM's h(c_s) reads the cell
// state unclipped (as ONNX Runtime computes it). The reverse direction consumes time
// backwards. With sequence_lens (L_b, clamped to [0, T]), step s of batch entry b is valid iff
// s < L_b; a reverse step s reads time L_b-1-s; an invalid step keeps the state, so the last
// step's state is Y_h / Y_c (the state after the last valid step; 0 when L_b = 0, as ONNX
// Runtime does). Y at times t >= L_b is 0.
// Y is one stage selecting, per element, the step state that produced time t.
// activations: per direction f (RNN), f g (GRU), f g h (LSTM); one direction's list given for a
// bidirectional node serves both. activation_alpha / activation_beta are consumed in order by
// the activations that take them (Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid,
// Elu), as ONNX Runtime does; missing values take the functions' defaults.
//
// COST NOTE: unrolling makes the stage count, the generated C and the compile time grow
// linearly with the sequence length (2 stages per step and direction for RNN, 3 for LSTM, 2 or 4
// for GRU), and each stage's buffer nests one allocation scope deeper in the C, whose failure
// paths free every live buffer (C size quadratic in T). A T=40 bidirectional LSTM takes ~20 s of
// cc. (Merging LSTM's c and h stages into one was tried: fewer scopes, but the duplicated gate
// expressions made cc slower.) So float32 nodes run by default as the runtime's fused recurrent
// kernel instead (runtime/rnn_kernel.h, matched by topi/rnn_match.cc: packed GEMMs and a
// vectorized gate pass, nothing compiled per T); this compute is the reference, the kernel of
// other dtypes and of `--kernels generated`.
// Pattern kOpaque; schedule: default_schedule (reduction stages parallel over the fused
// batch*gate axis when large, elementwise stages vectorized).
#include <cctype>
#include <string>

#include "op/defs/recurrent.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

using Cell = RnnCell;
using Act = RnnActivation;

const char* cell_name(Cell c) { return c == Cell::kRnn ? "RNN" : c == Cell::kGru ? "GRU" : "LSTM"; }

// Canonical name and default alpha / beta of an activation; whether it takes alpha / beta.
struct ActInfo {
    const char* name;
    bool takes_alpha, takes_beta;
    double alpha, beta;
};
const ActInfo* find_activation(const std::string& s) {
    static const ActInfo table[] = {
        {"Relu", false, false, 0, 0},          {"Tanh", false, false, 0, 0},
        {"Sigmoid", false, false, 0, 0},       {"Affine", true, true, 1.0, 0.0},
        {"LeakyRelu", true, false, 0.01, 0},   {"ThresholdedRelu", true, false, 1.0, 0},
        {"ScaledTanh", true, true, 1.0, 1.0},  {"HardSigmoid", true, true, 0.2, 0.5},
        {"Elu", true, false, 1.0, 0},          {"Softsign", false, false, 0, 0},
        {"Softplus", false, false, 0, 0},
    };
    for (const ActInfo& a : table) {
        std::string x = a.name, y = s;
        for (char& ch : x) ch = static_cast<char>(std::tolower(ch));
        for (char& ch : y) ch = static_cast<char>(std::tolower(ch));
        if (x == y) return &a;
    }
    return nullptr;
}

std::vector<std::string> strings_attr(const ir::Node& n, const std::string& k) {
    auto it = n.attrs().find(k);
    if (it == n.attrs().end()) return {};
    return std::get<std::vector<std::string>>(it->second);
}

// Validates the node's inputs and attributes and derives the static configuration.
RnnConfig rnn_config(const ir::Node& n, Cell cell) {
    RnnConfig c;
    c.cell = cell;
    c.gates = cell == Cell::kRnn ? 1 : cell == Cell::kGru ? 3 : 4;
    const auto& x = input_type(n, 0, "X");
    const auto& w = input_type(n, 1, "W");
    const auto& r = input_type(n, 2, "R");
    check_dtype(n, "X", x.dtype, float_types());
    check_same_dtype(n, "X", x.dtype, "W", w.dtype);
    check_same_dtype(n, "X", x.dtype, "R", r.dtype);
    check_rank(n, "X", x.rank(), 3);
    check_rank(n, "W", w.rank(), 3);
    check_rank(n, "R", r.rank(), 3);
    const std::string dir = n.attr_string("direction", "forward");
    KILN_CHECK(dir == "forward" || dir == "reverse" || dir == "bidirectional", kInvalidModel)
        << node_label(n) << ": attribute direction must be forward, reverse or bidirectional, got '" << dir << "'";
    c.dirs = dir == "bidirectional" ? 2 : 1;
    c.reverse = dir == "bidirectional" ? std::vector<bool>{false, true} : std::vector<bool>{dir == "reverse"};
    const int64_t layout = n.attr_int("layout", 0);
    KILN_CHECK(layout == 0 || layout == 1, kInvalidModel)
        << node_label(n) << ": attribute layout must be 0 or 1, got " << layout;
    c.layout1 = layout == 1;
    c.seq = x.shape[c.layout1 ? 1 : 0];
    c.batch = x.shape[c.layout1 ? 0 : 1];
    c.input = static_dim(n, x.shape[2], "X input size");
    c.hidden = static_dim(n, r.shape[2], "R hidden size");
    if (n.has_attr("hidden_size")) {
        const int64_t hs = n.attr_int("hidden_size", 0);
        KILN_CHECK(hs == c.hidden, kInvalidModel)
            << node_label(n) << ": attribute hidden_size=" << hs << " differs from R's last dimension " << c.hidden;
    }
    const int64_t gh = c.gates * c.hidden;
    auto check_shape = [&](const char* what, const ir::TensorType& t, const std::vector<ir::Dim>& want) {
        bool ok = t.rank() == static_cast<int>(want.size());
        for (size_t i = 0; ok && i < want.size(); ++i)
            ok = t.shape[i] == want[i] || !t.shape[i].is_static() || !want[i].is_static();
        KILN_CHECK(ok, kInvalidModel) << node_label(n) << ": input " << what << " must have shape " << dims_str(want)
                                      << ", got " << dims_str(t.shape);
    };
    check_shape("W", w, {c.dirs, gh, c.input});
    check_shape("R", r, {c.dirs, gh, c.hidden});
    if (has_input(n, 3)) {
        check_same_dtype(n, "X", x.dtype, "B", n.input(3)->type().dtype);
        check_shape("B", n.input(3)->type(), {c.dirs, 2 * gh});
    }
    if (has_input(n, 4)) {
        check_dtype(n, "sequence_lens", n.input(4)->type().dtype, {DType::kInt32});
        check_shape("sequence_lens", n.input(4)->type(), {c.batch});
    }
    const std::vector<ir::Dim> state =
        c.layout1 ? std::vector<ir::Dim>{c.batch, c.dirs, c.hidden} : std::vector<ir::Dim>{c.dirs, c.batch, c.hidden};
    const char* state_names[] = {"initial_h", "initial_c"};
    for (size_t i = 5; i < (cell == Cell::kLstm ? 7u : 6u); ++i) {
        if (!has_input(n, i)) continue;
        check_same_dtype(n, "X", x.dtype, state_names[i - 5], n.input(i)->type().dtype);
        check_shape(state_names[i - 5], n.input(i)->type(), state);
    }
    if (cell == Cell::kLstm && has_input(n, 7)) {
        check_same_dtype(n, "X", x.dtype, "P", n.input(7)->type().dtype);
        check_shape("P", n.input(7)->type(), {c.dirs, 3 * c.hidden});
    }
    // Activations.
    const int per_dir = cell == Cell::kRnn ? 1 : cell == Cell::kGru ? 2 : 3;
    std::vector<std::string> names = strings_attr(n, "activations");
    if (names.empty()) {
        if (cell == Cell::kRnn) names = {"Tanh"};
        if (cell == Cell::kGru) names = {"Sigmoid", "Tanh"};
        if (cell == Cell::kLstm) names = {"Sigmoid", "Tanh", "Tanh"};
    }
    if (static_cast<int64_t>(names.size()) == per_dir && c.dirs == 2) {
        std::vector<std::string> twice = names;
        twice.insert(twice.end(), names.begin(), names.end());
        names = twice;
    }
    KILN_CHECK(static_cast<int64_t>(names.size()) == per_dir * c.dirs, kInvalidModel)
        << node_label(n) << ": attribute activations must list " << per_dir * c.dirs << " functions (" << per_dir
        << " per direction), got " << names.size();
    const std::vector<double> alphas = n.attr_floats("activation_alpha");
    const std::vector<double> betas = n.attr_floats("activation_beta");
    size_t ai = 0, bi = 0;
    c.acts.assign(c.dirs, {});
    for (size_t k = 0; k < names.size(); ++k) {
        const ActInfo* info = find_activation(names[k]);
        KILN_CHECK(info != nullptr, kUnsupported)
            << node_label(n) << ": activation function '" << names[k] << "' is not supported";
        Act a{info->name, info->alpha, info->beta};
        if (info->takes_alpha && ai < alphas.size()) a.alpha = alphas[ai++];
        if (info->takes_beta && bi < betas.size()) a.beta = betas[bi++];
        c.acts[k / per_dir].push_back(a);
    }
    if (n.has_attr("clip")) {
        c.has_clip = true;
        c.clip = n.attr_float("clip", 0.0);
        KILN_CHECK(c.clip > 0, kInvalidModel) << node_label(n) << ": attribute clip must be positive, got " << c.clip;
    }
    c.input_forget = cell == Cell::kLstm && n.attr_int("input_forget", 0) != 0;
    c.linear_before_reset = cell == Cell::kGru && n.attr_int("linear_before_reset", 0) != 0;
    return c;
}

std::vector<ir::TensorType> rnn_infer(const ir::Node& n, Cell cell) {
    const RnnConfig c = rnn_config(n, cell);
    const DType dt = n.input(0)->type().dtype;
    const ir::Dim d(c.dirs), h(c.hidden);
    std::vector<ir::TensorType> out;
    out.push_back({dt, c.layout1 ? std::vector<ir::Dim>{c.batch, c.seq, d, h} : std::vector<ir::Dim>{c.seq, d, c.batch, h}});
    const std::vector<ir::Dim> state = c.layout1 ? std::vector<ir::Dim>{c.batch, d, h} : std::vector<ir::Dim>{d, c.batch, h};
    for (size_t i = 1; i < n.num_outputs(); ++i) out.push_back({dt, state});
    return out;
}

// ---- compute ----

Expr apply_act(const Act& a, Expr x, DType cdt) {
    auto k = [&](double v) { return te::make_const(cdt, v); };
    const std::string& f = a.name;
    if (f == "Relu") return te::max(x, k(0));
    if (f == "Tanh") return te::unary(te::UnaryOp::kTanh, x);
    if (f == "Sigmoid") return te::unary(te::UnaryOp::kSigmoid, x);
    if (f == "Affine") return x * k(a.alpha) + k(a.beta);
    if (f == "LeakyRelu") return te::select(x >= k(0), x, x * k(a.alpha));
    if (f == "ThresholdedRelu") return te::select(x >= k(a.alpha), x, k(0));
    if (f == "ScaledTanh") return k(a.alpha) * te::unary(te::UnaryOp::kTanh, x * k(a.beta));
    if (f == "HardSigmoid") return te::min(te::max(x * k(a.alpha) + k(a.beta), k(0)), k(1));
    if (f == "Elu") return te::select(x >= k(0), x, k(a.alpha) * (te::unary(te::UnaryOp::kExp, x) - k(1)));
    if (f == "Softsign") return x / (k(1) + te::unary(te::UnaryOp::kAbs, x));
    // Softplus, stable: max(x, 0) + log1p(exp(-|x|)).
    return te::max(x, k(0)) +
           te::unary(te::UnaryOp::kLog1p, te::unary(te::UnaryOp::kExp, -te::unary(te::UnaryOp::kAbs, x)));
}

// The per-step state tensors of one direction ([batch, H] each; c: LSTM only).
struct Steps {
    std::vector<te::Tensor> h, c;
};

// Builds the stages of one node.
class RnnBuilder {
public:
    RnnBuilder(const ComputeArgs& a, Cell cell) : a_(a), c_(rnn_config(a.node, cell)) {
        x_ = a.in(0);
        w_ = a.in(1);
        r_ = a.in(2);
        b_ = a.has_input(3) ? a.in(3) : nullptr;
        lens_ = a.has_input(4) ? a.in(4) : nullptr;
        h0_ = a.has_input(5) ? a.in(5) : nullptr;
        c0_ = cell == Cell::kLstm && a.has_input(6) ? a.in(6) : nullptr;
        p_ = cell == Cell::kLstm && a.has_input(7) ? a.in(7) : nullptr;
        cdt_ = te::compute_dtype(x_->dtype);
        t_ = x_->shape[c_.layout1 ? 1 : 0];
        batch_ = x_->shape[c_.layout1 ? 0 : 1];
    }

    std::vector<te::Tensor> build() {
        std::vector<Steps> hs(c_.dirs);
        for (int64_t d = 0; d < c_.dirs; ++d) direction(d, &hs[d]);
        std::vector<te::Tensor> outs;
        outs.push_back(y_output(hs));
        if (a_.output_types.size() > 1) outs.push_back(final_output(hs, 0, "Y_h"));
        if (a_.output_types.size() > 2) outs.push_back(final_output(hs, 1, "Y_c"));
        return outs;
    }

private:
    Expr k(double v) const { return te::make_const(cdt_, v); }
    Expr clip(Expr v) const { return c_.has_clip ? te::min(te::max(v, k(-c_.clip)), k(c_.clip)) : v; }
    Expr act(int64_t d, int which, Expr v) const { return apply_act(c_.acts[d][which], clip(v), cdt_); }
    std::string nm(const std::string& base, int64_t d, int64_t s = -1) const {
        return "rnn_" + base + "_d" + std::to_string(d) + (s >= 0 ? "_s" + std::to_string(s) : "");
    }

    // Read of an initial state input ([D, B, H] or [B, D, H]); 0 when omitted.
    Expr init_read(const te::Tensor& t, int64_t d, Expr b, Expr j) const {
        if (!t) return k(0);
        return c_.layout1 ? te::read(t, {b, te::int_imm(d), j}) : te::read(t, {te::int_imm(d), b, j});
    }
    // State before step s (s == 0: the initial state), slot 0 h, slot 1 c.
    Expr state_read(const Steps& steps, int64_t d, int64_t s, int slot, Expr b, Expr j) const {
        if (s == 0) return init_read(slot == 0 ? h0_ : c0_, d, b, j);
        return te::read(slot == 0 ? steps.h[s - 1] : steps.c[s - 1], {b, j});
    }
    // L_b clamped to [0, T] (only with sequence_lens).
    Expr seq_len(Expr b) const {
        Expr l = te::cast(DType::kInt64, te::read(lens_, {b}));
        return te::min(te::max(l, te::int_imm(0)), te::int_imm(t_));
    }
    // The time index step s of direction d reads for batch entry b (clamped into range).
    Expr time_of(int64_t d, int64_t s, Expr b) const {
        if (!c_.reverse[d]) return te::int_imm(s);
        if (!lens_) return te::int_imm(t_ - 1 - s);
        return clamp_index(seq_len(b) - (s + 1), t_);
    }
    Expr valid(int64_t s, Expr b) const { return lens_ ? Expr(te::int_imm(s) < seq_len(b)) : nullptr; }
    Expr keep_if_invalid(int64_t s, Expr b, Expr v, Expr prev) const {
        Expr ok = valid(s, b);
        return ok ? te::select(ok, v, prev) : v;
    }

    // xw[t, b, g] = X W^T + biases (Rb of GRU's h gate stays out with linear_before_reset).
    te::Tensor input_projection(int64_t d) {
        const int64_t gh = c_.gates * c_.hidden;
        te::IterVar kk = te::reduce_axis(c_.input, "k");
        te::Tensor acc = te::compute(
            {t_, batch_, gh}, [&](const std::vector<Var>& i) {
                Expr xv = c_.layout1 ? te::read(x_, {Expr(i[1]), Expr(i[0]), Expr(kk->var)})
                                     : te::read(x_, {Expr(i[0]), Expr(i[1]), Expr(kk->var)});
                return te::sum(xv * te::read(w_, {te::int_imm(d), Expr(i[2]), Expr(kk->var)}), {kk});
            },
            nm("xw_acc", d), cdt_);
        if (!b_) return acc;
        return te::compute(
            {t_, batch_, gh}, [&](const std::vector<Var>& i) {
                Expr g = i[2];
                Expr bias = te::read(b_, {te::int_imm(d), g});
                Expr rb = te::read(b_, {te::int_imm(d), g + gh});
                if (c_.linear_before_reset) rb = te::select(g < te::int_imm(2 * c_.hidden), rb, k(0));
                return te::read(acc, i) + bias + rb;
            },
            nm("xw", d), cdt_);
    }

    // rec[b, g] = sum_k prev[b, k] * R[d, g0 + g, k] for g in [0, n); nullptr when prev is 0.
    te::Tensor recurrent(int64_t d, int64_t s, const Steps& hs, int64_t g0, int64_t n,
                         const std::string& name) {
        if (s == 0 && !h0_) return nullptr;
        te::IterVar kk = te::reduce_axis(c_.hidden, "k");
        return te::compute(
            {batch_, n}, [&](const std::vector<Var>& i) {
                Expr hv = state_read(hs, d, s, 0, i[0], kk->var);
                return te::sum(hv * te::read(r_, {te::int_imm(d), i[1] + g0, Expr(kk->var)}), {kk});
            },
            nm(name, d, s), cdt_);
    }
    Expr rec_read(const te::Tensor& rec, Expr b, Expr g) const { return rec ? te::read(rec, {b, g}) : k(0); }

    void direction(int64_t d, Steps* hs) {
        te::Tensor xw = input_projection(d);
        const int64_t H = c_.hidden;
        auto xw_read = [&](int64_t s, Expr b, Expr g) { return te::read(xw, {time_of(d, s, b), b, g}); };
        for (int64_t s = 0; s < t_; ++s) {
            if (c_.cell == Cell::kRnn) {
                te::Tensor rec = recurrent(d, s, *hs, 0, H, "rec");
                hs->h.push_back(te::compute(
                    {batch_, H}, [&](const std::vector<Var>& i) {
                        Expr v = act(d, 0, xw_read(s, i[0], i[1]) + rec_read(rec, i[0], i[1]));
                        return keep_if_invalid(s, i[0], v, state_read(*hs, d, s, 0, i[0], i[1]));
                    },
                    nm("h", d, s), cdt_));
            } else if (c_.cell == Cell::kGru) {
                gru_step(d, s, xw_read, hs);
            } else {
                lstm_step(d, s, xw_read, hs);
            }
        }
    }

    template <typename XwRead>
    void gru_step(int64_t d, int64_t s, const XwRead& xw_read, Steps* hs) {
        const int64_t H = c_.hidden;
        const bool lbr = c_.linear_before_reset;
        te::Tensor zr = recurrent(d, s, *hs, 0, (lbr ? 3 : 2) * H, "zr");
        auto prev = [&](Expr b, Expr j) { return state_read(*hs, d, s, 0, b, j); };
        auto reset = [&](Expr b, Expr j) { return act(d, 0, xw_read(s, b, j + H) + rec_read(zr, b, j + H)); };
        te::Tensor hh;  // (r * h_prev) Rh^T, linear_before_reset = 0 only
        if (!lbr && (s > 0 || h0_)) {
            te::Tensor rh = te::compute(
                {batch_, H}, [&](const std::vector<Var>& i) { return reset(i[0], i[1]) * prev(i[0], i[1]); },
                nm("rh", d, s), cdt_);
            te::IterVar kk = te::reduce_axis(H, "k");
            hh = te::compute(
                {batch_, H}, [&](const std::vector<Var>& i) {
                    return te::sum(te::read(rh, {Expr(i[0]), Expr(kk->var)}) *
                                       te::read(r_, {te::int_imm(d), i[1] + 2 * H, Expr(kk->var)}),
                                   {kk});
                },
                nm("hh", d, s), cdt_);
        }
        hs->h.push_back(te::compute(
            {batch_, H}, [&](const std::vector<Var>& i) {
                Expr b = i[0], j = i[1];
                Expr z = act(d, 0, xw_read(s, b, j) + rec_read(zr, b, j));
                Expr pre;
                if (lbr) {
                    Expr rbh = b_ ? te::read(b_, {te::int_imm(d), j + 5 * H}) : k(0);
                    pre = xw_read(s, b, j + 2 * H) + reset(b, j) * (rec_read(zr, b, j + 2 * H) + rbh);
                } else {
                    pre = xw_read(s, b, j + 2 * H) + rec_read(hh, b, j);
                }
                Expr ht = act(d, 1, pre);
                Expr hp = prev(b, j);
                return keep_if_invalid(s, b, (k(1) - z) * ht + z * hp, hp);
            },
            nm("h", d, s), cdt_));
    }

    template <typename XwRead>
    void lstm_step(int64_t d, int64_t s, const XwRead& xw_read, Steps* hs) {
        const int64_t H = c_.hidden;
        te::Tensor rec = recurrent(d, s, *hs, 0, 4 * H, "gates");
        // Gate q (0 i, 1 o, 2 f, 3 c) pre-activation without the peephole.
        auto pre = [&](int q, Expr b, Expr j) { return xw_read(s, b, j + q * H) + rec_read(rec, b, j + q * H); };
        auto peep = [&](int q, Expr j, Expr cv) {  // q: 0 i, 1 o, 2 f
            return p_ ? te::read(p_, {te::int_imm(d), j + q * H}) * cv : k(0);
        };
        te::Tensor cnew = te::compute(
            {batch_, H}, [&](const std::vector<Var>& i) {
                Expr b = i[0], j = i[1];
                Expr cp = state_read(*hs, d, s, 1, b, j);
                Expr ig = act(d, 0, pre(0, b, j) + peep(0, j, cp));
                Expr fg = c_.input_forget ? k(1) - ig : act(d, 0, pre(2, b, j) + peep(2, j, cp));
                return keep_if_invalid(s, b, fg * cp + ig * act(d, 1, pre(3, b, j)), cp);
            },
            nm("c", d, s), cdt_);
        hs->c.push_back(cnew);
        hs->h.push_back(te::compute(
            {batch_, H}, [&](const std::vector<Var>& i) {
                Expr b = i[0], j = i[1];
                Expr cv = te::read(cnew, {b, j});
                Expr og = act(d, 0, pre(1, b, j) + peep(1, j, cv));
                // h(c_s): not clipped (clip bounds the gates; ONNX Runtime's LSTM does the same).
                Expr hc = apply_act(c_.acts[d][2], cv, cdt_);
                return keep_if_invalid(s, b, og * hc, state_read(*hs, d, s, 0, b, j));
            },
            nm("h", d, s), cdt_));
    }

    // Y[t, d, b, j] (layout 1: [b, t, d, j]): the state of the step that consumed time t.
    te::Tensor y_output(const std::vector<Steps>& hs) {
        return te::compute(
            a_.out_shape(0), [&](const std::vector<Var>& i) {
                Expr t = c_.layout1 ? i[1] : i[0];
                Expr dv = c_.layout1 ? i[2] : i[1];
                Expr b = c_.layout1 ? i[0] : i[2];
                Expr j = i[3];
                Expr out = k(0);
                for (int64_t d = c_.dirs - 1; d >= 0; --d) {
                    Expr step = !c_.reverse[d] ? t : lens_ ? seq_len(b) - 1 - t : te::int_imm(t_ - 1) - t;
                    Expr v = k(0);
                    for (int64_t s = 0; s < t_; ++s)
                        v = s == 0 ? te::read(hs[d].h[0], {b, j})
                                   : te::select(te::eq(step, te::int_imm(s)), te::read(hs[d].h[s], {b, j}), v);
                    if (lens_) v = te::select(t < seq_len(b), v, k(0));
                    out = d == c_.dirs - 1 ? v : te::select(te::eq(dv, te::int_imm(d)), v, out);
                }
                return out;
            },
            "Y", a_.out_dtype(0));
    }

    // Y_h / Y_c: the state after the last step (invalid steps keep it); 0 for a batch entry of
    // length 0, as ONNX Runtime does.
    te::Tensor final_output(const std::vector<Steps>& st, int slot, const std::string& name) {
        const size_t o = static_cast<size_t>(slot) + 1;
        return te::compute(
            a_.out_shape(o), [&](const std::vector<Var>& i) {
                Expr dv = c_.layout1 ? i[1] : i[0];
                Expr b = c_.layout1 ? i[0] : i[1];
                Expr j = i[2];
                Expr out = k(0);
                for (int64_t d = c_.dirs - 1; d >= 0; --d) {
                    Expr v = state_read(st[d], d, t_, slot, b, j);
                    if (lens_) v = te::select(te::eq(seq_len(b), te::int_imm(0)), k(0), v);
                    out = d == c_.dirs - 1 ? v : te::select(te::eq(dv, te::int_imm(d)), v, out);
                }
                return out;
            },
            name, a_.out_dtype(o));
    }

    const ComputeArgs& a_;
    RnnConfig c_;
    te::Tensor x_, w_, r_, b_, lens_, h0_, c0_, p_;
    DType cdt_;
    int64_t t_ = 0, batch_ = 0;
};

OpDef rnn_family_op(Cell cell) {
    OpDef d;
    d.name = cell_name(cell);
    d.onnx_versions = {7, 14, 22};
    d.min_inputs = 3;
    d.max_inputs = cell == Cell::kLstm ? 8 : 6;
    d.min_outputs = 1;
    d.max_outputs = cell == Cell::kLstm ? 3 : 2;
    d.attrs = {{"activation_alpha", AttrKind::kFloats, std::nullopt},
               {"activation_beta", AttrKind::kFloats, std::nullopt},
               {"activations", AttrKind::kStrings, std::nullopt},
               {"clip", AttrKind::kFloat, std::nullopt},
               {"direction", AttrKind::kString, ir::Attr(std::string("forward"))},
               {"hidden_size", AttrKind::kInt, std::nullopt},
               {"layout", AttrKind::kInt, ir::Attr(int64_t{0})}};
    if (cell == Cell::kLstm) d.attrs.push_back({"input_forget", AttrKind::kInt, ir::Attr(int64_t{0})});
    if (cell == Cell::kGru) d.attrs.push_back({"linear_before_reset", AttrKind::kInt, ir::Attr(int64_t{0})});
    d.pattern = OpPattern::kOpaque;
    d.infer = [cell](const ir::Node& n) { return rnn_infer(n, cell); };
    d.compute = [cell](const ComputeArgs& a) { return RnnBuilder(a, cell).build(); };
    d.flops = [](const ir::Node& n) {  // 2 * T * batch * D * G*H * (I + H)
        const Shape x = n.input(0)->type().static_shape();
        const Shape w = n.input(1)->type().static_shape();
        const double hsz = static_cast<double>(n.input(2)->type().static_shape()[2]);
        return 2.0 * static_cast<double>(x[0] * x[1]) * static_cast<double>(w[0] * w[1]) *
               (static_cast<double>(x[2]) + hsz);
    };
    return d;
}

}  // namespace

RnnConfig rnn_config(const ir::Node& n) {
    const Cell cell = n.op() == "LSTM" ? Cell::kLstm : n.op() == "GRU" ? Cell::kGru : Cell::kRnn;
    return rnn_config(n, cell);
}

void register_recurrent_ops(OpRegistry& r) {
    r.add(rnn_family_op(Cell::kRnn));
    r.add(rnn_family_op(Cell::kGru));
    r.add(rnn_family_op(Cell::kLstm));
}

}  // namespace kiln::op
