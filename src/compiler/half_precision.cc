#include "compiler/half_precision.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "kiln/dtype.h"
#include "op/registry.h"

namespace kiln::compiler {
namespace {

constexpr int64_t kOnnxFloat = 1, kOnnxFloat16 = 10;

/// Whether input `i` of `n` keeps its FP32 type.
bool keeps_fp32(const ir::Node& n, size_t i) {
    const std::string& op = n.op();
    if (op == "Resize" || op == "Upsample") return i >= 1;  // roi, scales
    return op == "Cast" || op == "CastLike" || op == "Shape" || op == "Size";
}

ir::Value* add_cast(ir::Graph& g, ir::Value* v, DType to, const std::string& out_name = "") {
    ir::TensorType t = v->type();
    t.dtype = to;
    const int64_t onnx_to = to == DType::kFloat16 ? kOnnxFloat16 : kOnnxFloat;
    return g.add_node("Cast", {v}, {{"to", ir::Attr(onnx_to)}}, {t}, {out_name})->output(0);
}

}  // namespace

Tensor as_half(const Tensor& t) {
    // Finite values beyond FP16's range saturate at +-65504 instead of becoming infinities: a
    // mask constant such as -3.4e38 (finfo(float32).min) must stay finite, or 0 * mask is NaN.
    constexpr float kHalfMax = 65504.f;
    Tensor h(DType::kFloat16, t.shape());
    const float* src = t.data_as<float>();
    uint16_t* dst = h.data_as<uint16_t>();
    for (int64_t i = 0; i < t.numel(); ++i) {
        const float v = src[i];
        dst[i] = float_to_half(std::isfinite(v) ? std::clamp(v, -kHalfMax, kHalfMax) : v);
    }
    return h;
}

Tensor as_float(const Tensor& t) {
    Tensor f(DType::kFloat32, t.shape());
    const uint16_t* src = t.data_as<uint16_t>();
    float* dst = f.data_as<float>();
    for (int64_t i = 0; i < t.numel(); ++i) dst[i] = half_to_float(src[i]);
    return f;
}

int convert_to_half(ir::Graph& g) {
    std::vector<bool> output_was_fp32;
    for (const ir::Value* o : g.outputs()) output_was_fp32.push_back(o->type().dtype == DType::kFloat32);
    std::unordered_map<ir::Value*, ir::Value*> half_of;  // an FP32 value -> its FP16 form
    auto half = [&](ir::Value* v) {
        ir::Value*& h = half_of[v];
        if (!h)
            h = v->is_constant() ? g.add_constant(g.fresh_name(v->name() + ".f16"), as_half(v->constant()))
                                 : add_cast(g, v, DType::kFloat16);
        return h;
    };
    for (ir::Node* n : g.nodes()) {  // a snapshot in topological order: producers first
        for (size_t i = 0; i < n->num_inputs(); ++i) {
            ir::Value* in = n->input(i);
            if (in && in->type().dtype == DType::kFloat32 && !keeps_fp32(*n, i)) n->set_input(i, half(in));
        }
        op::infer_node(*n);
    }
    std::vector<ir::Value*> outs = g.outputs();
    for (size_t i = 0; i < outs.size(); ++i) {
        ir::Value*& o = outs[i];
        if (!output_was_fp32[i] || o->type().dtype != DType::kFloat16 || o->is_graph_input() || o->is_constant()) continue;
        const std::string name = o->name();
        o->set_name(g.fresh_name(name + ".f16"));
        o = add_cast(g, o, DType::kFloat32, name);
    }
    g.set_outputs(outs);
    g.topo_sort();
    return static_cast<int>(half_of.size());
}

}  // namespace kiln::compiler
