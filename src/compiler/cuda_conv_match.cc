#include "compiler/cuda_conv_match.h"

#include "op/window.h"

namespace kiln::compiler {
namespace {

/// FP32 or FP16 (cuDNN's data types here), static shape.
bool float_static(const ir::Value* v, DType dtype) { return v && v->type().dtype == dtype && v->type().is_static(); }

bool has_bias(const ir::Node& n) { return n.num_inputs() > 2 && n.input(2) != nullptr; }

}  // namespace

std::optional<runtime::cuda::CudaConvDesc> cudnn_conv_geometry(const ir::Node& n) {
    if (n.op() != "Conv" || n.num_inputs() < 2 || n.num_outputs() != 1) return std::nullopt;
    const DType dt = n.input(0) ? n.input(0)->type().dtype : DType::kFloat32;
    if (dt != DType::kFloat32 && dt != DType::kFloat16) return std::nullopt;
    if (!float_static(n.input(0), dt) || !float_static(n.input(1), dt) || !float_static(n.output(0), dt)) return std::nullopt;
    if (has_bias(n) && !float_static(n.input(2), dt)) return std::nullopt;
    const Shape x = n.input(0)->type().static_shape(), w = n.input(1)->type().static_shape();
    const Shape y = n.output(0)->type().static_shape();
    if ((x.size() != 3 && x.size() != 4) || w.size() != x.size() || y.size() != x.size()) return std::nullopt;
    const bool one_d = x.size() == 3;
    std::vector<int64_t> in(x.begin() + 2, x.end()), kernel(w.begin() + 2, w.end());
    const op::WindowGeometry geo = op::window_geometry(n, in, kernel, false);
    for (int i = 0; i < geo.spatial(); ++i)
        if (geo.pads_begin[i] != geo.pads_end[i]) return std::nullopt;  // asymmetric: not expressible
    runtime::cuda::CudaConvDesc d;
    d.dtype = dt;
    const auto at = [&](const std::vector<int64_t>& v, int i2d, int64_t one) {  // axis i2d of 2-D (0 = H)
        return static_cast<int>(one_d ? (i2d == 0 ? one : v[0]) : v[i2d]);
    };
    d.n = static_cast<int>(x[0]);
    d.c = static_cast<int>(x[1]);
    d.k = static_cast<int>(w[0]);
    d.group = static_cast<int>(n.attr_int("group", 1));
    d.h = at(in, 0, 1), d.w = at(in, 1, 1);
    d.kh = at(kernel, 0, 1), d.kw = at(kernel, 1, 1);
    d.oh = at(geo.out, 0, 1), d.ow = at(geo.out, 1, 1);
    d.pad_h = at(geo.pads_begin, 0, 0), d.pad_w = at(geo.pads_begin, 1, 0);
    d.stride_h = at(geo.strides, 0, 1), d.stride_w = at(geo.strides, 1, 1);
    d.dil_h = at(geo.dilations, 0, 1), d.dil_w = at(geo.dilations, 1, 1);
    if (d.oh * d.ow * static_cast<int64_t>(d.n) * d.k != shape_numel(y)) return std::nullopt;
    return d;
}

std::optional<runtime::cuda::CudaConvDesc> cudnn_conv_choice(const ir::Node& n) {
    if (has_bias(n)) return std::nullopt;
    return cudnn_conv_geometry(n);
}

int split_cudnn_convs(ir::Graph& g) {
    int split = 0;
    for (ir::Node* n : g.nodes()) {
        if (n->op() != "Conv" || !cudnn_conv_geometry(*n)) continue;
        if (n->group() >= 0) {  // by convexity, a group member upstream would wrap around the conv
            bool fed = false;
            for (const ir::Value* in : n->inputs()) fed |= in && in->producer() && in->producer()->group() == n->group();
            if (fed) continue;
        }
        if (!has_bias(*n)) {
            n->set_group(-1);
            ++split;
            continue;
        }
        const ir::Value* b = n->input(2);
        if (!b->is_constant()) continue;  // a computed bias: the generated kernel keeps it
        const int64_t channels = b->type().static_shape()[0];
        Shape bias_shape = {channels, 1};
        if (n->input(0)->type().rank() == 4) bias_shape.push_back(1);
        ir::Value* bias_value = g.add_constant(g.fresh_name(n->name() + ".bias"), b->constant().clone().reshaped(bias_shape));
        ir::Value* out = n->output(0);
        const std::string out_name = out->name();  // kept by the Add: the value users know
        out->set_name(g.fresh_name(out_name + ".conv"));
        ir::Node* conv = g.add_node("Conv", {n->input(0), n->input(1)}, n->attrs(), {out->type()}, {}, n->name());
        ir::Node* add =
            g.add_node("Add", {conv->output(0), bias_value}, {}, {out->type()}, {out_name}, n->name() + ".bias_add");
        add->set_group(n->group());
        g.replace_all_uses(out, add->output(0));
        g.erase_node(n);
        ++split;
    }
    if (split) g.topo_sort();
    return split;
}

}  // namespace kiln::compiler
