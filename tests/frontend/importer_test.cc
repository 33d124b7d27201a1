// ONNX import of small models built with the protobuf API: structure, constants, types.
#include <gtest/gtest.h>

#include "frontend/onnx/importer.h"
#include "onnx_model_builder.h"
#include "support/error.h"

namespace kiln::frontend {
namespace {

using namespace testing;

std::vector<std::string> op_list(const ir::Graph& g) {
    std::vector<std::string> ops;
    for (ir::Node* n : g.nodes()) ops.push_back(n->op());
    return ops;
}

std::vector<float> floats_of(const Tensor& t) {
    std::vector<float> v(t.numel());
    for (int64_t i = 0; i < t.numel(); ++i) v[i] = static_cast<float>(t.get_f64(i));
    return v;
}

// x[N,4] -> MatMul(W1) -> Add(b1) -> Relu -> Gemm(W2^T, b2) -> Softmax
onnx::ModelProto mlp_model() {
    onnx::ModelProto m = make_model(13);
    auto* g = m.mutable_graph();
    add_input(g, "x", {std::string("N"), int64_t{4}});
    std::vector<float> w1(32), w2(24);
    for (int i = 0; i < 32; ++i) w1[i] = 0.25f * i - 3.0f;
    for (int i = 0; i < 24; ++i) w2[i] = 1.0f - 0.125f * i;
    add_float_init(g, "W1", {4, 8}, w1, /*raw=*/true);
    add_float_init(g, "b1", {8}, {0, 1, 2, 3, 4, 5, 6, 7});
    add_float_init(g, "W2", {3, 8}, w2);
    add_float_init(g, "b2", {3}, {0.5f, -0.5f, 1.5f}, /*raw=*/true);
    add_node(g, "MatMul", {"x", "W1"}, {"h0"}, "mm1");
    add_node(g, "Add", {"h0", "b1"}, {"h1"}, "add1");
    add_node(g, "Relu", {"h1"}, {"h2"}, "relu1");
    attr_int(add_node(g, "Gemm", {"h2", "W2", "b2"}, {"logits"}, "fc2"), "transB", 1);
    attr_int(add_node(g, "Softmax", {"logits"}, {"y"}, "sm"), "axis", -1);
    add_output(g, "y", {std::string("N"), int64_t{3}});
    return m;
}

TEST(OnnxImport, MlpStructureAndConstants) {
    ir::Graph g = import_onnx_bytes(serialize(mlp_model()));
    EXPECT_EQ(g.name, "test_graph");
    ASSERT_EQ(g.inputs().size(), 1u);
    EXPECT_EQ(g.inputs()[0]->name(), "x");
    const ir::TensorType& xt = g.inputs()[0]->type();
    EXPECT_EQ(xt.dtype, DType::kFloat32);
    ASSERT_EQ(xt.rank(), 2);
    EXPECT_EQ(xt.shape[0], ir::Dim::sym("N"));
    EXPECT_EQ(xt.shape[1], ir::Dim(4));

    EXPECT_EQ(op_list(g), (std::vector<std::string>{"MatMul", "Add", "Relu", "Gemm", "Softmax"}));
    std::vector<ir::Node*> nodes = g.nodes();
    EXPECT_EQ(nodes[0]->name(), "mm1");
    EXPECT_EQ(nodes[0]->input(0), g.inputs()[0]);
    EXPECT_EQ(nodes[1]->input(0), nodes[0]->output(0));
    EXPECT_EQ(nodes[2]->input(0), nodes[1]->output(0));
    EXPECT_EQ(nodes[3]->attr_int("transB", 0), 1);
    EXPECT_EQ(nodes[4]->attr_int("axis", 0), -1);

    ASSERT_EQ(g.constants().size(), 4u);
    ir::Value* w1 = g.find_value("W1");
    ASSERT_NE(w1, nullptr);
    ASSERT_TRUE(w1->is_constant());
    EXPECT_EQ(w1->constant().shape(), (Shape{4, 8}));
    std::vector<float> w1v = floats_of(w1->constant());
    for (int i = 0; i < 32; ++i) EXPECT_EQ(w1v[i], 0.25f * i - 3.0f);
    EXPECT_EQ(floats_of(g.find_value("b2")->constant()), (std::vector<float>{0.5f, -0.5f, 1.5f}));
    EXPECT_EQ(nodes[3]->input(1), g.find_value("W2"));

    ASSERT_EQ(g.outputs().size(), 1u);
    EXPECT_EQ(g.outputs()[0], nodes[4]->output(0));
    EXPECT_EQ(g.outputs()[0]->name(), "y");
    // Declared / inferred: f32[N,3].
    EXPECT_EQ(g.outputs()[0]->type().dtype, DType::kFloat32);
    EXPECT_EQ(g.outputs()[0]->type().rank(), 2);
}

TEST(OnnxImport, ConvModelAttributes) {
    onnx::ModelProto m = make_model(11);
    auto* g = m.mutable_graph();
    add_input(g, "img", {int64_t{1}, int64_t{3}, int64_t{8}, int64_t{8}});
    std::vector<float> w(4 * 3 * 3 * 3);
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 7) - 3.0f;
    add_float_init(g, "w", {4, 3, 3, 3}, w);
    add_float_init(g, "b", {4}, {1, 2, 3, 4}, true);
    auto* conv = add_node(g, "Conv", {"img", "w", "b"}, {"c"}, "conv1");
    attr_ints(conv, "pads", {1, 1, 1, 1});
    attr_ints(conv, "strides", {2, 2});
    attr_ints(conv, "kernel_shape", {3, 3});
    add_node(g, "Relu", {"c"}, {"r"}, "relu");
    auto* pool = add_node(g, "MaxPool", {"r"}, {"p"}, "pool");
    attr_ints(pool, "kernel_shape", {2, 2});
    attr_ints(pool, "strides", {2, 2});
    add_node(g, "Flatten", {"p"}, {"out"}, "flat");
    add_output(g, "out");

