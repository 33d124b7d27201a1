// Opset adapters: old op forms are rewritten into the canonical (latest) form.
#include <gtest/gtest.h>

#include <cfloat>

#include "frontend/onnx/importer.h"
#include "onnx_model_builder.h"
#include "support/error.h"

namespace kiln::frontend {
namespace {

using namespace testing;

std::vector<int64_t> ints_of(const ir::Value* v) {
    EXPECT_TRUE(v && v->is_constant());
    std::vector<int64_t> out;
    if (!v || !v->is_constant()) return out;
    for (int64_t i = 0; i < v->constant().numel(); ++i) out.push_back(v->constant().get_i64(i));
    return out;
}

ErrorKind import_kind(const onnx::ModelProto& m, std::string* msg = nullptr) {
    try {
        import_onnx_bytes(serialize(m));
    } catch (const Error& e) {
        if (msg) *msg = e.what();
        return e.kind();
    }
    ADD_FAILURE() << "expected a kiln::Error";
    return ErrorKind::kInternal;
}

TEST(OnnxAdapters, Dft17AxisAttributeBecomesInputTwo) {
    for (bool given : {true, false}) {
        onnx::ModelProto m = make_model(17);
        auto* g = m.mutable_graph();
        add_input(g, "x", {int64_t{2}, int64_t{8}, int64_t{3}, int64_t{1}});
        auto* d = add_node(g, "DFT", {"x"}, {"y"}, "dft");
        if (given) attr_int(d, "axis", 2);
        add_output(g, "y");
        ir::Graph ig = import_onnx_bytes(serialize(m));
        ir::Node* n = ig.nodes()[0];
        EXPECT_FALSE(n->has_attr("axis"));
        ASSERT_EQ(n->num_inputs(), 3u);
        EXPECT_EQ(n->input(1), nullptr);  // no dft_length
        // DFT-17's default axis is 1; DFT-20's would be -2.
        EXPECT_EQ(ints_of(n->input(2)), std::vector<int64_t>({given ? 2 : 1}));
        EXPECT_EQ(n->output(0)->type().str(), "f32[2,8,3,2]");
    }
}

TEST(OnnxAdapters, RoiAlign10SamplesAsOutputHalfPixel) {
    onnx::ModelProto m = make_model(10);
    auto* g = m.mutable_graph();
    add_input(g, "x", {int64_t{1}, int64_t{1}, int64_t{4}, int64_t{4}});
    add_input(g, "rois", {int64_t{1}, int64_t{4}});
    add_input(g, "idx", {int64_t{1}}, onnx::TensorProto::INT64);
    add_node(g, "RoiAlign", {"x", "rois", "idx"}, {"y"}, "roi");
    add_output(g, "y");
    ir::Graph ig = import_onnx_bytes(serialize(m));
    EXPECT_EQ(ig.nodes()[0]->attr_string("coordinate_transformation_mode", ""), "output_half_pixel");
}

TEST(OnnxAdapters, Clip6AttributesBecomeConstantInputs) {
    onnx::ModelProto m = make_model(6);
    auto* g = m.mutable_graph();
    add_input(g, "x", {int64_t{4}});
    auto* c = add_node(g, "Clip", {"x"}, {"y"}, "clip");
    attr_float(c, "min", -1.0f);
    attr_float(c, "max", 2.0f);
    auto* c2 = add_node(g, "Clip", {"y"}, {"z"}, "clip_max_only");
    attr_float(c2, "max", 0.5f);
    add_output(g, "z");
    ir::Graph ig = import_onnx_bytes(serialize(m));
    ASSERT_EQ(ig.num_nodes(), 2u);
    ir::Node* n = ig.nodes()[0];
    EXPECT_EQ(n->op(), "Clip");
    EXPECT_FALSE(n->has_attr("min"));
    EXPECT_FALSE(n->has_attr("max"));
    ASSERT_EQ(n->num_inputs(), 3u);
    ASSERT_TRUE(n->input(1)->is_constant());
    EXPECT_EQ(n->input(1)->constant().dtype(), DType::kFloat32);
    EXPECT_TRUE(n->input(1)->constant().shape().empty());
    EXPECT_EQ(n->input(1)->constant().get_f64(0), -1.0);
    EXPECT_EQ(n->input(2)->constant().get_f64(0), 2.0);
    ir::Node* n2 = ig.nodes()[1];
    ASSERT_EQ(n2->num_inputs(), 3u);
    EXPECT_EQ(n2->input(1), nullptr);  // absent min: unbounded
    EXPECT_EQ(n2->input(2)->constant().get_f64(0), 0.5);
}

TEST(OnnxAdapters, Clip11IsLeftAlone) {
    onnx::ModelProto m = make_model(11);
    auto* g = m.mutable_graph();
    add_input(g, "x", {int64_t{4}});
    add_float_init(g, "lo", {}, {0.0f});
    add_node(g, "Clip", {"x", "lo"}, {"y"});
    add_output(g, "y");
    ir::Graph ig = import_onnx_bytes(serialize(m));
    EXPECT_EQ(ig.nodes()[0]->num_inputs(), 2u);
    EXPECT_EQ(ig.nodes()[0]->input(1), ig.find_value("lo"));
}

TEST(OnnxAdapters, Softmax11CoercesTo2D) {
    onnx::ModelProto m = make_model(11);
    auto* g = m.mutable_graph();
    add_input(g, "x", {int64_t{2}, int64_t{3}, int64_t{4}});
    attr_int(add_node(g, "Softmax", {"x"}, {"y"}, "sm"), "axis", 1);
    add_output(g, "y");
    ir::Graph ig = import_onnx_bytes(serialize(m));
    std::vector<ir::Node*> ns = ig.nodes();
    ASSERT_EQ(ns.size(), 3u);
    EXPECT_EQ(ns[0]->op(), "Flatten");
    EXPECT_EQ(ns[0]->input(0), ig.inputs()[0]);
    EXPECT_EQ(ns[0]->attr_int("axis", 0), 1);
    EXPECT_EQ(ns[0]->output(0)->type(), ir::TensorType::of_static(DType::kFloat32, {2, 12}));
    EXPECT_EQ(ns[1]->op(), "Softmax");
    EXPECT_EQ(ns[1]->input(0), ns[0]->output(0));
    EXPECT_EQ(ns[1]->attr_int("axis", 0), -1);
    EXPECT_EQ(ns[1]->output(0)->type(), ir::TensorType::of_static(DType::kFloat32, {2, 12}));
    EXPECT_EQ(ns[2]->op(), "Reshape");
    EXPECT_EQ(ns[2]->input(0), ns[1]->output(0));
    EXPECT_EQ(ints_of(ns[2]->input(1)), (std::vector<int64_t>{2, 3, 4}));
    EXPECT_EQ(ns[2]->output(0)->name(), "y");
    EXPECT_EQ(ig.outputs()[0], ns[2]->output(0));
    EXPECT_EQ(ig.outputs()[0]->type(), ir::TensorType::of_static(DType::kFloat32, {2, 3, 4}));
}

TEST(OnnxAdapters, Softmax11DefaultAxisAndLastAxis) {
    // Default axis 1 on a rank-2 input is the last axis: a single Softmax, no reshapes.
    onnx::ModelProto m = make_model(11);
    auto* g = m.mutable_graph();
    add_input(g, "x", {std::string("N"), int64_t{10}});
    add_node(g, "Softmax", {"x"}, {"y"});
    add_output(g, "y");
    ir::Graph ig = import_onnx_bytes(serialize(m));
    ASSERT_EQ(ig.num_nodes(), 1u);
    EXPECT_EQ(ig.nodes()[0]->op(), "Softmax");
    EXPECT_EQ(ig.nodes()[0]->attr_int("axis", 0), -1);
    // Softmax-13 keeps its axis: no coercion.
    onnx::ModelProto m13 = make_model(13);
    auto* g13 = m13.mutable_graph();
    add_input(g13, "x", {int64_t{2}, int64_t{3}, int64_t{4}});
    attr_int(add_node(g13, "Softmax", {"x"}, {"y"}), "axis", 1);
    add_output(g13, "y");
    ir::Graph ig13 = import_onnx_bytes(serialize(m13));
    ASSERT_EQ(ig13.num_nodes(), 1u);
    EXPECT_EQ(ig13.nodes()[0]->attr_int("axis", 0), 1);
}

TEST(OnnxAdapters, Softmax11SymbolicShapeReshapesToShapeOfInput) {
    // A symbolic dim: the result is reshaped back to Shape(x), which compile() folds once the
    // session binds N.
    onnx::ModelProto m = make_model(11);
    auto* g = m.mutable_graph();
    add_input(g, "x", {std::string("N"), int64_t{3}, int64_t{4}});
    attr_int(add_node(g, "LogSoftmax", {"x"}, {"y"}, "sm"), "axis", 1);
    add_output(g, "y");
    ir::Graph ig = import_onnx_bytes(serialize(m));
    std::vector<std::string> ops;
    for (const ir::Node* n : ig.nodes()) ops.push_back(n->op());
    EXPECT_EQ(ops, (std::vector<std::string>{"Flatten", "LogSoftmax", "Shape", "Reshape"}));
    const std::vector<ir::Node*> ns = ig.nodes();
    EXPECT_EQ(ns[2]->input(0), ig.inputs()[0]);
    EXPECT_EQ(ns[3]->input(1), ns[2]->output(0));
    EXPECT_EQ(ns[3]->output(0)->name(), "y");
}

TEST(OnnxAdapters, Softmax12UnknownRank) {
    // The input's rank is unknown at import (a Reshape to a computed shape, as in the PP-OCRv4
    // recogniser): Flatten at the given axis works at any rank, so the import needs no rank.
    onnx::ModelProto m = make_model(12);
    auto* g = m.mutable_graph();
    add_input(g, "x", {int64_t{2}, int64_t{3}, int64_t{4}, int64_t{5}});
    add_input(g, "s", {int64_t{4}}, onnx::TensorProto::INT64);
    add_node(g, "Reshape", {"x", "s"}, {"r"});
    attr_int(add_node(g, "Hardmax", {"r"}, {"y"}, "hm"), "axis", 3);
    add_output(g, "y");
    ir::Graph ig = import_onnx_bytes(serialize(m));
    std::vector<std::string> ops;
    for (const ir::Node* n : ig.nodes()) ops.push_back(n->op());
    EXPECT_EQ(ops, (std::vector<std::string>{"Reshape", "Flatten", "Hardmax", "Shape", "Reshape"}));
    EXPECT_EQ(ig.nodes()[1]->attr_int("axis", 0), 3);
    EXPECT_EQ(ig.nodes()[2]->attr_int("axis", 0), -1);
}

TEST(OnnxAdapters, Softmax12AfterBroadcastOfUnknownRank) {
    // Add(unknown, bias[5]) must not pass for rank 1 (the PP-OCRv4 recogniser's last Softmax
    // reads MatMul + bias of a computed Reshape): an unknown input leaves the output unknown.
    onnx::ModelProto m = make_model(12);
    auto* g = m.mutable_graph();
    add_input(g, "x", {int64_t{2}, int64_t{3}, int64_t{4}, int64_t{5}});
    add_input(g, "s", {int64_t{4}}, onnx::TensorProto::INT64);
    add_float_init(g, "bias", {5}, {1, 2, 3, 4, 5});
    add_node(g, "Reshape", {"x", "s"}, {"r"});
    add_node(g, "Add", {"r", "bias"}, {"a"});
    attr_int(add_node(g, "Softmax", {"a"}, {"y"}, "sm"), "axis", 2);
    add_output(g, "y");
    ir::Graph ig = import_onnx_bytes(serialize(m));
    std::vector<std::string> ops;
    for (const ir::Node* n : ig.nodes()) ops.push_back(n->op());
    EXPECT_EQ(ops, (std::vector<std::string>{"Reshape", "Add", "Flatten", "Softmax", "Shape", "Reshape"}));
    EXPECT_EQ(ig.nodes()[2]->attr_int("axis", 0), 2);
}

TEST(OnnxAdapters, Reshape1ShapeAttribute) {
    onnx::ModelProto m = make_model(1);
    auto* g = m.mutable_graph();
    add_input(g, "x", {int64_t{2}, int64_t{6}});
    attr_ints(add_node(g, "Reshape", {"x"}, {"y"}), "shape", {3, 4});
    add_output(g, "y");
    ir::Graph ig = import_onnx_bytes(serialize(m));
    ir::Node* n = ig.nodes()[0];
    EXPECT_FALSE(n->has_attr("shape"));
    ASSERT_EQ(n->num_inputs(), 2u);
    EXPECT_EQ(ints_of(n->input(1)), (std::vector<int64_t>{3, 4}));
    EXPECT_EQ(n->input(1)->constant().dtype(), DType::kInt64);
}

onnx::ModelProto batchnorm_model(int opset, int64_t spatial) {
    onnx::ModelProto m = make_model(opset);
    auto* g = m.mutable_graph();
    add_input(g, "x", {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{3}});
    for (const char* p : {"scale", "bias", "mean", "var"}) add_float_init(g, p, {2}, {1.0f, 2.0f});
    auto* bn = add_node(g, "BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y"}, "bn");
    attr_int(bn, "spatial", spatial);
    attr_int(bn, "is_test", 1);
    attr_float(bn, "epsilon", 1e-3f);
    add_output(g, "y");
    return m;
}

TEST(OnnxAdapters, BatchNormLegacyAttributes) {
    ir::Graph ig = import_onnx_bytes(serialize(batchnorm_model(6, 1)));
    ir::Node* n = ig.nodes()[0];
    EXPECT_FALSE(n->has_attr("spatial"));
    EXPECT_FALSE(n->has_attr("is_test"));
    EXPECT_FLOAT_EQ(static_cast<float>(n->attr_float("epsilon", 0)), 1e-3f);
    std::string msg;
    EXPECT_EQ(import_kind(batchnorm_model(7, 0), &msg), ErrorKind::kUnsupported);
    EXPECT_NE(msg.find("spatial=0"), std::string::npos) << msg;
}

TEST(OnnxAdapters, Concat1DefaultAxisAndGemm6Broadcast) {
    onnx::ModelProto m = make_model(1);
    auto* g = m.mutable_graph();
    add_input(g, "a", {int64_t{2}, int64_t{3}});
    add_input(g, "b", {int64_t{2}, int64_t{5}});
    add_node(g, "Concat", {"a", "b"}, {"c"});
    add_output(g, "c");
    ir::Graph ig = import_onnx_bytes(serialize(m));
    EXPECT_EQ(ig.nodes()[0]->attr_int("axis", -99), 1);
    EXPECT_EQ(ig.outputs()[0]->type(), ir::TensorType::of_static(DType::kFloat32, {2, 8}));

    onnx::ModelProto gm = make_model(6);
    auto* gg = gm.mutable_graph();
    add_input(gg, "a", {int64_t{2}, int64_t{3}});
    add_float_init(gg, "w", {3, 4}, std::vector<float>(12, 1.0f));
    add_float_init(gg, "c", {4}, std::vector<float>(4, 0.5f));
    attr_int(add_node(gg, "Gemm", {"a", "w", "c"}, {"y"}), "broadcast", 1);
    add_output(gg, "y");
    ir::Graph gi = import_onnx_bytes(serialize(gm));
    EXPECT_FALSE(gi.nodes()[0]->has_attr("broadcast"));
}

TEST(OnnxAdapters, LegacyArithmeticBroadcastAxis) {
    onnx::ModelProto m = make_model(6);
    auto* g = m.mutable_graph();
    add_input(g, "x", {int64_t{1}, int64_t{3}, int64_t{2}, int64_t{2}});
    add_float_init(g, "b", {3}, {1, 2, 3});
    auto* add = add_node(g, "Add", {"x", "b"}, {"y"});
    attr_int(add, "broadcast", 1);
    attr_int(add, "axis", 1);
    add_output(g, "y");
    ir::Graph ig = import_onnx_bytes(serialize(m));
    ir::Node* n = ig.nodes()[0];
    EXPECT_FALSE(n->has_attr("broadcast"));
    EXPECT_FALSE(n->has_attr("axis"));
    ASSERT_TRUE(n->input(1)->is_constant());
    EXPECT_EQ(n->input(1)->constant().shape(), (Shape{3, 1, 1}));
    EXPECT_EQ(n->input(1)->constant().get_f64(2), 3.0);
}

}  // namespace
}  // namespace kiln::frontend

