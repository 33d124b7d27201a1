// compiler/layer_norm_pattern.h: the LayerNorm opset-14 exporters write out becomes one
// LayerNormalization; a pattern whose intermediate is used elsewhere stays. (Numerics: the
// decomposed LayerNorms of tests/python/test_dim_arithmetic.py against ONNX Runtime.)
#include <gtest/gtest.h>

#include "compiler/layer_norm_pattern.h"

namespace kiln::compiler {
namespace {

ir::Value* scalar(ir::Graph& g, float v) {
    Tensor t(DType::kFloat32, Shape{});
    t.data_as<float>()[0] = v;
    return g.add_constant(g.fresh_name("s"), std::move(t));
}

ir::Value* vec(ir::Graph& g, DType dt, int64_t n, double v) {
    Tensor t(dt, {n});
    for (int64_t i = 0; i < n; ++i) t.set_f64(i, v);
    return g.add_constant(g.fresh_name("v"), std::move(t));
}

/// x [batch, seq, 8] through PyTorch's opset-14 LayerNorm; returns the output value.
ir::Value* decomposed(ir::Graph& g, ir::Value* x, ir::Value** d_out = nullptr) {
    const ir::TensorType f32 = x->type();
    ir::Value* axes = vec(g, DType::kInt64, 1, -1);
    auto node = [&](const std::string& op, std::vector<ir::Value*> in) {
        return g.add_node(op, in, {}, {f32})->output(0);
    };
    ir::Value* mean = node("ReduceMean", {x, axes});
    ir::Value* d = node("Sub", {x, mean});
    if (d_out) *d_out = d;
    ir::Value* var = node("ReduceMean", {node("Pow", {d, scalar(g, 2.0f)}), axes});
    ir::Value* n = node("Div", {d, node("Sqrt", {node("Add", {var, scalar(g, 1e-12f)})})});
    return node("Add", {node("Mul", {n, vec(g, DType::kFloat32, 8, 1.5)}), vec(g, DType::kFloat32, 8, 0.25)});
}

int count(const ir::Graph& g, const std::string& op) {
    int c = 0;
    for (const ir::Node* n : g.nodes()) c += n->op() == op;
    return c;
}

TEST(LayerNormPattern, TheExportedFormBecomesOneLayerNormalization) {
    ir::Graph g;
    ir::Value* x = g.add_input("x", ir::TensorType(DType::kFloat32, {ir::Dim::sym("batch"), ir::Dim::sym("seq"), 8}));
    g.add_output(decomposed(g, x));
    EXPECT_EQ(fuse_decomposed_layer_norms(g), 1);
    ASSERT_EQ(g.nodes().size(), 1u);
    const ir::Node* ln = g.nodes()[0];
    EXPECT_EQ(ln->op(), "LayerNormalization");
    EXPECT_EQ(ln->input(0), x);
    EXPECT_FLOAT_EQ(static_cast<float>(ln->attr_float("epsilon", 0)), 1e-12f);
    EXPECT_EQ(ln->attr_int("axis", 0), -1);
    EXPECT_EQ(g.outputs()[0], ln->output(0));
}

TEST(LayerNormPattern, AnIntermediateUsedElsewhereKeepsTheDecomposedForm) {
    ir::Graph g;
    ir::Value* x = g.add_input("x", ir::TensorType(DType::kFloat32, {ir::Dim::sym("batch"), 8}));
    ir::Value* d = nullptr;
    g.add_output(decomposed(g, x, &d));
    g.add_output(d);  // x - mean is also an output
    EXPECT_EQ(fuse_decomposed_layer_norms(g), 0);
    EXPECT_EQ(count(g, "LayerNormalization"), 0);
    EXPECT_EQ(count(g, "ReduceMean"), 2);
}

}  // namespace
}  // namespace kiln::compiler
