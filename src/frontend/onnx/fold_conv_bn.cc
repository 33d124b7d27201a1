// Conv + BatchNormalization folding on ONNX protos (fold_conv_bn.h).
#include "frontend/onnx/fold_conv_bn.h"

#include <cmath>
#include <map>
#include <set>

#include <onnx/onnx_pb.h>

#include "frontend/onnx/model_initializers.h"
#include "frontend/onnx/qdq_model.h"
#include "frontend/onnx/tensor_proto.h"
#include "support/error.h"

namespace kiln::frontend {

namespace {

using Inits = std::map<std::string, onnx::TensorProto*>;

/// f32 values of a constant initializer; empty when it is not one.
std::vector<float> values(const Inits& inits, const std::string& name) {
    auto it = inits.find(name);
    if (it == inits.end()) return {};
    Tensor t = tensor_from_proto(*it->second, ".", "initializer '" + name + "'");
    if (t.dtype() != DType::kFloat32) return {};
    return {t.data_as<float>(), t.data_as<float>() + t.numel()};
}

void set_values(onnx::TensorProto& p, const std::vector<float>& v) {
    p.clear_float_data();
    p.clear_raw_data();
    p.set_raw_data(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

float epsilon(const onnx::NodeProto& bn) {
    for (const auto& a : bn.attribute())
        if (a.name() == "epsilon") return a.f();
    return 1e-5f;
}

/// Folds `bn` into `conv` (new weight / bias initializers); false when a parameter is not a
/// constant f32 of the conv's channel count.
bool fold(onnx::GraphProto& g, Inits& inits, onnx::NodeProto& conv, const onnx::NodeProto& bn) {
    std::vector<float> w = values(inits, conv.input(1));
    std::vector<float> scale = values(inits, bn.input(1)), shift = values(inits, bn.input(2)),
                       mean = values(inits, bn.input(3)), var = values(inits, bn.input(4));
    const size_t c = scale.size();
    if (w.empty() || c == 0 || w.size() % c || shift.size() != c || mean.size() != c || var.size() != c) return false;
    if (inits.at(conv.input(1))->dims_size() < 1 || static_cast<size_t>(inits.at(conv.input(1))->dims(0)) != c)
        return false;
    std::vector<float> b(c, 0.0f);
    if (conv.input_size() > 2 && !conv.input(2).empty()) {
        b = values(inits, conv.input(2));
        if (b.size() != c) return false;
    }
    const size_t per = w.size() / c;
    for (size_t o = 0; o < c; ++o) {
        const float s = scale[o] / std::sqrt(var[o] + epsilon(bn));
        for (size_t i = 0; i < per; ++i) w[o * per + i] *= s;
        b[o] = (b[o] - mean[o]) * s + shift[o];
    }
    onnx::TensorProto* wp = g.add_initializer();  // new names: the old ones may be shared
    *wp = *inits.at(conv.input(1));
    wp->set_name(conv.input(1) + "_bn_folded");
    set_values(*wp, w);
    onnx::TensorProto* bp = g.add_initializer();
    bp->set_name(bn.output(0) + "_bias_bn_folded");
    bp->set_data_type(onnx::TensorProto::FLOAT);
    bp->add_dims(static_cast<int64_t>(c));
    set_values(*bp, b);
    conv.set_input(1, wp->name());
    if (conv.input_size() < 3) conv.add_input(bp->name());
    else conv.set_input(2, bp->name());
    conv.set_output(0, bn.output(0));
    return true;
}

}  // namespace

std::optional<std::string> fold_conv_batchnorm(const std::string& path) {
    onnx::ModelProto m;
    KILN_CHECK(m.ParseFromString(onnx_with_initializers(path, {})), kInvalidModel)
        << "could not parse '" << path << "' as an ONNX model";
    onnx::GraphProto& g = *m.mutable_graph();
    Inits inits;
    for (auto& t : *g.mutable_initializer()) inits[t.name()] = &t;
    std::map<std::string, int> uses, producer;
    for (int k = 0; k < g.node_size(); ++k) {
        for (const auto& i : g.node(k).input()) ++uses[i];
        for (const auto& o : g.node(k).output()) producer[o] = k;
    }
    for (const auto& o : g.output()) ++uses[o.name()];
    std::set<int> folded;  // BN nodes to drop
    for (int k = 0; k < g.node_size(); ++k) {
        const onnx::NodeProto& bn = g.node(k);
        if (bn.op_type() != "BatchNormalization" || bn.output_size() != 1 || bn.input_size() != 5) continue;
        auto p = producer.find(bn.input(0));
        if (p == producer.end() || uses[bn.input(0)] != 1) continue;
        onnx::NodeProto& conv = *g.mutable_node(p->second);
        if (conv.op_type() != "Conv" || conv.input_size() < 2) continue;
        // (`inits` pointers stay valid as initializers are added: RepeatedPtrField keeps elements.)
        if (fold(g, inits, conv, bn)) folded.insert(k);
    }
    if (folded.empty()) return std::nullopt;
    auto* nodes = g.mutable_node();
    for (auto it = folded.rbegin(); it != folded.rend(); ++it) nodes->DeleteSubrange(*it, 1);
    drop_unused_initializers(g);
    g.clear_value_info();
    std::string bytes;
    KILN_CHECK(m.SerializeToString(&bytes), kInternal) << "bug in Kiln: could not serialize the ONNX model";
    return bytes;
}

}  // namespace kiln::frontend
