#include "topi/dnnl_int8_match.h"

#include <algorithm>
#include <array>

#include "op/pool_compute.h"
#include "op/window.h"

namespace kiln::topi {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

std::string join(const std::vector<int64_t>& v) {
    std::string s;
    for (int64_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
    return s;
}

bool is_q8(DType t) { return t == DType::kUInt8 || t == DType::kInt8; }

const char* q8_name(DType t) { return t == DType::kUInt8 ? "u8" : "s8"; }

/// A constant of dtype `t` and `n` elements (any shape), or nullptr.
const Tensor* constant_of(const ir::Value* v, DType t, int64_t n) {
    if (!v || !v->is_constant() || v->type().dtype != t) return nullptr;
    const Tensor& c = v->constant();
    return c.numel() == n ? &c : nullptr;
}

int arg_of(const std::vector<ir::Value*>& inputs, const ir::Value* v) {
    auto it = std::find(inputs.begin(), inputs.end(), v);
    return it == inputs.end() ? -1 : static_cast<int>(it - inputs.begin());
}

bool all_zero(const Tensor& t) {
    for (int64_t i = 0; i < t.numel(); ++i)
        if (t.get_i64(i) != 0) return false;
    return true;
}

/// Window parameters (oneDNN's end pads: the least covering the last window, as ONNX's output
/// size implies); false where no end pad gives ONNX's output size.
bool window_params(const ir::Node& n, const Shape& xs, const Shape& ws, const Shape& ys, Pairs& p) {
    const std::vector<int64_t> in = {xs[2], xs[3]}, k = {ws[2], ws[3]}, out = {ys[2], ys[3]};
    op::WindowGeometry g = op::window_geometry(n, in, k, false);
    if (g.out != out) return false;
    std::vector<int64_t> pe(2);
    for (size_t d = 0; d < 2; ++d) {
        const int64_t ext = (k[d] - 1) * g.dilations[d] + 1;
        // 0 where the last input rows are not read (a strided 1x1 conv).
        pe[d] = std::max<int64_t>(0, (out[d] - 1) * g.strides[d] + ext - in[d] - g.pads_begin[d]);
        if (g.pads_begin[d] < 0 || (in[d] + g.pads_begin[d] + pe[d] - ext) / g.strides[d] + 1 != out[d]) return false;
    }
    p.push_back({"strides", join(g.strides)});
    p.push_back({"dilations", join(g.dilations)});
    p.push_back({"pads_begin", join(g.pads_begin)});
    p.push_back({"pads_end", join(pe)});
    return true;
}

std::optional<ExternChoice> match_qlinear_conv(const ir::Node& c, const std::vector<ir::Value*>& inputs) {
    const ir::Value *x = c.input(0), *w = c.input(3), *y = c.output(0);
    if (!x->type().is_static() || !w->type().is_static() || !y->type().is_static()) return std::nullopt;
    const Shape xs = x->type().static_shape(), ws = w->type().static_shape(), ys = y->type().static_shape();
    if (xs.size() != 4 || ws.size() != 4 || ys.size() != 4 || !is_q8(x->type().dtype) || !is_q8(y->type().dtype) ||
        w->type().dtype != DType::kInt8 || !w->is_constant())
        return std::nullopt;
    const int64_t m = ys[1], groups = c.attr_int("group", 1);
    if (groups < 1 || xs[1] % groups || m % groups || ws[1] * groups != xs[1]) return std::nullopt;
    const Tensor* ws_scale = constant_of(c.input(4), DType::kFloat32, m);
    const bool per_channel = ws_scale != nullptr && m != 1;
    if (!ws_scale) ws_scale = constant_of(c.input(4), DType::kFloat32, 1);
    const Tensor* wz = constant_of(c.input(5), DType::kInt8, per_channel ? m : 1);
    if (!wz && per_channel) wz = constant_of(c.input(5), DType::kInt8, 1);
    const Tensor* xz = constant_of(c.input(2), x->type().dtype, 1);
    const Tensor* yz = constant_of(c.input(7), y->type().dtype, 1);
    if (!ws_scale || !wz || !all_zero(*wz) || !xz || !yz || !constant_of(c.input(1), DType::kFloat32, 1) ||
        !constant_of(c.input(6), DType::kFloat32, 1))
        return std::nullopt;
    const ir::Value* b = c.num_inputs() > 8 ? c.input(8) : nullptr;
    if (b && !constant_of(b, DType::kInt32, m)) return std::nullopt;
    auto arg = [&](const ir::Value* v) {
        auto it = std::find(inputs.begin(), inputs.end(), v);
        return std::to_string(it == inputs.end() ? -1 : it - inputs.begin());
    };
    Pairs p = {{"x", arg(x)},
               {"xs", arg(c.input(1))},
               {"xz", arg(c.input(2))},
               {"w", arg(w)},
               {"ws", arg(c.input(4))},
               {"wz", arg(c.input(5))},
               {"ys", arg(c.input(6))},
               {"yz", arg(c.input(7))},
               {"y", std::to_string(inputs.size())},
               {"src", join(xs)},
               {"dst", join(ys)},
               {"kernel", join({ws[2], ws[3]})},
               {"groups", std::to_string(groups)},
               {"x_zp", std::to_string(xz->get_i64(0))},
               {"y_zp", std::to_string(yz->get_i64(0))},
               {"per_channel", per_channel ? "1" : "0"},
               {"x_type", q8_name(x->type().dtype)},
               {"y_type", q8_name(y->type().dtype)}};
    if (b) p.push_back({"b", arg(b)});
    if (!window_params(c, xs, ws, ys, p)) return std::nullopt;
    for (const auto& [key, v] : p)
        if (v == "-1") return std::nullopt;  // an operand that is not an argument of the unit
    return ExternChoice{"dnnl_qconv", std::move(p)};
}

/// QLinearMatMul: A [..., M, K] x a constant s8 B [K, N] with zero zero points.
std::optional<ExternChoice> match_qlinear_matmul(const ir::Node& mm, const std::vector<ir::Value*>& inputs) {
    const ir::Value *a = mm.input(0), *b = mm.input(3), *y = mm.output(0);
    if (!a->type().is_static() || !b->type().is_static() || !y->type().is_static()) return std::nullopt;
    const Shape as = a->type().static_shape(), bs = b->type().static_shape();
    if (as.size() < 2 || bs.size() != 2 || as.back() != bs[0] || !is_q8(a->type().dtype) || !is_q8(y->type().dtype) ||
        b->type().dtype != DType::kInt8 || !b->is_constant())
        return std::nullopt;
    const int64_t k = bs[0], n = bs[1], m = shape_numel(as) / k;
    const Tensor* b_scale = constant_of(mm.input(4), DType::kFloat32, n);
    const bool per_column = b_scale != nullptr && n != 1;
    if (!b_scale) b_scale = constant_of(mm.input(4), DType::kFloat32, 1);
    const Tensor* bz = constant_of(mm.input(5), DType::kInt8, per_column ? n : 1);
    if (!bz && per_column) bz = constant_of(mm.input(5), DType::kInt8, 1);
    const Tensor* az = constant_of(mm.input(2), a->type().dtype, 1);
    const Tensor* yz = constant_of(mm.input(7), y->type().dtype, 1);
    if (!b_scale || !bz || !all_zero(*bz) || !az || !yz || !constant_of(mm.input(1), DType::kFloat32, 1) ||
        !constant_of(mm.input(6), DType::kFloat32, 1))
        return std::nullopt;
    auto arg = [&](const ir::Value* v) {
        auto it = std::find(inputs.begin(), inputs.end(), v);
        return std::to_string(it == inputs.end() ? -1 : it - inputs.begin());
    };
    Pairs p = {{"a", arg(a)},           {"as", arg(mm.input(1))},  {"az", arg(mm.input(2))},
               {"b", arg(b)},           {"bs", arg(mm.input(4))},  {"bz", arg(mm.input(5))},
               {"ys", arg(mm.input(6))}, {"yz", arg(mm.input(7))}, {"y", std::to_string(inputs.size())},
               {"m", std::to_string(m)}, {"k", std::to_string(k)}, {"n", std::to_string(n)},
               {"a_zp", std::to_string(az->get_i64(0))}, {"y_zp", std::to_string(yz->get_i64(0))},
               {"per_column", per_column ? "1" : "0"}, {"a_type", q8_name(a->type().dtype)},
               {"y_type", q8_name(y->type().dtype)}};
    for (const auto& [key, v] : p)
        if (v == "-1") return std::nullopt;
    return ExternChoice{"dnnl_qmatmul", std::move(p)};
}

/// `v` = DequantizeLinear of a unit input with one-element parameters: (q, scale, zero point).
std::optional<std::array<const ir::Value*, 3>> dequantized_input(const ir::Value* v, const std::vector<const ir::Node*>& in_unit) {
    const ir::Node* n = v->producer();
    if (!n || n->op() != "DequantizeLinear" || std::find(in_unit.begin(), in_unit.end(), n) == in_unit.end() ||
        !is_q8(n->input(0)->type().dtype) || !constant_of(n->input(1), DType::kFloat32, 1) || !n->input(2) ||
        !constant_of(n->input(2), n->input(0)->type().dtype, 1))
        return std::nullopt;
    return std::array<const ir::Value*, 3>{n->input(0), n->input(1), n->input(2)};
}


/// The operand of binary `n` other than `v`, or nullptr.
const ir::Value* other_of(const ir::Node* n, const ir::Value* v) {
    if (n->num_inputs() != 2) return nullptr;
    if (n->input(0) == v && n->input(1) != v) return n->input(1);
    if (n->input(1) == v && n->input(0) != v) return n->input(0);
    return nullptr;
}

/// A float32 scale of one element or one per column (numel n, last dim n).
bool column_scale(const ir::Value* v, int64_t n) {
    if (!v || v->type().dtype != DType::kFloat32 || !v->type().is_static()) return false;
    const Shape s = v->type().static_shape();
    return shape_numel(s) == 1 || (shape_numel(s) == n && !s.empty() && s.back() == n);
}

bool in_unit(const std::vector<ir::Node*>& nodes, const ir::Node* n) {
    return n && std::find(nodes.begin(), nodes.end(), n) != nodes.end();
}

/// The single user of `v` if it is in the unit and runs `op`, else nullptr.
const ir::Node* sole_user(const std::vector<ir::Node*>& nodes, const ir::Value* v, const char* op) {
    if (v->users().size() != 1 || v->users()[0]->op() != op || !in_unit(nodes, v->users()[0])) return nullptr;
    return v->users()[0];
}

/// The MatMulInteger's operands as parameters (a, az, b, m, k, n, a_type), or nullopt.
std::optional<Pairs> matmul_integer_params(const ir::Node& mm, const std::vector<ir::Value*>& inputs) {
    const ir::Value *a = mm.input(0), *b = mm.input(1);
    if (!a->type().is_static() || !b->type().is_static() || !is_q8(a->type().dtype) || b->type().dtype != DType::kInt8 ||
        !b->is_constant())
        return std::nullopt;
    const Shape as = a->type().static_shape(), bs = b->type().static_shape();
    if (as.size() < 2 || bs.size() != 2 || as.back() != bs[0]) return std::nullopt;
    const ir::Value* bz = mm.num_inputs() > 3 ? mm.input(3) : nullptr;
    if (bz && (!bz->is_constant() || !all_zero(bz->constant()))) return std::nullopt;  // oneDNN: no weight zp
    const ir::Value* az = mm.num_inputs() > 2 ? mm.input(2) : nullptr;
    if (az && (az->type().dtype != a->type().dtype || !az->type().is_static() || shape_numel(az->type().static_shape()) != 1))
        return std::nullopt;
    const int64_t k = bs[0], n = bs[1];
    Pairs p = {{"a", std::to_string(arg_of(inputs, a))}, {"b", std::to_string(arg_of(inputs, b))},
               {"m", std::to_string(shape_numel(as) / k)}, {"k", std::to_string(k)}, {"n", std::to_string(n)},
               {"a_type", q8_name(a->type().dtype)}};
    if (az) p.push_back({"az", std::to_string(arg_of(inputs, az))});
    return p;
}

/// Dynamic quantization's MatMul: MatMulInteger(a_q, B_q const s8, a_zp) -> Cast(float) ->
/// Mul(scale), scale = a_s * B_s (a Mul in the unit, or computed before it), then the float
/// epilogue (bias, GELU, ...) -> "dnnl_dqmatmul".
std::optional<ExternChoice> match_dynamic_matmul(const std::vector<ir::Node*>& nodes,
                                                 const std::vector<ir::Value*>& inputs,
                                                 const std::vector<ir::Value*>& outputs) {
    const ir::Node* mm = nullptr;
    for (const ir::Node* n : nodes)
        if (n->op() == "MatMulInteger") mm = n;
    if (!mm || outputs.size() != 1) return std::nullopt;
    std::optional<Pairs> p = matmul_integer_params(*mm, inputs);
    const ir::Node* cast = p ? sole_user(nodes, mm->output(0), "Cast") : nullptr;
    if (!cast || cast->attr_int("to", 0) != 1) return std::nullopt;  // to FLOAT
    const ir::Node* mul = sole_user(nodes, cast->output(0), "Mul");
    const ir::Value* s = mul ? other_of(mul, cast->output(0)) : nullptr;
    const int64_t n = mm->input(1)->type().static_shape()[1];
    if (!column_scale(s, n)) return std::nullopt;
    std::vector<const ir::Node*> core = {mm, cast, mul};
    std::vector<const ir::Value*> scales = {s};
    if (in_unit(nodes, s->producer())) {  // the Mul(a_s, B_s) itself
        const ir::Node* sm = s->producer();
        if (sm->op() != "Mul" || sm->num_inputs() != 2 || !column_scale(sm->input(0), n) || !column_scale(sm->input(1), n))
            return std::nullopt;
        core.push_back(sm);
        scales = {sm->input(0), sm->input(1)};
    }
    std::vector<ir::Node*> rest;
    for (ir::Node* x : nodes)
        if (std::find(core.begin(), core.end(), x) == core.end()) rest.push_back(x);
    std::optional<DnnlEpilogue> ep = match_dnnl_epilogue(rest, 0, mul->output(0), inputs);
    if (!ep || outputs[0] != ep->result) return std::nullopt;
    std::string post;  // add:ARG / mul:ARG (a residual of the result's type) included
    for (const std::string& x : ep->posts) post += (post.empty() ? "" : ",") + x;
    for (size_t i = 0; i < scales.size(); ++i) p->push_back({"s" + std::to_string(i + 1), std::to_string(arg_of(inputs, scales[i]))});
    if (ep->bias_arg >= 0) p->push_back({"bias", std::to_string(ep->bias_arg)});
    if (!post.empty()) p->push_back({"post", post});
    p->push_back({"y", std::to_string(inputs.size())});
    for (const auto& [key, v] : *p)
        if (v == "-1") return std::nullopt;
    return ExternChoice{"dnnl_dqmatmul", std::move(*p)};
}
}  // namespace

std::optional<ExternChoice> match_qadd(const std::vector<ir::Node*>& nodes, const std::vector<ir::Value*>& inputs,
                                       const std::vector<ir::Value*>& outputs) {
    if ((nodes.size() != 4 && nodes.size() != 5) || outputs.size() != 1) return std::nullopt;
    const std::vector<const ir::Node*> in_unit(nodes.begin(), nodes.end());
    const ir::Node* add = nullptr;
    for (const ir::Node* n : nodes)
        if (n->op() == "Add") add = n;
    if (!add || add->num_inputs() != 2 || add->output(0)->users().size() != 1) return std::nullopt;
    const ir::Node* q = add->output(0)->users()[0];
    if (q->op() != "QuantizeLinear" || !is_q8(q->output(0)->type().dtype) || !q->input(2) ||
        !constant_of(q->input(1), DType::kFloat32, 1) || !constant_of(q->input(2), q->output(0)->type().dtype, 1))
        return std::nullopt;
    auto a = dequantized_input(add->input(0), in_unit), b = dequantized_input(add->input(1), in_unit);
    if (!a || !b || !add->output(0)->type().is_static()) return std::nullopt;
    const Shape shape = add->output(0)->type().static_shape();
    if ((*a)[0]->type().static_shape() != shape || (*b)[0]->type().static_shape() != shape) return std::nullopt;
    const ir::Value* y = q->output(0);
    bool f32 = false;
    if (nodes.size() == 5) {  // the sum dequantized again (what a float op after the block reads)
        if (y->users().size() != 1) return std::nullopt;
        const ir::Node* dq = y->users()[0];
        if (dq->op() != "DequantizeLinear" || dq->input(1) != q->input(1) || dq->input(2) != q->input(2)) return std::nullopt;
        y = dq->output(0);
        f32 = true;
    }
    if (outputs[0] != y) return std::nullopt;
    auto arg = [&](const ir::Value* v) {
        auto it = std::find(inputs.begin(), inputs.end(), v);
        return std::to_string(it == inputs.end() ? -1 : it - inputs.begin());
    };
    Pairs p = {{"a", arg((*a)[0])},  {"as", arg((*a)[1])},      {"az", arg((*a)[2])},
               {"b", arg((*b)[0])},  {"bs", arg((*b)[1])},      {"bz", arg((*b)[2])},
               {"ys", arg(q->input(1))}, {"yz", arg(q->input(2))}, {"y", std::to_string(inputs.size())},
               {"out", f32 ? "f32" : "q8"}};
    for (const auto& [key, v] : p)
        if (v == "-1") return std::nullopt;
    return ExternChoice{"kiln_qadd", std::move(p)};
}

namespace {

/// Whether one-element constants `a` and `b` hold the same value (a scale or a zero point).
bool same_scalar(const ir::Value* a, const ir::Value* b) {
    if (a == b) return true;
    if (!a || !b || !a->is_constant() || !b->is_constant() || a->type().dtype != b->type().dtype) return false;
    const Tensor &x = a->constant(), &y = b->constant();
    if (x.numel() != 1 || y.numel() != 1) return false;
    return a->type().dtype == DType::kFloat32 ? x.get_f64(0) == y.get_f64(0) : x.get_i64(0) == y.get_i64(0);
}

}  // namespace

std::optional<ExternChoice> match_qconv_add(const std::vector<ir::Node*>& nodes, const std::vector<ir::Value*>& inputs,
                                            const std::vector<ir::Value*>& outputs) {
    if (nodes.size() != 5 || outputs.size() != 1) return std::nullopt;
    const std::vector<const ir::Node*> unit(nodes.begin(), nodes.end());
    const ir::Node *conv = nullptr, *add = nullptr;
    for (const ir::Node* n : nodes) {
        if (n->op() == "QLinearConv") conv = n;
        if (n->op() == "Add") add = n;
    }
    if (!conv || !add || add->num_inputs() != 2 || add->output(0)->users().size() != 1) return std::nullopt;
    const ir::Value* c = conv->output(0);
    if (c->users().size() != 1 || c->users()[0]->op() != "DequantizeLinear") return std::nullopt;
    const ir::Node* q = add->output(0)->users()[0];
    if (q->op() != "QuantizeLinear" || !is_q8(q->output(0)->type().dtype) || !q->input(2) ||
        !constant_of(q->input(1), DType::kFloat32, 1) || !constant_of(q->input(2), q->output(0)->type().dtype, 1) ||
        outputs[0] != q->output(0))
        return std::nullopt;
    auto a = dequantized_input(add->input(0), unit), b = dequantized_input(add->input(1), unit);
    if (!a || !b || (*a)[0] == (*b)[0]) return std::nullopt;
    if ((*b)[0] == c) std::swap(a, b);  // a: the conv's output, b: the residual
    // The conv's output dequantized with the conv's own scale and zero point (a QDQ file's pair).
    if ((*a)[0] != c || !same_scalar((*a)[1], conv->input(6)) || !same_scalar((*a)[2], conv->input(7))) return std::nullopt;
    if (!c->type().is_static() || !(*b)[0]->type().is_static() ||
        (*b)[0]->type().static_shape() != c->type().static_shape())
        return std::nullopt;
    std::optional<ExternChoice> base = match_qlinear_conv(*conv, inputs);
    if (!base) return std::nullopt;
    const ir::Value* y = q->output(0);
    for (auto& [key, v] : base->params) {  // oneDNN's dst is the sum's: its type and zero point
        if (key == "y_zp") v = std::to_string(q->input(2)->constant().get_i64(0));
        if (key == "y_type") v = q8_name(y->type().dtype);
    }
    const int sum = arg_of(inputs, (*b)[0]), ss = arg_of(inputs, (*b)[1]), qs = arg_of(inputs, q->input(1));
    if (sum < 0 || ss < 0 || qs < 0) return std::nullopt;
    base->params.push_back({"c_zp", std::to_string(conv->input(7)->constant().get_i64(0))});
    base->params.push_back({"c_type", q8_name(c->type().dtype)});
    base->params.push_back({"sum", std::to_string(sum)});
    base->params.push_back({"sum_s", std::to_string(ss)});
    base->params.push_back({"sum_zp", std::to_string((*b)[2]->constant().get_i64(0))});
    base->params.push_back({"sum_type", q8_name((*b)[0]->type().dtype)});
    base->params.push_back({"qs", std::to_string(qs)});
    // y may take the residual's buffer (the sum post-op accumulates onto dst), unless the conv
    // also reads it as x (conv(r) + r).
    if ((*b)[0] != conv->input(0)) base->inplace_input = sum;
    return base;
}

std::optional<ExternChoice> match_qmaxpool(const std::vector<ir::Node*>& nodes, const std::vector<ir::Value*>& inputs,
                                           const std::vector<ir::Value*>& outputs) {
    if (nodes.size() != 1 || nodes[0]->op() != "MaxPool" || outputs.size() != 1) return std::nullopt;
    const ir::Node& n = *nodes[0];
    if (n.num_outputs() > 1 && !n.output(1)->users().empty()) return std::nullopt;  // Indices read
    const ir::Value *x = n.input(0), *y = n.output(0);
    if (outputs[0] != y || !x->type().is_static() || !y->type().is_static() || x->type().rank() != 4 ||
        !is_q8(x->type().dtype) || y->type().dtype != x->type().dtype)
        return std::nullopt;
    const int xi = arg_of(inputs, x);
    if (xi < 0) return std::nullopt;
    const op::WindowGeometry g = op::pool_geometry(n, x->type().shape);
    const Shape xs = x->type().static_shape(), ys = y->type().static_shape();
    if (g.spatial() != 2 || ys.size() != 4 || ys[2] != g.out[0] || ys[3] != g.out[1] || g.kernel[0] > 64)
        return std::nullopt;
    return ExternChoice{"kiln_qmaxpool",
                        {{"x", std::to_string(xi)},
                         {"y", std::to_string(inputs.size())},
                         {"src", join(xs)},
                         {"out", join(g.out)},
                         {"kernel", join(g.kernel)},
                         {"strides", join(g.strides)},
                         {"dilations", join(g.dilations)},
                         {"pads", join(g.pads_begin)},
                         {"type", q8_name(x->type().dtype)}}};
}

std::optional<ExternChoice> match_dynamic_quantize(const std::vector<ir::Node*>& nodes,
                                                   const std::vector<ir::Value*>& inputs,
                                                   const std::vector<ir::Value*>& outputs) {
    if (nodes.size() != 1 || nodes[0]->op() != "DynamicQuantizeLinear" || nodes[0]->num_outputs() != 3) return std::nullopt;
    const ir::Node& n = *nodes[0];
    if (!n.input(0)->type().is_static() || n.input(0)->type().dtype != DType::kFloat32) return std::nullopt;
    Pairs p = {{"x", std::to_string(arg_of(inputs, n.input(0)))}};
    const char* keys[3] = {"y", "ys", "yz"};
    for (int i = 0; i < 3; ++i) {  // an output nothing reads is not one of the unit's
        const int o = arg_of(outputs, n.output(i));
        if (o >= 0) p.push_back({keys[i], std::to_string(inputs.size() + o)});
        else if (i == 0) return std::nullopt;
    }
    if (p[0].second == "-1") return std::nullopt;
    return ExternChoice{"kiln_dql", std::move(p)};
}

std::optional<ExternChoice> match_dnnl_int8(const std::vector<ir::Node*>& nodes, const std::vector<ir::Value*>& inputs,
                                            const std::vector<ir::Value*>& outputs) {
    for (const ir::Node* n : nodes)
        if (n->op() == "MatMulInteger") return match_dynamic_matmul(nodes, inputs, outputs);
    if (nodes.size() == 5) return match_qconv_add(nodes, inputs, outputs);
    if (nodes.size() != 1 || outputs.size() != 1 || outputs[0] != nodes[0]->output(0)) return std::nullopt;
    if (nodes[0]->op() == "QLinearConv") return match_qlinear_conv(*nodes[0], inputs);
    if (nodes[0]->op() == "QLinearMatMul") return match_qlinear_matmul(*nodes[0], inputs);
    return std::nullopt;
}

}  // namespace kiln::topi
