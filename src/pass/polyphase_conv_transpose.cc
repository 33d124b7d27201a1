#include "pass/polyphase_conv_transpose.h"

#include <string>
#include <vector>

#include "pass/eliminate_dead_code.h"
#include "pass/rewrite.h"

namespace kiln::pass {
namespace {

/// The rewrite's geometry per spatial axis, or false where it does not apply (see the header).
struct Geometry {
    std::vector<int64_t> stride, taps_per_phase, pad_begin, in, out;
};

bool geometry(const ir::Node& n, Geometry& geo) {
    if (n.op() != "ConvTranspose" || n.num_outputs() != 1 || n.num_inputs() < 2) return false;
    const ir::Value* x = n.input(0);
    const ir::Value* w = n.input(1);
    const int rank = x ? x->type().rank() : 0;
    if (rank != 3 && rank != 4) return false;
    for (const ir::Value* v : {x, w, static_cast<const ir::Value*>(n.output(0))})
        if (!v || v->type().dtype != DType::kFloat32 || !v->type().is_static() || v->type().rank() != rank) return false;
    if (!w->is_constant() || (n.num_inputs() > 2 && n.input(2) && !n.input(2)->is_constant())) return false;
    if (n.attr_int("group", 1) != 1 || n.has_attr("output_shape")) return false;
    if (n.has_attr("auto_pad") && n.attr_string("auto_pad", "NOTSET") != "NOTSET") return false;
    const size_t k = static_cast<size_t>(rank - 2);
    const Shape xs = x->type().static_shape(), ws = w->type().static_shape(), ys = n.output(0)->type().static_shape();
    const std::vector<int64_t> ones(k, 1), zeros(k, 0), zeros2(2 * k, 0);
    const std::vector<int64_t> strides = n.attr_ints("strides", ones), dil = n.attr_ints("dilations", ones);
    const std::vector<int64_t> pads = n.attr_ints("pads", zeros2), outpad = n.attr_ints("output_padding", zeros);
    if (strides.size() != k || dil.size() != k || pads.size() != 2 * k || outpad.size() != k) return false;
    bool wider = false;
    for (size_t a = 0; a < k; ++a) {
        const int64_t s = strides[a], kk = ws[2 + a];
        if (dil[a] != 1 || s < 1 || kk % s != 0 || outpad[a] > pads[k + a] || pads[a] < 0) return false;
        wider |= kk > s;
        geo.stride.push_back(s);
        geo.taps_per_phase.push_back(kk / s);
        geo.pad_begin.push_back(pads[a]);
        geo.in.push_back(xs[2 + a]);
        geo.out.push_back(ys[2 + a]);
    }
    // Kernel == stride everywhere is the matmul-and-shuffle kernel's case; stride 1 everywhere
    // needs no phases. A 2-D one only with few output channels: oneDNN's deconvolution of many
    // is as fast as the conv, and the shuffle is extra (DCGAN, 2 threads: 512 -> 256 at 4x4
    // 475 us deconv, 599 + 63 polyphase; 128 -> 64 at 16x16 404 against 292 + 39; 64 -> 3 at
    // 32x32 378 against 99 + 76).
    bool strided = false;
    for (int64_t s : geo.stride) strided |= s > 1;
    return wider && strided && (rank == 3 || ws[1] <= 64);
}

/// Wc[co*S + p, c, j..] = W[c, co, p_a + (m_a - 1 - j_a) * s_a ..] (see the header).
Tensor phase_weights(const Tensor& w, const Geometry& geo) {
    const Shape ws = w.shape();
    const int64_t c = ws[0], m = ws[1];
    const size_t k = geo.stride.size();
    int64_t phases = 1, taps = 1;
    for (size_t a = 0; a < k; ++a) phases *= geo.stride[a], taps *= geo.taps_per_phase[a];
    Shape out = {m * phases, c};
    for (size_t a = 0; a < k; ++a) out.push_back(geo.taps_per_phase[a]);
    Tensor wc(DType::kFloat32, out);
    const int64_t kw = k == 2 ? ws[3] : 1, kh = ws[2];
    for (int64_t co = 0; co < m; ++co)
        for (int64_t p = 0; p < phases; ++p)
            for (int64_t ci = 0; ci < c; ++ci)
                for (int64_t j = 0; j < taps; ++j) {
                    // Phase and tap per axis (the last axis fastest).
                    const int64_t p1 = k == 2 ? p / geo.stride[1] : p, p2 = k == 2 ? p % geo.stride[1] : 0;
                    const int64_t j1 = k == 2 ? j / geo.taps_per_phase[1] : j, j2 = k == 2 ? j % geo.taps_per_phase[1] : 0;
                    const int64_t t1 = p1 + (geo.taps_per_phase[0] - 1 - j1) * geo.stride[0];
                    const int64_t t2 = k == 2 ? p2 + (geo.taps_per_phase[1] - 1 - j2) * geo.stride[1] : 0;
                    const int64_t from = ((ci * m + co) * kh + t1) * kw + t2;
                    const int64_t to = ((co * phases + p) * c + ci) * taps + j;
                    wc.set_f64(to, w.get_f64(from));
                }
    return wc;
}

bool rewrite(ir::Graph& g, ir::Node* n) {
    Geometry geo;
    if (!geometry(*n, geo)) return false;
    ir::Value* x = n->input(0);
    const Tensor& w = n->input(1)->constant();
    const Shape xs = x->type().static_shape();
    const int64_t batch = xs[0], m = w.shape()[1];
    const size_t k = geo.stride.size();
    int64_t phases = 1;
    for (int64_t s : geo.stride) phases *= s;
    std::vector<ir::Value*> ins = {x, add_constant_like(g, n->name() + "/phase_weights", phase_weights(w, geo))};
    if (n->num_inputs() > 2 && n->input(2)) {
        const Tensor& b = n->input(2)->constant();
        Tensor bc(DType::kFloat32, {m * phases});
        for (int64_t i = 0; i < m * phases; ++i) bc.set_f64(i, b.get_f64(i / phases));
        ins.push_back(add_constant_like(g, n->name() + "/phase_bias", std::move(bc)));
    }
    ir::AttrMap conv;
    std::vector<int64_t> pads(2 * k), ones(k, 1), len(k);
    for (size_t a = 0; a < k; ++a) {
        pads[a] = pads[k + a] = geo.taps_per_phase[a] - 1;
        len[a] = geo.in[a] + geo.taps_per_phase[a] - 1;
    }
    conv["kernel_shape"] = ir::Attr(geo.taps_per_phase);
    conv["pads"] = ir::Attr(pads);
    conv["strides"] = ir::Attr(ones);
    ir::Node* phase_conv = add_inferred_node(g, "Conv", ins, conv, 1, "polyphase");
    phase_conv->set_name(n->name() + "/polyphase");
    // [N, M*S, T..] -> [N, M, s.., T..] -> [N, M, T1, s1, (T2, s2)] -> [N, M, T1*s1, (T2*s2)]
    Shape split = {batch, m}, merged = {batch, m};
    std::vector<int64_t> perm = {0, 1};
    for (size_t a = 0; a < k; ++a) split.push_back(geo.stride[a]);
    for (size_t a = 0; a < k; ++a) {
        split.push_back(len[a]);
        merged.push_back(len[a] * geo.stride[a]);
        perm.push_back(static_cast<int64_t>(2 + k + a));
        perm.push_back(static_cast<int64_t>(2 + a));
    }
    ir::Value* v = add_inferred_node(g, "Reshape", {phase_conv->output(0), shape_constant(g, split)}, {}, 1, "polyphase")->output(0);
    v = add_inferred_node(g, "Transpose", {v}, {{"perm", ir::Attr(perm)}}, 1, "polyphase")->output(0);
    v = add_inferred_node(g, "Reshape", {v, shape_constant(g, merged)}, {}, 1, "polyphase")->output(0);
    std::vector<int64_t> starts, ends, axes;
    for (size_t a = 0; a < k; ++a) {
        starts.push_back(geo.pad_begin[a]);
        ends.push_back(geo.pad_begin[a] + geo.out[a]);
        axes.push_back(static_cast<int64_t>(2 + a));
    }
    ir::Value* y = add_inferred_node(g, "Slice", {v, shape_constant(g, starts), shape_constant(g, ends), shape_constant(g, axes)},
                                     {}, 1, "polyphase")->output(0);
    if (!(y->type() == n->output(0)->type()) || !replace_value(g, n->output(0), y)) return false;
    g.topo_sort();
    g.erase_node(n);
    return true;
}

}  // namespace

bool polyphase_conv_transpose(ir::Graph& g, const PassContext& ctx) {
    bool changed = false;
    std::vector<ir::Node*> nodes;
    for (ir::Node* n : g.nodes())
        if (n->op() == "ConvTranspose") nodes.push_back(n);
    for (ir::Node* n : nodes) changed |= rewrite(g, n);
    if (changed) eliminate_dead_code(g, ctx);  // the original weights
    return changed;
}

}  // namespace kiln::pass
