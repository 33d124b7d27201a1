#include "topi/dnnl_conv_backward_match.h"

#include <algorithm>
#include <string>

namespace kiln::topi {
namespace {

std::string join(const std::vector<int64_t>& v) {
    std::string s;
    for (int64_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
    return s;
}

int index_of(const std::vector<ir::Value*>& vs, const ir::Value* v) {
    auto it = std::find(vs.begin(), vs.end(), v);
    return it == vs.end() ? -1 : static_cast<int>(it - vs.begin());
}

bool static_f32(const ir::Value* v) { return v && v->type().is_static() && v->type().dtype == DType::kFloat32; }

}  // namespace

std::optional<ExternChoice> match_conv_backward(const std::vector<ir::Node*>& nodes, const std::vector<ir::Value*>& inputs,
                                                const std::vector<ir::Value*>& outputs) {
    if (nodes.size() != 1 || outputs.size() != 1) return std::nullopt;
    const ir::Node& n = *nodes[0];
    const bool data = n.op() == "KilnConvGradData";
    if (!data && n.op() != "KilnConvGradWeight") return std::nullopt;
    if (!static_f32(n.input(0)) || !static_f32(n.input(1)) || !static_f32(n.output(0)) || outputs[0] != n.output(0))
        return std::nullopt;
    // X, W and dY in the forward conv's terms.
    const ir::Value *x = data ? n.output(0) : n.input(0), *w = data ? n.input(1) : n.output(0);
    const ir::Value* dy = data ? n.input(0) : n.input(1);
    const Shape xs = x->type().static_shape(), ws = w->type().static_shape(), ys = dy->type().static_shape();
    const size_t sp = xs.size() - 2;
    if (sp < 1 || sp > 3) return std::nullopt;
    const std::vector<int64_t> strides = n.attr_ints("strides"), dil = n.attr_ints("dilations"), pads = n.attr_ints("pads");
    std::vector<int64_t> dnnl_dil, pad_l, pad_r, crop;
    for (size_t i = 0; i < sp; ++i) {
        // oneDNN's dilation counts the gaps (ONNX's d - 1); its right pad is what the last
        // window reaches past the input. Where that is negative (a stride leaving the last
        // input rows unread: ResNet's 1x1 stride-2 convs on even sizes) the kernel works on
        // the input cropped to what the windows read.
        const int64_t eff = (ws[2 + i] - 1) * dil[i] + 1;
        const int64_t r = (ys[2 + i] - 1) * strides[i] + eff - xs[2 + i] - pads[i];
        if (pads[i] < 0 || xs[2 + i] + std::min<int64_t>(r, 0) < 1) return std::nullopt;
        dnnl_dil.push_back(dil[i] - 1);
        pad_l.push_back(pads[i]);
        pad_r.push_back(std::max<int64_t>(r, 0));
        crop.push_back(xs[2 + i] + std::min<int64_t>(r, 0));
    }
    const int a = index_of(inputs, n.input(0)), b = index_of(inputs, n.input(1));
    if (a < 0 || b < 0) return std::nullopt;
    const std::string out = std::to_string(inputs.size());
    std::vector<std::pair<std::string, std::string>> p = {
        {"kind", data ? "data" : "weights"}, {"src", join(xs)}, {"wei", join(ws)}, {"dst", join(ys)},
        {"groups", std::to_string(n.attr_int("group", 1))}, {"strides", join(strides)}, {"dilates", join(dnnl_dil)},
        {"pad_l", join(pad_l)}, {"pad_r", join(pad_r)}, {"crop", join(crop)}};
    p.insert(p.end(), {{data ? "dy_arg" : "x_arg", std::to_string(a)}, {data ? "w_arg" : "dy_arg", std::to_string(b)},
                       {"out_arg", out}});
    return ExternChoice{"dnnl_conv_bwd", std::move(p)};
}

}  // namespace kiln::topi
