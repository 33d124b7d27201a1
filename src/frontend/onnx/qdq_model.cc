// Reading a model for the quantizer, exposing tensors as outputs, writing QDQ (qdq_model.h).
//
// The QDQ layout follows ONNX Runtime's quantize_static (QuantFormat.QDQ), so that fuse-qdq and
// ORT's own QDQ selectors recognise it: weights as DequantizeLinear(int8 initializer), biases as
// DequantizeLinear(int32 initializer, scale x_s * w_s), each quantized activation T as
// T -> QuantizeLinear -> DequantizeLinear -> every consumer of T, the pair placed right after
// T's producer (or first, for a graph input), so node order stays topological.
#include "frontend/onnx/qdq_model.h"

#include <cstring>
#include <filesystem>
#include <unordered_map>

#include <onnx/onnx_pb.h>

#include "frontend/onnx/model_initializers.h"
#include "frontend/onnx/tensor_proto.h"
#include "support/error.h"

namespace kiln::frontend {

namespace {

onnx::ModelProto parse_embedded(const std::string& path) {
    onnx::ModelProto m;  // onnx_with_initializers with no replacements: external data embedded
    KILN_CHECK(m.ParseFromString(onnx_with_initializers(path, {})), kInvalidModel)
        << "could not parse '" << path << "' as an ONNX model";
    return m;
}

std::string serialize(const onnx::ModelProto& m) {
    std::string bytes;
    KILN_CHECK(m.SerializeToString(&bytes), kInternal) << "bug in Kiln: could not serialize the ONNX model";
    return bytes;
}

int default_opset(const onnx::ModelProto& m) {
    for (const auto& o : m.opset_import())
        if (o.domain().empty() || o.domain() == "ai.onnx") return static_cast<int>(o.version());
    return 0;
}

std::string node_name(const onnx::NodeProto& n, int index) {
    return n.name().empty() ? n.op_type() + "_" + std::to_string(index) : n.name();
}

onnx::TensorProto proto_from_tensor(const std::string& name, const Tensor& t) {
    onnx::TensorProto p;
    p.set_name(name);
    p.set_data_type(dtype_to_onnx(t.dtype()));
    for (int64_t d : t.shape()) p.add_dims(d);
    p.set_raw_data(static_cast<const char*>(t.data()), t.nbytes());
    return p;
}

/// The node names in use, so that each new node gets one of its own (ORT refuses duplicates).
using NodeNames = std::set<std::string>;

std::string unique_name(NodeNames& taken, const std::string& base) {
    std::string name = base;
    for (int k = 1; !taken.insert(name).second; ++k) name = base + "_" + std::to_string(k);
    return name;
}

onnx::NodeProto make_node(NodeNames& taken, const std::string& op, std::vector<std::string> in,
                          const std::string& out, int axis) {
    onnx::NodeProto n;
    n.set_op_type(op);
    n.set_name(unique_name(taken, out + "_" + op));
    for (auto& i : in) n.add_input(i);
    n.add_output(out);
    if (axis >= 0) {
        onnx::AttributeProto* a = n.add_attribute();
        a->set_name("axis");
        a->set_type(onnx::AttributeProto::INT);
        a->set_i(axis);
    }
    return n;
}

/// Appends the QuantizeLinear -> DequantizeLinear pair of `a` reading `src` and writing `dst`.
void add_pair(onnx::GraphProto& g, NodeNames& taken, std::vector<onnx::NodeProto>& out, const QdqActivation& a,
              const std::string& src, const std::string& dst) {
    const std::string s = a.tensor + "_scale", z = a.tensor + "_zero_point";
    Tensor scale(DType::kFloat32, {}), zero(a.dtype, {});
    *scale.data_as<float>() = a.scale;
    zero.set_i64(0, a.zero_point);
    *g.add_initializer() = proto_from_tensor(s, scale);
    *g.add_initializer() = proto_from_tensor(z, zero);
    out.push_back(make_node(taken, "QuantizeLinear", {src, s, z}, a.tensor + "_QuantizeLinear_Output", -1));
    out.push_back(make_node(taken, "DequantizeLinear", {a.tensor + "_QuantizeLinear_Output", s, z}, dst, -1));
}

void add_constant(onnx::GraphProto& g, NodeNames& taken, std::vector<onnx::NodeProto>& out, const QdqConstant& c) {
    std::string base = c.dq_output;  // "<w>_DequantizeLinear_Output" -> "<w>_quantized", "<w>_scale", ...
    if (const size_t cut = base.rfind("_DequantizeLinear_Output"); cut != std::string::npos) base.resize(cut);
    const std::string q = base + "_quantized", s = base + "_scale", z = base + "_zero_point";
    Tensor zero(c.quantized.dtype(), c.scale.shape());
    std::memset(zero.data(), 0, zero.nbytes());
    *g.add_initializer() = proto_from_tensor(q, c.quantized);
    *g.add_initializer() = proto_from_tensor(s, c.scale);
    *g.add_initializer() = proto_from_tensor(z, zero);
    out.push_back(make_node(taken, "DequantizeLinear", {q, s, z}, c.dq_output, c.axis));
}

}  // namespace

void drop_unused_initializers(onnx::GraphProto& g) {
    std::set<std::string> used, dropped;
    for (const auto& n : g.node())
        for (const auto& i : n.input()) used.insert(i);
    for (const auto& o : g.output()) used.insert(o.name());
    auto* nodes = g.mutable_node();  // Constant nodes left unread (a dropped Clip's bounds)
    for (int i = nodes->size() - 1; i >= 0; --i)
        if (nodes->Get(i).op_type() == "Constant" && nodes->Get(i).output_size() == 1 &&
            !used.count(nodes->Get(i).output(0)))
            nodes->DeleteSubrange(i, 1);
    auto* inits = g.mutable_initializer();
    for (int i = inits->size() - 1; i >= 0; --i)
        if (!used.count(inits->Get(i).name())) dropped.insert(inits->Get(i).name()), inits->DeleteSubrange(i, 1);
    auto* inputs = g.mutable_input();  // an initializer also listed as a graph input (IR < 4)
    for (int i = inputs->size() - 1; i >= 0; --i)
        if (dropped.count(inputs->Get(i).name())) inputs->DeleteSubrange(i, 1);
}

OnnxGraphView read_onnx_graph_view(const std::string& path) {
    onnx::ModelProto m;
    const std::string bytes = read_file_bytes(path);
    KILN_CHECK(m.ParseFromString(bytes), kInvalidModel) << "could not parse '" << path << "' as an ONNX model";
    OnnxGraphView v;
    v.opset = default_opset(m);
    const auto& g = m.graph();
    for (const auto& t : g.initializer()) v.initializers.insert(t.name());
    for (const auto& i : g.input()) {
        if (v.initializers.count(i.name())) continue;
        v.inputs.push_back(i.name());
        if (!i.type().has_tensor_type()) continue;
        const auto& tt = i.type().tensor_type();
        if (std::optional<DType> dt = dtype_from_onnx(tt.elem_type())) v.input_dtypes[i.name()] = *dt;
        if (!tt.has_shape()) continue;
        std::vector<int64_t>& shape = v.input_shapes[i.name()];
        std::vector<std::string>& names = v.input_dim_names[i.name()];
        for (const auto& d : tt.shape().dim()) {
            shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
            names.push_back(d.has_dim_param() ? d.dim_param() : "");
        }
    }
    for (const auto& o : g.output()) v.outputs.push_back(o.name());
    for (int k = 0; k < g.node_size(); ++k) {
        const onnx::NodeProto& n = g.node(k);
        OnnxNodeView nv{node_name(n, k), n.op_type(), {n.input().begin(), n.input().end()},
                        {n.output().begin(), n.output().end()}, {}};
        for (const auto& a : n.attribute()) {
            if (a.type() == onnx::AttributeProto::FLOAT) nv.float_attrs[a.name()] = a.f();
            if (a.type() == onnx::AttributeProto::INT) nv.float_attrs[a.name()] = static_cast<double>(a.i());
        }
        if (n.op_type() == "Constant")
            for (const auto& o : n.output()) v.initializers.insert(o);
        v.nodes.push_back(std::move(nv));
    }
    return v;
}

std::map<std::string, Tensor> read_onnx_constants(const std::string& path, const std::set<std::string>& names) {
    onnx::ModelProto m = parse_embedded(path);
    std::map<std::string, Tensor> out;
    for (const auto& t : m.graph().initializer())
        if (names.count(t.name())) out[t.name()] = tensor_from_proto(t, ".", "initializer '" + t.name() + "'");
    for (const auto& n : m.graph().node()) {
        if (n.op_type() != "Constant" || n.output_size() != 1 || !names.count(n.output(0))) continue;
        for (const auto& a : n.attribute())
            if (a.name() == "value" && a.has_t())
                out[n.output(0)] = tensor_from_proto(a.t(), ".", "Constant '" + n.output(0) + "'");
    }
    for (const auto& name : names)
        KILN_CHECK(out.count(name), kInvalidArgument) << "'" << name << "' is no initializer of '" << path << "'";
    return out;
}

std::string onnx_with_extra_outputs(const std::string& path, const std::vector<std::string>& names) {
    onnx::ModelProto m = parse_embedded(path);
    std::set<std::string> have;
    for (const auto& o : m.graph().output()) have.insert(o.name());
    for (const auto& name : names)
        if (have.insert(name).second) m.mutable_graph()->add_output()->set_name(name);
    return serialize(m);
}

std::string qdq_dequantized_name(const std::string& tensor) { return tensor + "_DequantizeLinear_Output"; }

std::string onnx_to_qdq(const std::string& path, const QdqSpec& spec) {
    onnx::ModelProto m = parse_embedded(path);
    const int opset = default_opset(m);
    KILN_CHECK(opset >= 10, kInvalidArgument)
        << "'" << path << "' has opset " << opset << "; QuantizeLinear needs opset 10 or later";
    for (const auto& c : spec.constants)
        KILN_CHECK(c.axis < 0 || opset >= 13, kInvalidArgument)
            << "'" << c.tensor << "': per-channel quantization needs opset 13 or later, the model has " << opset
            << " (quantize per tensor)";
    onnx::GraphProto& g = *m.mutable_graph();
    std::vector<onnx::NodeProto> nodes(g.node().begin(), g.node().end());
    NodeNames taken;
    for (const auto& n : nodes)
        if (!n.name().empty()) taken.insert(n.name());
    // Dropped activations: the producer of their input writes their output instead.
    std::set<int> dropped(spec.removed_activations.begin(), spec.removed_activations.end());
    for (int r : dropped)
        for (auto& n : nodes)
            for (auto& o : *n.mutable_output())
                if (o == nodes[r].input(0)) o = nodes[r].output(0);
    for (const auto& c : spec.constants)
        for (auto [node, input] : c.uses) nodes[node].set_input(input, c.dq_output);
    std::set<std::string> graph_outputs;
    for (const auto& o : g.output()) graph_outputs.insert(o.name());
    // Each quantized activation: the consumers read its DequantizeLinear output. A graph output
    // keeps its name: the producer writes "<T>_QuantizeLinear_Input" and the pair ends in T.
    std::unordered_map<std::string, const QdqActivation*> act;
    std::unordered_map<std::string, std::string> renamed;  // consumer input -> dq output
    for (const auto& a : spec.activations) {
        act[a.tensor] = &a;
        if (!graph_outputs.count(a.tensor)) renamed[a.tensor] = qdq_dequantized_name(a.tensor);
    }
    for (auto& n : nodes)
        for (auto& i : *n.mutable_input())
            if (auto it = renamed.find(i); it != renamed.end()) i = it->second;
    std::vector<onnx::NodeProto> out;
    for (const auto& c : spec.constants) add_constant(g, taken, out, c);
    auto quantize_after = [&](const std::string& t) {
        auto it = act.find(t);
        if (it == act.end()) return;
        if (graph_outputs.count(t)) add_pair(g, taken, out, *it->second, t + "_QuantizeLinear_Input", t);
        else add_pair(g, taken, out, *it->second, t, qdq_dequantized_name(t));
    };
    for (const auto& i : g.input()) quantize_after(i.name());
    for (int k = 0; k < static_cast<int>(nodes.size()); ++k) {
        if (dropped.count(k)) continue;
        std::vector<std::string> written(nodes[k].output().begin(), nodes[k].output().end());
        for (auto& o : *nodes[k].mutable_output())
            if (act.count(o) && graph_outputs.count(o)) o += "_QuantizeLinear_Input";
        out.push_back(nodes[k]);
        for (const auto& o : written) quantize_after(o);
    }
    g.clear_node();
    for (auto& n : out) *g.add_node() = std::move(n);
    for (const auto& t : spec.expose) {
        const std::string name = graph_outputs.count(t) ? t : qdq_dequantized_name(t);
        if (graph_outputs.insert(name).second) g.add_output()->set_name(name);
    }
    drop_unused_initializers(g);
    g.clear_value_info();  // shapes of renamed tensors would be stale; ORT and Kiln infer them
    return serialize(m);
}

namespace {

/// The nodes that compute one dynamically quantized MatMul (see DynamicMatMul).
void add_dynamic_matmul(onnx::GraphProto& g, NodeNames& taken, std::vector<onnx::NodeProto>& out,
                        const onnx::NodeProto& mm, const DynamicMatMul& d, std::set<std::string>& quantized_inputs) {
    const std::string a = mm.input(0), y = mm.output(0), base = unique_name(taken, y + "_dyn");
    const std::string aq = a + "_quantized", as = a + "_scale", az = a + "_zero_point";
    if (quantized_inputs.insert(a).second) {  // one DynamicQuantizeLinear per activation
        onnx::NodeProto q = make_node(taken, "DynamicQuantizeLinear", {a}, aq, -1);
        q.add_output(as);
        q.add_output(az);
        out.push_back(q);
    }
    *g.add_initializer() = proto_from_tensor(base + "_w_quantized", d.weight);
    *g.add_initializer() = proto_from_tensor(base + "_w_scale", d.scale);
    out.push_back(make_node(taken, "MatMulInteger", {aq, base + "_w_quantized", az}, base + "_int32", -1));
    onnx::NodeProto cast = make_node(taken, "Cast", {base + "_int32"}, base + "_float", -1);
    onnx::AttributeProto* to = cast.add_attribute();
    to->set_name("to");
    to->set_type(onnx::AttributeProto::INT);
    to->set_i(onnx::TensorProto::FLOAT);
    out.push_back(cast);
    out.push_back(make_node(taken, "Mul", {as, base + "_w_scale"}, base + "_scale", -1));
    out.push_back(make_node(taken, "Mul", {base + "_float", base + "_scale"}, y, -1));
}

}  // namespace

std::string onnx_to_dynamic(const std::string& path, const std::vector<DynamicMatMul>& matmuls) {
    onnx::ModelProto m = parse_embedded(path);
    const int opset = default_opset(m);
    KILN_CHECK(opset >= 11, kInvalidArgument)
        << "'" << path << "' has opset " << opset << "; DynamicQuantizeLinear needs opset 11 or later";
    onnx::GraphProto& g = *m.mutable_graph();
    std::vector<onnx::NodeProto> nodes(g.node().begin(), g.node().end());
    NodeNames taken;
    for (const auto& n : nodes)
        if (!n.name().empty()) taken.insert(n.name());
    std::map<int, const DynamicMatMul*> by_node;
    for (const auto& d : matmuls) by_node[d.node] = &d;
    std::vector<onnx::NodeProto> out;
    std::set<std::string> quantized_inputs;
    for (int k = 0; k < static_cast<int>(nodes.size()); ++k) {
        auto it = by_node.find(k);
        if (it == by_node.end()) out.push_back(nodes[k]);
        else add_dynamic_matmul(g, taken, out, nodes[k], *it->second, quantized_inputs);
    }
    g.clear_node();
    for (auto& n : out) *g.add_node() = std::move(n);
    drop_unused_initializers(g);
    g.clear_value_info();
    return serialize(m);
}

}  // namespace kiln::frontend
