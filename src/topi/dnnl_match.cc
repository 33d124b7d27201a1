#include "topi/dnnl_match.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "op/window.h"
#include "topi/dnnl_conv_backward_match.h"
#include "topi/dnnl_int8_match.h"
#include "topi/rnn_match.h"

namespace kiln::topi {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

std::string join(const std::vector<int64_t>& v) {
    std::string s;
    for (int64_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
    return s;
}

std::string num(double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", x);
    return buf;
}

bool static_f32(const ir::Value* v) { return v && v->type().dtype == DType::kFloat32 && v->type().is_static(); }
bool f32(const ir::Value* v) { return v && v->type().dtype == DType::kFloat32; }

/// A conv activation of a symbolic compile: float32, rank `rank`, static channels, the batch and
/// spatial dims symbolic or static.
bool symbolic_activation(const ir::Value* v, size_t rank) {
    return f32(v) && !v->type().is_static() && v->type().shape.size() == rank && v->type().shape[1].is_static();
}

/// The template's dims of a symbolic activation: static ones as they are, 0 where symbolic (the
/// runtime writes the run's: runtime/extern_shape_params.h).
std::vector<int64_t> template_dims(const ir::Value* v) {
    std::vector<int64_t> d;
    for (const ir::Dim& x : v->type().shape) d.push_back(x.is_static() ? x.value : 0);
    return d;
}

/// The value of a one-element float32 constant.
std::optional<double> scalar_constant(const ir::Value* v) {
    if (!v || !v->is_constant() || v->type().dtype != DType::kFloat32) return std::nullopt;
    const Tensor& t = v->constant();
    if (shape_numel(t.shape()) != 1) return std::nullopt;
    return static_cast<double>(t.data_as<float>()[0]);
}

bool near(std::optional<double> v, double want) { return v && std::fabs(*v - want) <= 1e-6 * std::fabs(want); }

int arg_index(const std::vector<ir::Value*>& inputs, const ir::Value* v) {
    auto it = std::find(inputs.begin(), inputs.end(), v);
    return it == inputs.end() ? -1 : static_cast<int>(it - inputs.begin());
}

/// The epilogue after the anchor: post-ops (and a matmul bias) for nodes[first..].
struct Epilogue {
    std::vector<std::string> posts;
    int bias_arg = -1;  // a MatMul's constant [N] bias Add
    const ir::Value* result = nullptr;
};

/// The other operand of binary node `n` whose one operand is `cur`, or nullptr.
const ir::Value* other_operand(const ir::Node* n, const ir::Value* cur) {
    if (n->num_inputs() != 2) return nullptr;
    if (n->input(0) == cur && n->input(1) != cur) return n->input(1);
    if (n->input(1) == cur && n->input(0) != cur) return n->input(0);
    return nullptr;
}

/// Recognizes x * 0.5 * (1 + erf(x / sqrt 2)) at nodes[i..i+4] on x = cur.
bool erf_gelu_at(const std::vector<ir::Node*>& nodes, size_t i, const ir::Value* cur) {
    if (i + 5 > nodes.size()) return false;
    const ir::Node *d = nodes[i], *e = nodes[i + 1], *a = nodes[i + 2], *m = nodes[i + 3], *h = nodes[i + 4];
    const bool scaled = (d->op() == "Div" && d->input(0) == cur && near(scalar_constant(d->input(1)), std::sqrt(2.0))) ||
                        (d->op() == "Mul" && other_operand(d, cur) && near(scalar_constant(other_operand(d, cur)), std::sqrt(0.5)));
    return scaled && e->op() == "Erf" && e->input(0) == d->output(0) && a->op() == "Add" &&
           near(scalar_constant(other_operand(a, e->output(0))), 1.0) && m->op() == "Mul" &&
           other_operand(m, a->output(0)) == cur && h->op() == "Mul" &&
           near(scalar_constant(other_operand(h, m->output(0))), 0.5);
}

/// Recognizes x * sigmoid(x) (SiLU: "swish") and x * HardSigmoid(x) with PyTorch's 1/6, 1/2
/// ("hardswish", oneDNN's fixed constants) at nodes[i..i+1] on x = cur.
std::optional<std::string> swish_at(const std::vector<ir::Node*>& nodes, size_t i, const ir::Value* cur) {
    if (i + 2 > nodes.size()) return std::nullopt;
    const ir::Node *g = nodes[i], *m = nodes[i + 1];
    if (g->num_inputs() != 1 || g->input(0) != cur || m->op() != "Mul" || other_operand(m, g->output(0)) != cur)
        return std::nullopt;
    if (g->op() == "Sigmoid") return "swish";
    if (g->op() == "HardSigmoid" && near(g->attr_float("alpha", 0.2), 1.0 / 6) && near(g->attr_float("beta", 0.5), 0.5))
        return "hardswish";
    return std::nullopt;
}

/// The [lo, hi] bounds of a Clip node when both are constants (attributes or inputs).
std::optional<std::pair<double, double>> clip_bounds(const ir::Node* n) {
    double lo = n->attr_float("min", -3.4028234663852886e38), hi = n->attr_float("max", 3.4028234663852886e38);
    for (size_t i : {size_t{1}, size_t{2}}) {
        if (n->num_inputs() <= i || !n->input(i)) continue;
        auto v = scalar_constant(n->input(i));
        if (!v) return std::nullopt;
        (i == 1 ? lo : hi) = *v;
    }
    return std::pair{lo, hi};
}

/// Recognizes hard-swish written out, x * Clip(x + 3, 0, 6) / 6 (Paddle's export; the / 6 also
/// as * 1/6, on the product or on the Clip), at nodes[i..i+3] on x = cur.
bool clip_hardswish_at(const std::vector<ir::Node*>& nodes, size_t i, const ir::Value* cur) {
    if (i + 4 > nodes.size()) return false;
    const ir::Node *a = nodes[i], *c = nodes[i + 1], *p = nodes[i + 2], *q = nodes[i + 3];
    if (a->op() != "Add" || !near(scalar_constant(other_operand(a, cur)), 3.0) || c->op() != "Clip" ||
        c->input(0) != a->output(0))
        return false;
    auto b = clip_bounds(c);
    if (!b || b->first != 0.0 || !near(b->second, 6.0)) return false;
    auto sixth = [](const ir::Node* n, const ir::Value* v) {  // n is v / 6 or v * (1/6)
        return (n->op() == "Div" && n->input(0) == v && near(scalar_constant(n->input(1)), 6.0)) ||
               (n->op() == "Mul" && near(scalar_constant(other_operand(n, v)), 1.0 / 6));
    };
    if (p->op() == "Mul" && other_operand(p, c->output(0)) == cur) return sixth(q, p->output(0));
    return sixth(p, c->output(0)) && q->op() == "Mul" && other_operand(q, p->output(0)) == cur;
}

/// Appends the post-op y = a x + b, merged into a linear one just before it (one post-op, and
/// see params_consistent).
void push_linear(std::vector<std::string>& posts, double a, double b) {
    if (!posts.empty() && posts.back().rfind("linear:", 0) == 0) {
        char* end = nullptr;
        const double a0 = std::strtod(posts.back().c_str() + 7, &end);
        const double b0 = std::strtod(end + 1, nullptr);
        posts.back() = "linear:" + num(a * a0) + ":" + num(a * b0 + b);
        return;
    }
    posts.push_back("linear:" + num(a) + ":" + num(b));
}

/// Whether every parameterized post-op of one kind (linear, clip, leaky) has the same
/// parameters: oneDNN 2.6 computes two of one kind with different parameters in one primitive
/// wrongly (it seems to share their constants: conv, Relu, * 0.47, - 0.3 gave errors up to 15;
/// conv, Sigmoid, + 0.3, Relu, * 0.47 an error of 0.3; PP-OCR's hard-swish then a learned scale
/// and shift).
bool params_consistent(const std::vector<std::string>& posts) {
    for (size_t i = 0; i < posts.size(); ++i)
        for (size_t j = i + 1; j < posts.size(); ++j) {
            const std::string kind = posts[i].substr(0, posts[i].find(':'));
            if ((kind == "linear" || kind == "clip" || kind == "leaky") && posts[j].rfind(kind + ":", 0) == 0 &&
                posts[j] != posts[i])
                return false;
        }
    return true;
}

std::optional<Epilogue> match_epilogue(const std::vector<ir::Node*>& nodes, size_t first, const ir::Value* anchor_out,
                                       const std::vector<ir::Value*>& inputs, bool matmul_bias_ok) {
    Epilogue ep;
    const ir::Value* cur = anchor_out;
    const ir::TensorType type = anchor_out->type();
    for (size_t i = first; i < nodes.size(); ++i) {
        const ir::Node* n = nodes[i];
        if (n->num_outputs() != 1 || !(n->output(0)->type() == type)) return std::nullopt;
        const std::string& op = n->op();
        if (erf_gelu_at(nodes, i, cur)) {
            ep.posts.push_back("gelu_erf");
            i += 4;
            cur = nodes[i]->output(0);
            continue;
        }
        if (clip_hardswish_at(nodes, i, cur)) {
            ep.posts.push_back("hardswish");
            i += 3;
            cur = nodes[i]->output(0);
            continue;
        }
        if (auto sw = swish_at(nodes, i, cur)) {
            ep.posts.push_back(*sw);
            cur = nodes[++i]->output(0);
            continue;
        }
        const bool unary_on_cur = n->num_inputs() >= 1 && n->input(0) == cur;
        if (op == "Relu" && unary_on_cur) ep.posts.push_back("relu");
        else if (op == "HardSwish" && unary_on_cur) ep.posts.push_back("hardswish");
        else if (op == "HardSigmoid" && unary_on_cur) {  // max(0, min(1, alpha x + beta))
            push_linear(ep.posts, n->attr_float("alpha", 0.2), n->attr_float("beta", 0.5));
            ep.posts.push_back("clip:0:1");
        }
        else if (op == "LeakyRelu" && unary_on_cur) ep.posts.push_back("leaky:" + num(n->attr_float("alpha", 0.01)));
        else if (op == "Sigmoid" && unary_on_cur) ep.posts.push_back("sigmoid");
        else if (op == "Tanh" && unary_on_cur) ep.posts.push_back("tanh");
        else if (op == "Exp" && unary_on_cur) ep.posts.push_back("exp");
        else if (op == "Gelu" && unary_on_cur)
            ep.posts.push_back(n->attr_string("approximate", "none") == "tanh" ? "gelu_tanh" : "gelu_erf");
        else if (op == "Clip" && unary_on_cur) {
            auto b = clip_bounds(n);
            if (!b) return std::nullopt;
            ep.posts.push_back("clip:" + num(b->first) + ":" + num(b->second));
        } else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
            const ir::Value* other = other_operand(n, cur);
            if (!other) return std::nullopt;
            const bool cur_first = n->input(0) == cur;
            if (auto c = scalar_constant(other)) {
                if (op == "Add") push_linear(ep.posts, 1, *c);
                else if (op == "Sub") push_linear(ep.posts, cur_first ? 1 : -1, cur_first ? -*c : *c);
                else if (op == "Mul") push_linear(ep.posts, *c, 0);
                else if (cur_first && *c != 0) push_linear(ep.posts, 1.0 / *c, 0);
                else return std::nullopt;
            } else if ((op == "Add" || op == "Mul") && f32(other) && other->type() == type) {
                int arg = arg_index(inputs, other);
                if (arg < 0) return std::nullopt;
                ep.posts.push_back(std::string(op == "Add" ? "add:" : "mul:") + std::to_string(arg));
            } else if (op == "Add" && matmul_bias_ok && i == first && static_f32(other)) {
                // A bias [N] (or [1, .., 1, N]) along the matmul's last dim: a constant, or a
                // unit input (a parameter of a training step) read on every call.
                Shape s = other->type().static_shape();
                if (s.empty() || s.back() != type.static_shape().back() || shape_numel(s) != s.back()) return std::nullopt;
                ep.bias_arg = arg_index(inputs, other);
                if (ep.bias_arg < 0) return std::nullopt;
            } else {
                return std::nullopt;
            }
        } else {
            return std::nullopt;
        }
        cur = n->output(0);
    }
    if (!params_consistent(ep.posts)) return std::nullopt;
    ep.result = cur;
    return ep;
}

/// The kernel `name` with parameters `p` and the epilogue's post-ops.
ExternChoice choice(const char* name, Pairs p, const Epilogue& ep) {
    std::string post;
    for (const auto& s : ep.posts) post += (post.empty() ? "" : ",") + s;
    if (!post.empty()) p.push_back({"post", post});
    ExternChoice c{name, p};
    // The first residual Add runs as oneDNN's sum post-op on what dst holds: in place, unless
    // the residual is also another operand of the kernel (conv(x) + x reads x while writing).
    for (const auto& s : ep.posts) {
        if (s.rfind("add:", 0) != 0) continue;
        const std::string arg = s.substr(4);
        bool other_use = false;
        for (const auto& [key, v] : p)
            other_use |= v == arg && (key == "x" || key == "w" || key == "b" || key == "a" || key == "bm" || key == "bias");
        if (!other_use) c.inplace_input = std::stoi(arg);
        break;
    }
    return c;
}

/// The taps [first, first + count) of a window dim of k taps (dilation d, stride s, begin pad
/// pb) that read the input (size `in`) for some output of `out`; count 0 when none does. A
/// dilated conv wider than its input (DeepLabV3's rate-36 3x3 on 33x33) reads only padding at
/// its outer taps.
std::pair<int64_t, int64_t> used_taps(int64_t k, int64_t d, int64_t s, int64_t pb, int64_t in, int64_t out) {
    int64_t first = -1, last = -1;
    for (int64_t j = 0; j < k; ++j) {
        const int64_t lo = j * d - pb;                       // input index of output 0
        const int64_t o = lo >= 0 ? 0 : (-lo + s - 1) / s;   // the first output reading at >= 0
        if (o < out && lo + o * s < in) {
            if (first < 0) first = j;
            last = j;
        }
    }
    return {first < 0 ? 0 : first, first < 0 ? 0 : last - first + 1};
}

/// oneDNN's end pads for a window of `taps` taps from begin pads `pb` (oneDNN's output size is
/// floor((in + pb + pe - ext) / s) + 1, as ONNX's): the least that covers the last window (0 when
/// the last input rows are not read, as in a strided 1x1 conv); empty when no end pad gives
/// `out` or a begin pad is negative.
std::vector<int64_t> end_pads(const op::WindowGeometry& g, const std::vector<int64_t>& in,
                              const std::vector<int64_t>& taps, const std::vector<int64_t>& pb,
                              const std::vector<int64_t>& out) {
    std::vector<int64_t> pe(in.size());
    for (size_t d = 0; d < in.size(); ++d) {
        const int64_t ext = (taps[d] - 1) * g.dilations[d] + 1;
        pe[d] = std::max<int64_t>(0, (out[d] - 1) * g.strides[d] + ext - in[d] - pb[d]);
        if (pb[d] < 0 || (in[d] + pb[d] + pe[d] - ext) / g.strides[d] + 1 != out[d]) return {};
    }
    return pe;
}

/// Window parameters of a conv node with input spatial `in`, kernel `k` and output `out`: false
/// when oneDNN cannot express them (end pads that would be negative). Taps that only read
/// padding are left out (taps_begin / taps, the begin pads shifted) where that stays expressible.
bool window_params(const ir::Node& n, const std::vector<int64_t>& in, const std::vector<int64_t>& k,
                   const std::vector<int64_t>& out, Pairs& p) {
    op::WindowGeometry g = op::window_geometry(n, in, k, false);
    if (g.out != out) return false;
    std::vector<int64_t> first(k.size()), taps(k.size()), pb(k.size());
    bool trimmed = false;
    for (size_t d = 0; d < k.size(); ++d) {
        auto [f, c] = used_taps(k[d], g.dilations[d], g.strides[d], g.pads_begin[d], in[d], out[d]);
        if (c == 0) f = 0, c = k[d];  // every tap reads padding: the output is the bias
        first[d] = f, taps[d] = c, pb[d] = g.pads_begin[d] - f * g.dilations[d];
        trimmed |= c != k[d];
    }
    std::vector<int64_t> pe = trimmed ? end_pads(g, in, taps, pb, out) : std::vector<int64_t>{};
    if (pe.empty()) {  // the whole window
        trimmed = false;
        first.assign(k.size(), 0);
        taps = k;
        pb = g.pads_begin;
        pe = end_pads(g, in, k, pb, out);
        if (pe.empty()) return false;
    }
    p.push_back({"strides", join(g.strides)});
    p.push_back({"dilations", join(g.dilations)});
    p.push_back({"pads_begin", join(pb)});
    p.push_back({"pads_end", join(pe)});
    if (trimmed) {
        p.push_back({"taps_begin", join(first)});
        p.push_back({"taps", join(taps)});
    }
    return true;
}

/// The epilogue of a (de)conv unit, checked against the output layout: oneDNN computes in
/// nChw16c, another output layout is a reorder after the primitive. The first residual Add
/// (oneDNN's sum post-op) is reordered in before it; a further binary post-op, read in the
/// output's layout, cannot follow.
std::optional<Epilogue> conv_epilogue(const std::vector<ir::Node*>& nodes, const std::vector<ir::Value*>& inputs,
                                      const std::vector<ir::Value*>& outputs, const ir::Value* y, bool dst16) {
    std::optional<Epilogue> ep = match_epilogue(nodes, 1, y, inputs, false);
    if (!ep || outputs.size() != 1 || outputs[0] != ep->result) return std::nullopt;
    bool first_add = true;
    for (const std::string& post : ep->posts) {
        const bool add = post.rfind("add:", 0) == 0, binary = add || post.rfind("mul:", 0) == 0;
        if (!dst16 && binary && !(add && first_add)) return std::nullopt;
        first_add &= !add;
    }
    return ep;
}

/// The parameters every symbolic (de)conv shares: the window as the attributes give it (no
/// taps left out: which taps read only padding depends on the size), the logical src / dst dims
/// (0 at symbolic ones), the group count and the argument indices.
Pairs symbolic_conv_pairs(const ir::Node* c, const op::WindowGeometry& g, const std::vector<int64_t>& k,
                          const std::vector<int64_t>& src, const std::vector<int64_t>& dst, int64_t groups,
                          const std::vector<ir::Value*>& inputs) {
    const ir::Value *x = c->input(0), *w = c->input(1);
    const ir::Value* b = c->num_inputs() > 2 ? c->input(2) : nullptr;
    Pairs p = {{"strides", join(g.strides)},       {"dilations", join(g.dilations)},
               {"pads_begin", join(g.pads_begin)}, {"pads_end", join(g.pads_end)},
               {"src", join(src)},                 {"dst", join(dst)},
               {"kernel", join(k)},                {"groups", std::to_string(groups)},
               {"x", std::to_string(arg_index(inputs, x))}, {"w", std::to_string(arg_index(inputs, w))}};
    if (b) p.push_back({"b", std::to_string(arg_index(inputs, b))});
    p.push_back({"y", std::to_string(inputs.size())});
    return p;
}

/// The logical dims [N, C, spatial...] of a symbolic conv activation in Kiln's layout (plain
/// NC..., or blocked [N, C/c, H, W, c]), 0 at symbolic dims.
std::vector<int64_t> logical_template_dims(const ir::Value* v, bool blocked) {
    std::vector<int64_t> d = template_dims(v);
    if (!blocked) return d;
    return {d[0], d[1] * d[4], d[2], d[3]};
}

/// A convolution on symbolic shapes (a symbolic compile: docs/dynamic_shapes.md): an ONNX Conv
/// on plain NC... activations, or the layout pass's blocked KilnConv2dNCHWc /
/// KilnDepthwiseConv2dNCHWc, whose batch and spatial dims are dims of the run; static weights
/// and channels. The runtime makes the primitive per shape (runtime/extern_at_shapes.h). SAME
/// padding with a stride is left out (its pads follow the input size).
std::optional<ExternChoice> match_symbolic_conv(const std::vector<ir::Node*>& nodes,
                                                const std::vector<ir::Value*>& inputs,
                                                const std::vector<ir::Value*>& outputs) {
    const ir::Node* c = nodes[0];
    const std::string& op = c->op();
    const ir::Value *x = c->input(0), *w = c->input(1), *y = c->output(0);
    const ir::Value* b = c->num_inputs() > 2 ? c->input(2) : nullptr;
    const bool blocked = op != "Conv";
    const size_t rank = blocked ? 5 : w->type().shape.size();
    if (!static_f32(w) || (b && !static_f32(b)) || rank < 3 || rank > 5 || !symbolic_activation(x, rank) ||
        !symbolic_activation(y, rank) || (blocked && (!x->type().shape[4].is_static() || !y->type().shape[4].is_static())))
        return std::nullopt;
    const Shape ws = w->type().static_shape();
    const std::vector<int64_t> src = logical_template_dims(x, blocked), dst = logical_template_dims(y, blocked);
    int64_t groups = c->attr_int("group", 1);
    std::vector<int64_t> k;
    Pairs p;
    if (op == "KilnConv2dNCHWc") {  // X [N, C/ci, H, W, ci], W [M/co, C/G/ci, KH, KW, ci, co]
        const int64_t ci = x->type().shape[4].value, co = y->type().shape[4].value;
        if ((ci != 8 && ci != 16 && ci != 1 && x->type().shape[1].value != 1) ||
            (co != 8 && co != 16 && y->type().shape[1].value != 1) ||
            ws.size() != 6)
            return std::nullopt;
        k = {ws[2], ws[3]};
        p = {{"src_block", std::to_string(ci)}, {"dst_block", std::to_string(co)},
             {"wei", "blocked:" + std::to_string(ws[4]) + ":" + std::to_string(ws[5])}};
    } else if (op == "KilnDepthwiseConv2dNCHWc") {  // X [N, C/c, H, W, c], W [C/c, KH, KW, c]
        const int64_t cb = x->type().shape[4].value;
        if ((cb != 8 && cb != 16) || ws.size() != 4) return std::nullopt;
        k = {ws[1], ws[2]};
        groups = src[1];
        p = {{"src_block", std::to_string(cb)}, {"dst_block", std::to_string(cb)}, {"wei", "depthwise:" + std::to_string(ws[3])}};
    } else {  // ONNX Conv, W [M, C/G, K...]
        if (groups < 1 || src[1] % groups || dst[1] % groups || ws[1] * groups != src[1] || ws[0] != dst[1])
            return std::nullopt;
        k.assign(ws.begin() + 2, ws.end());
        p = {{"wei", "oihw"}};
    }
    const op::WindowGeometry g = op::window_geometry(*c, std::vector<int64_t>(k.size(), int64_t{1} << 20), k, false);
    if (c->attr_string("auto_pad", "NOTSET").rfind("SAME", 0) == 0)
        for (int64_t st : g.strides)
            if (st != 1) return std::nullopt;
    const bool dst16 = blocked && y->type().shape[4].value == 16;
    std::optional<Epilogue> ep = conv_epilogue(nodes, inputs, outputs, y, dst16);
    if (!ep) return std::nullopt;
    const Pairs common = symbolic_conv_pairs(c, g, k, src, dst, groups, inputs);
    p.insert(p.end(), common.begin(), common.end());
    return choice("dnnl_conv", std::move(p), *ep);
}

/// An ONNX ConvTranspose on symbolic shapes (as match_symbolic_conv): its pads do not follow
/// the size (explicit, or SAME: output_padding + ext - s in all), an explicit output_shape is
/// left out.
std::optional<ExternChoice> match_symbolic_conv_transpose(const std::vector<ir::Node*>& nodes,
                                                          const std::vector<ir::Value*>& inputs,
                                                          const std::vector<ir::Value*>& outputs) {
    const ir::Node* c = nodes[0];
    const ir::Value *x = c->input(0), *w = c->input(1), *y = c->output(0);
    const ir::Value* b = c->num_inputs() > 2 ? c->input(2) : nullptr;
    const size_t rank = w->type().shape.size();
    if (!static_f32(w) || (b && !static_f32(b)) || rank < 3 || rank > 5 || !symbolic_activation(x, rank) ||
        !symbolic_activation(y, rank) || !c->attr_ints("output_shape").empty())
        return std::nullopt;
    if (nodes.size() != 1 || outputs.size() != 1 || outputs[0] != y) return std::nullopt;  // no epilogue (below)
    const Shape ws = w->type().static_shape();
    const int64_t groups = c->attr_int("group", 1);
    if (groups < 1 || ws[0] != x->type().shape[1].value || ws[1] * groups != y->type().shape[1].value)
        return std::nullopt;
    const std::vector<int64_t> k(ws.begin() + 2, ws.end());
    const op::WindowGeometry g = op::conv_transpose_geometry(*c, std::vector<int64_t>(k.size(), int64_t{1} << 20), k);
    for (int64_t pb : g.pads_begin)
        if (pb < 0) return std::nullopt;
    Pairs p = symbolic_conv_pairs(c, g, k, template_dims(x), template_dims(y), groups, inputs);
    p.insert(p.begin(), {{"kind", "deconv"}, {"wei", "iohw"}});
    return choice("dnnl_conv", std::move(p), Epilogue{});
}

/// ConvTranspose (1-D to 3-D, any groups) on plain NC... tensors: oneDNN's deconvolution, whose
/// weights [G, M/G, C/G, K...] are a strided view of ONNX's [C, M/G, K...].
std::optional<ExternChoice> match_conv_transpose(const std::vector<ir::Node*>& nodes,
                                                 const std::vector<ir::Value*>& inputs,
                                                 const std::vector<ir::Value*>& outputs) {
    const ir::Node* c = nodes[0];
    const ir::Value *x = c->input(0), *w = c->input(1), *y = c->output(0);
    const ir::Value* b = c->num_inputs() > 2 ? c->input(2) : nullptr;
    if (symbolic_activation(x, w->type().rank()) || symbolic_activation(y, w->type().rank()))
        return match_symbolic_conv_transpose(nodes, inputs, outputs);
    if (!static_f32(x) || !static_f32(w) || !static_f32(y) || (b && !static_f32(b))) return std::nullopt;
    const Shape xs = x->type().static_shape(), ws = w->type().static_shape(), ys = y->type().static_shape();
    const int64_t groups = c->attr_int("group", 1);
    if (xs.size() < 3 || xs.size() > 5 || ws.size() != xs.size() || ys.size() != xs.size() || groups < 1 ||
        ws[0] != xs[1] || xs[1] % groups || ws[1] * groups != ys[1])
        return std::nullopt;
    const std::vector<int64_t> in(xs.begin() + 2, xs.end()), k(ws.begin() + 2, ws.end());
    op::WindowGeometry g = op::conv_transpose_geometry(*c, in, k);
    if (g.out != std::vector<int64_t>(ys.begin() + 2, ys.end())) return std::nullopt;
    // A negative end pad (output_padding beyond ONNX's end pad: rows only the bias reaches) is
    // fine for oneDNN's deconvolution; a negative begin pad (cropping by output_shape) is not
    // matched.
    for (size_t d = 0; d < k.size(); ++d)
        if (g.pads_begin[d] < 0) return std::nullopt;
    // No fused epilogue: oneDNN 2.6 applies a deconv's post-ops in a reference loop (a ReLU on
    // 32x128x128 cost 31 ms over a 2.3 ms deconv); the ReLU runs as a kernel of its own
    // (compiler::detach_dnnl_anchors).
    if (nodes.size() != 1 || outputs.size() != 1 || outputs[0] != y) return std::nullopt;
    Pairs p = {{"kind", "deconv"},
               {"wei", "iohw"},
               {"strides", join(g.strides)},
               {"dilations", join(g.dilations)},
               {"pads_begin", join(g.pads_begin)},
               {"pads_end", join(g.pads_end)},
               {"src", join(xs)},
               {"dst", join(ys)},
               {"kernel", join(k)},
               {"groups", std::to_string(groups)},
               {"x", std::to_string(arg_index(inputs, x))},
               {"w", std::to_string(arg_index(inputs, w))}};
    if (b) p.push_back({"b", std::to_string(arg_index(inputs, b))});
    p.push_back({"y", std::to_string(inputs.size())});
    return choice("dnnl_conv", std::move(p), Epilogue{});
}

std::optional<ExternChoice> match_conv(const std::vector<ir::Node*>& nodes, const std::vector<ir::Value*>& inputs,
                                       const std::vector<ir::Value*>& outputs) {
    const ir::Node* c = nodes[0];
    const std::string& op = c->op();
    const ir::Value *x = c->input(0), *w = c->input(1);
    const ir::Value* b = c->num_inputs() > 2 ? c->input(2) : nullptr;
    const ir::Value* y = c->output(0);
    if (x && y && (!x->type().is_static() || !y->type().is_static())) return match_symbolic_conv(nodes, inputs, outputs);
    if (!static_f32(x) || !static_f32(w) || !static_f32(y) || (b && !static_f32(b))) return std::nullopt;
    // Kiln's blocked weights are unpacked once, so those anchors need constant weights; an ONNX
    // Conv's plain oihw weights may be computed (a training step's parameters, a data
    // gradient's flipped weights): the kernel reorders them on every call.
    if (op != "Conv" && !w->is_constant()) return std::nullopt;
    const Shape xs = x->type().static_shape(), ws = w->type().static_shape(), ys = y->type().static_shape();
    Pairs p;
    std::vector<int64_t> src, dst, kernel;
    int64_t groups = 1;
    if (op == "KilnConv2dNCHWc") {  // X [N, C/ci, H, W, ci], W [M/co, C/ci, KH, KW, ci, co]
        if (xs.size() != 5 || ws.size() != 6) return std::nullopt;
        // Blocks of 8 or 16, one block of every channel (NHWC), or blocks of one channel (NCHW:
        // an image into the first conv, transform_layout).
        if (xs[4] != 8 && xs[4] != 16 && xs[4] != 1 && xs[1] != 1) return std::nullopt;
        if (ys[4] != 8 && ys[4] != 16 && ys[1] != 1) return std::nullopt;
        src = {xs[0], xs[1] * xs[4], xs[2], xs[3]};
        dst = {ys[0], ys[1] * ys[4], ys[2], ys[3]};
        kernel = {ws[2], ws[3]};
        p = {{"src_block", std::to_string(xs[4])}, {"dst_block", std::to_string(ys[4])},
             {"wei", "blocked:" + std::to_string(ws[4]) + ":" + std::to_string(ws[5])}};
        groups = c->attr_int("group", 1);  // W [M/co, C/G/ci, ...]: each group whole blocks
    } else if (op == "KilnDepthwiseConv2dNCHWc") {  // X [N, C/c, H, W, c], W [C/c, KH, KW, c]
        if (xs.size() != 5 || ws.size() != 4 || (xs[4] != 8 && xs[4] != 16 && xs[1] != 1)) return std::nullopt;
        src = {xs[0], xs[1] * xs[4], xs[2], xs[3]};
        dst = {ys[0], ys[1] * ys[4], ys[2], ys[3]};
        kernel = {ws[1], ws[2]};
        groups = src[1];
        p = {{"src_block", std::to_string(xs[4])}, {"dst_block", std::to_string(ys[4])},
             {"wei", "depthwise:" + std::to_string(ws[3])}};
    } else {  // ONNX Conv, NC + 1 to 3 spatial dims, W [M, C/G, K...]
        if (xs.size() < 3 || xs.size() > 5 || ws.size() != xs.size() || ys.size() != xs.size()) return std::nullopt;
        src = xs;
        dst = ys;
        kernel.assign(ws.begin() + 2, ws.end());
        groups = c->attr_int("group", 1);
        if (groups < 1 || src[1] % groups || dst[1] % groups || ws[1] * groups != src[1]) return std::nullopt;
        p = {{"wei", "oihw"}};
    }
    if (b && shape_numel(b->type().static_shape()) != dst[1]) return std::nullopt;
    if (!window_params(*c, {src.begin() + 2, src.end()}, kernel, {dst.begin() + 2, dst.end()}, p)) return std::nullopt;
    const bool dst16 = op != "Conv" && ys[4] == 16;
    std::optional<Epilogue> ep = conv_epilogue(nodes, inputs, outputs, y, dst16);
    if (!ep) return std::nullopt;
    p.push_back({"src", join(src)});
    p.push_back({"dst", join(dst)});
    p.push_back({"kernel", join(kernel)});
    p.push_back({"groups", std::to_string(groups)});
    p.push_back({"x", std::to_string(arg_index(inputs, x))});
    p.push_back({"w", std::to_string(arg_index(inputs, w))});
    if (b) p.push_back({"b", std::to_string(arg_index(inputs, b))});
    p.push_back({"y", std::to_string(inputs.size())});
    return choice("dnnl_conv", std::move(p), *ep);
}

std::optional<ExternChoice> match_matmul(const std::vector<ir::Node*>& nodes, const std::vector<ir::Value*>& inputs,
                                         const std::vector<ir::Value*>& outputs) {
    const ir::Node* mm = nodes[0];
    const ir::Value *a = mm->input(0), *bm = mm->input(1), *y = mm->output(0);
    if (!static_f32(a) || !static_f32(bm) || !static_f32(y)) return std::nullopt;
    Shape as = a->type().static_shape(), bs = bm->type().static_shape(), ys = y->type().static_shape();
    int64_t batch = 1, m, k, n;
    std::vector<int64_t> astr(3), bstr(3);
    int gemm_c_arg = -1;
    int64_t packed_nb = 0;
    if (mm->op() == "KilnMatMulPackedB") {  // A [..., M, K] x Bp [N/nb, K, nb] (+ beta * C)
        if (as.size() < 2 || bs.size() != 3 || !bm->is_constant() || mm->attr_float("alpha", 1.0) != 1.0) return std::nullopt;
        k = as.back();
        n = mm->attr_int("n", 0);
        m = shape_numel(as) / k;
        packed_nb = bs[2];
        if (bs[1] != k || bs[0] * packed_nb < n || n != ys.back()) return std::nullopt;
        astr = {m * k, k, 1};
        bstr = {0, n, 1};  // of B once unpacked to [K, N]
        const ir::Value* c = mm->num_inputs() > 2 ? mm->input(2) : nullptr;
        if (c) {
            if (!c->is_constant() || !static_f32(c) || mm->attr_float("beta", 1.0) != 1.0) return std::nullopt;
            Shape cs = c->type().static_shape();
            if (shape_numel(cs) != n || (!cs.empty() && cs.back() != n)) return std::nullopt;
            gemm_c_arg = arg_index(inputs, c);
        }
    } else if (mm->op() == "Gemm") {
        if (as.size() != 2 || bs.size() != 2 || mm->attr_float("alpha", 1.0) != 1.0) return std::nullopt;
        const bool ta = mm->attr_int("transA", 0), tb = mm->attr_int("transB", 0);
        m = ta ? as[1] : as[0];
        k = ta ? as[0] : as[1];
        n = tb ? bs[0] : bs[1];
        astr = {m * k, ta ? 1 : k, ta ? m : 1};
        bstr = {0, tb ? 1 : n, tb ? k : 1};
        const ir::Value* c = mm->num_inputs() > 2 ? mm->input(2) : nullptr;
        if (c) {  // beta * C as a bias [N] broadcast along rows (a constant, or read per call)
            if (!static_f32(c) || mm->attr_float("beta", 1.0) != 1.0) return std::nullopt;
            Shape cs = c->type().static_shape();
            if (shape_numel(cs) != n || (!cs.empty() && cs.back() != n)) return std::nullopt;
            gemm_c_arg = arg_index(inputs, c);
        }
    } else {  // MatMul: A [..., M, K] x B [..., K, N]
        if (as.size() < 2 || bs.size() < 2 || ys.size() < 2) return std::nullopt;
        m = as[as.size() - 2];
        k = as.back();
        n = bs.back();
        for (size_t i = 0; i + 2 < ys.size(); ++i) batch *= ys[i];
        int64_t a_batch = shape_numel(as) / (m * k), b_batch = shape_numel(bs) / (k * n);
        if (b_batch == 1 && a_batch == batch) {  // one B for every row block: fold the batch into M
            m *= batch;
            batch = 1;
        } else if (a_batch != batch || b_batch != batch || as.size() != ys.size() || bs.size() != ys.size()) {
            return std::nullopt;
        }
        astr = {m * k, k, 1};
        bstr = {b_batch == 1 ? 0 : k * n, n, 1};
    }
    std::optional<Epilogue> ep = match_epilogue(nodes, 1, y, inputs, gemm_c_arg < 0);
    if (!ep || outputs.size() != 1 || outputs[0] != ep->result) return std::nullopt;
    const int bias = gemm_c_arg >= 0 ? gemm_c_arg : ep->bias_arg;
    Pairs p = {{"a", std::to_string(arg_index(inputs, a))}, {"bm", std::to_string(arg_index(inputs, bm))},
               {"out", std::to_string(inputs.size())},      {"batch", std::to_string(batch)},
               {"m", std::to_string(m)},                    {"k", std::to_string(k)},
               {"n", std::to_string(n)},                    {"a_strides", join(astr)},
               {"b_strides", join(bstr)}};
    if (bias >= 0) p.push_back({"bias", std::to_string(bias)});
    if (packed_nb) p.push_back({"b_packed", std::to_string(packed_nb)});
    return choice("dnnl_matmul", std::move(p), *ep);
}

}  // namespace