    ir::Graph ig = import_onnx_bytes(serialize(m));
    EXPECT_EQ(op_list(ig), (std::vector<std::string>{"Conv", "Relu", "MaxPool", "Flatten"}));
    ir::Node* c = ig.nodes()[0];
    EXPECT_EQ(c->attr_ints("pads"), (std::vector<int64_t>{1, 1, 1, 1}));
    EXPECT_EQ(c->attr_ints("strides"), (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(c->num_inputs(), 3u);
    EXPECT_EQ(c->input(2), ig.find_value("b"));
    const Tensor& wt = ig.find_value("w")->constant();
    EXPECT_EQ(wt.shape(), (Shape{4, 3, 3, 3}));
    for (int64_t i = 0; i < wt.numel(); ++i) EXPECT_EQ(wt.get_f64(i), static_cast<double>(i % 7) - 3.0);
    // Conv [1,4,4,4] -> pool [1,4,2,2] -> flatten [1,16]: inference ran on import.
    EXPECT_EQ(ig.outputs()[0]->type(), ir::TensorType::of_static(DType::kFloat32, {1, 16}));
}

TEST(OnnxImport, InitializerListedAsInputIsConstant) {
    onnx::ModelProto m = make_model(13);
    auto* g = m.mutable_graph();
    add_input(g, "x", {int64_t{2}});
    add_input(g, "bias", {int64_t{2}});
    add_float_init(g, "bias", {2}, {1.5f, 2.5f});
    add_node(g, "Add", {"x", "bias"}, {"y"});
    add_output(g, "y", {int64_t{2}});
    ir::Graph ig = import_onnx_bytes(serialize(m));
    ASSERT_EQ(ig.inputs().size(), 1u);
    EXPECT_EQ(ig.inputs()[0]->name(), "x");
    ASSERT_EQ(ig.constants().size(), 1u);
    EXPECT_EQ(ig.constants()[0]->name(), "bias");
    EXPECT_FALSE(ig.constants()[0]->is_graph_input());
}

TEST(OnnxImport, SymbolicAndUnknownDims) {
    onnx::ModelProto m = make_model(13);
    auto* g = m.mutable_graph();
    add_input(g, "x", {std::string("batch"), std::string(""), int64_t{5}});
    add_node(g, "Relu", {"x"}, {"y"});
    add_output(g, "y");
    ir::Graph ig = import_onnx_bytes(serialize(m));
    const auto& s = ig.inputs()[0]->type().shape;
    ASSERT_EQ(s.size(), 3u);
    EXPECT_EQ(s[0].symbol, "batch");
    EXPECT_EQ(s[1].symbol, "unk__x_1");
    EXPECT_TRUE(s[2].is_static());
    EXPECT_EQ(s[2].value, 5);
}

TEST(OnnxImport, MinusOneAndQuestionMarkDimsAreAnonymous) {
    // paddle2onnx writes a dynamic batch as dim_value -1 and other unknown dims as dim_param "?"
    // (the PP-OCR classifier's input is [-1,3,?,?]); each is its own unknown dim, so H and W
    // may differ at run time.
    onnx::ModelProto m = make_model(11);
    auto* g = m.mutable_graph();
    add_input(g, "x", {int64_t{-1}, int64_t{3}, std::string("?"), std::string("?")});
    add_node(g, "Relu", {"x"}, {"y"});
    add_output(g, "y");
    ir::Graph ig = import_onnx_bytes(serialize(m));
    const auto& s = ig.inputs()[0]->type().shape;
    ASSERT_EQ(s.size(), 4u);
    EXPECT_EQ(s[0].symbol, "unk__x_0");
    EXPECT_EQ(s[1], ir::Dim(3));
    EXPECT_EQ(s[2].symbol, "unk__x_2");
    EXPECT_EQ(s[3].symbol, "unk__x_3");

    // Below -1 is still malformed.
    onnx::ModelProto bad = make_model(11);
    auto* bg = bad.mutable_graph();
    add_input(bg, "x", {int64_t{-2}, int64_t{3}});
    add_node(bg, "Relu", {"x"}, {"y"});
    add_output(bg, "y");
    try {
        import_onnx_bytes(serialize(bad));
        ADD_FAILURE() << "expected a kiln::Error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidModel);
        EXPECT_NE(std::string(e.what()).find("graph input 'x' has negative dimension -2 at axis 0"), std::string::npos)
            << e.what();
    }
}

TEST(OnnxImport, ConstantNodesBecomeConstants) {
    onnx::ModelProto m = make_model(13);
    auto* g = m.mutable_graph();
    add_input(g, "x", {int64_t{3}});
    attr_float(add_node(g, "Constant", {}, {"c_f"}), "value_float", 2.5f);
    attr_floats(add_node(g, "Constant", {}, {"c_fs"}), "value_floats", {1, 2, 3});
    attr_int(add_node(g, "Constant", {}, {"c_i"}), "value_int", -7);
    attr_ints(add_node(g, "Constant", {}, {"c_is"}), "value_ints", {4, 5});
    auto* ct = add_node(g, "Constant", {}, {"c_t"});
    auto* a = ct->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::INT32);
    a->mutable_t()->add_dims(2);
    a->mutable_t()->add_int32_data(10);
    a->mutable_t()->add_int32_data(-20);
    add_node(g, "Add", {"x", "c_fs"}, {"y"});
    add_output(g, "y");
    ir::Graph ig = import_onnx_bytes(serialize(m));
    EXPECT_EQ(op_list(ig), (std::vector<std::string>{"Add"}));
    const Tensor& f = ig.find_value("c_f")->constant();
    EXPECT_EQ(f.dtype(), DType::kFloat32);
    EXPECT_TRUE(f.shape().empty());
    EXPECT_EQ(f.get_f64(0), 2.5);
    EXPECT_EQ(floats_of(ig.find_value("c_fs")->constant()), (std::vector<float>{1, 2, 3}));
    const Tensor& i = ig.find_value("c_i")->constant();
    EXPECT_EQ(i.dtype(), DType::kInt64);
    EXPECT_EQ(i.get_i64(0), -7);
    const Tensor& is = ig.find_value("c_is")->constant();
    EXPECT_EQ(is.shape(), (Shape{2}));
    EXPECT_EQ(is.get_i64(1), 5);
    const Tensor& t = ig.find_value("c_t")->constant();
    EXPECT_EQ(t.dtype(), DType::kInt32);
    EXPECT_EQ(t.get_i64(0), 10);
    EXPECT_EQ(t.get_i64(1), -20);
    EXPECT_EQ(ig.nodes()[0]->input(1), ig.find_value("c_fs"));
}

TEST(OnnxImport, OmittedOptionalInputsAndOutputs) {
    onnx::ModelProto m = make_model(13);
    auto* g = m.mutable_graph();
    add_input(g, "x", {int64_t{4}});
    add_float_init(g, "hi", {}, {6.0f});
    add_node(g, "Clip", {"x", "", "hi"}, {"y"}, "clip");
    add_node(g, "Clip", {"y", "", ""}, {"z", ""}, "clip2");  // trailing empties dropped
    add_output(g, "z");
    ir::Graph ig = import_onnx_bytes(serialize(m));
    ir::Node* c = ig.nodes()[0];
    ASSERT_EQ(c->num_inputs(), 3u);
    EXPECT_EQ(c->input(1), nullptr);
    EXPECT_EQ(c->input(2), ig.find_value("hi"));
    ir::Node* c2 = ig.nodes()[1];
    EXPECT_EQ(c2->num_inputs(), 1u);
    EXPECT_EQ(c2->num_outputs(), 1u);
}

TEST(OnnxImport, OldOpsetConsumedInputsDropped) {
    onnx::ModelProto m = make_model(5);
    auto* g = m.mutable_graph();
    add_input(g, "x", {int64_t{4}});
    attr_ints(add_node(g, "Relu", {"x"}, {"y"}, "r"), "consumed_inputs", {0});
    add_output(g, "y");
    ir::Graph ig = import_onnx_bytes(serialize(m));
    EXPECT_FALSE(ig.nodes()[0]->has_attr("consumed_inputs"));
}

}  // namespace
}  // namespace kiln::frontend