// Adapters for ops the registry may not ship yet, driven directly with a synthetic OpDef.
#include "frontend/onnx/adapters.h"

namespace kiln::frontend {
namespace {

struct DirectAdapt {
    ir::Graph g;
    int counter = 0;
    PendingNode run(PendingNode n, const std::vector<int>& versions, int opset) {
        op::OpDef def;
        def.name = n.op;
        def.onnx_versions = versions;
        AdapterContext ctx{g, opset,
                           [this](PendingNode p) {
                               return g.add_node(p.op, p.inputs, p.attrs, p.output_types, p.output_names, p.name);
                           },
                           [](const ir::Value*) { return true; },
                           [this](const std::string& h) { return h + "_" + std::to_string(counter++); }};
        adapt_node(n, def, ctx);
        return n;
    }
};

PendingNode pending(const std::string& op, ir::Value* x) {
    PendingNode n;
    n.op = op;
    n.name = "n";
    n.inputs = {x};
    n.output_names = {"y"};
    n.output_types = {ir::TensorType()};
    return n;
}

TEST(OnnxAdapters, AttributeToInputRewrites) {
    DirectAdapt d;
    ir::Value* x = d.g.add_input("x", ir::TensorType::of_static(DType::kFloat32, {2, 3}));

    PendingNode u = pending("Unsqueeze", x);
    u.attrs["axes"] = std::vector<int64_t>{0, 3};
    PendingNode ua = d.run(u, {1, 11, 13}, 11);
    EXPECT_FALSE(ua.attrs.count("axes"));
    ASSERT_EQ(ua.inputs.size(), 2u);
    EXPECT_EQ(ua.inputs[1]->constant().get_i64(1), 3);
    // An op layer still implementing the attribute form (claims no 13) is left alone.
    PendingNode ub = d.run(u, {1, 11}, 11);
    EXPECT_TRUE(ub.attrs.count("axes"));
    EXPECT_EQ(ub.inputs.size(), 1u);

    PendingNode s = pending("Slice", x);
    s.attrs["starts"] = std::vector<int64_t>{1};
    s.attrs["ends"] = std::vector<int64_t>{3};
    PendingNode sa = d.run(s, {1, 10, 11, 13}, 9);
    ASSERT_EQ(sa.inputs.size(), 3u);  // no axes: trailing slot trimmed
    EXPECT_EQ(sa.inputs[1]->constant().get_i64(0), 1);
    EXPECT_EQ(sa.inputs[2]->constant().get_i64(0), 3);
    EXPECT_TRUE(sa.attrs.empty());

    PendingNode p = pending("Pad", x);
    p.attrs["pads"] = std::vector<int64_t>{0, 1, 0, 1};
    p.attrs["value"] = 2.5;
    p.attrs["mode"] = std::string("constant");
    PendingNode pa = d.run(p, {2, 11, 13, 18, 19}, 2);
    ASSERT_EQ(pa.inputs.size(), 3u);
    EXPECT_EQ(pa.inputs[1]->constant().shape(), (Shape{4}));
    EXPECT_EQ(pa.inputs[2]->constant().dtype(), DType::kFloat32);
    EXPECT_EQ(pa.inputs[2]->constant().get_f64(0), 2.5);
    EXPECT_EQ(std::get<std::string>(pa.attrs.at("mode")), "constant");

    PendingNode c = pending("Cast", x);
    c.attrs["to"] = std::string("INT64");
    PendingNode ca = d.run(c, {1, 6, 9, 13}, 1);
    EXPECT_EQ(std::get<int64_t>(ca.attrs.at("to")), 7);
}

}  // namespace
}  // namespace kiln::frontend