std::optional<ExternChoice> match_dnnl(const std::vector<ir::Node*>& nodes, const std::vector<ir::Value*>& inputs,
                                       const std::vector<ir::Value*>& outputs) {
    if (nodes.empty()) return std::nullopt;
    const std::string& op = nodes[0]->op();
    if (op == "KilnConv2dNCHWc" || op == "KilnDepthwiseConv2dNCHWc" || op == "Conv") return match_conv(nodes, inputs, outputs);
    if (op == "ConvTranspose") return match_conv_transpose(nodes, inputs, outputs);
    if (op == "KilnConvGradData" || op == "KilnConvGradWeight") return match_conv_backward(nodes, inputs, outputs);
    if (op == "MatMul" || op == "Gemm" || op == "KilnMatMulPackedB") return match_matmul(nodes, inputs, outputs);
    if (op == "RNN" || op == "GRU" || op == "LSTM") return match_rnn(nodes, inputs, outputs);
    if (op == "QLinearConv" || op == "QLinearMatMul") return match_dnnl_int8(nodes, inputs, outputs);
    for (const ir::Node* n : nodes)  // the dynamic-quantization rescale, a residual's DequantizeLinear may come first
        if (n->op() == "MatMulInteger" || n->op() == "QLinearConv") return match_dnnl_int8(nodes, inputs, outputs);
    return std::nullopt;
}

std::optional<DnnlEpilogue> match_dnnl_epilogue(const std::vector<ir::Node*>& nodes, size_t first,
                                                const ir::Value* anchor_out, const std::vector<ir::Value*>& inputs) {
    std::optional<Epilogue> ep = match_epilogue(nodes, first, anchor_out, inputs, true);
    if (!ep) return std::nullopt;
    return DnnlEpilogue{ep->posts, ep->bias_arg, ep->result};
}

}  // namespace kiln::topi
