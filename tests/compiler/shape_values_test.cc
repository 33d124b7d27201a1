// compiler/shape_values.h: shape arithmetic the exporters write (Shape -> Gather -> Unsqueeze
// -> Concat -> Reshape / Expand, position ids sliced from a buffer, Expand's -1 convention
// through ConstantOfShape / Equal / Where) resolves to symbolic dims (batch*seq included) and
// leaves no shape value behind; what it cannot follow stays for the compile to refuse.
#include <gtest/gtest.h>

#include "compiler/shape_values.h"
#include "ir/graph.h"

namespace kiln::compiler {
namespace {

ir::Dim S(const char* s) { return ir::Dim::sym(s); }

struct Builder {
    ir::Graph g;
    ir::Value* ints(std::vector<int64_t> v, bool scalar = false) {
        Tensor t(DType::kInt64, scalar ? Shape{} : Shape{static_cast<int64_t>(v.size())});
        for (size_t i = 0; i < v.size(); ++i) t.data_as<int64_t>()[i] = v[i];
        return g.add_constant(g.fresh_name("c"), std::move(t));
    }
    // Output types are placeholders: the pass infers them.
    ir::Value* node(const std::string& op, std::vector<ir::Value*> in, ir::AttrMap attrs = {}) {
        return g.add_node(op, in, std::move(attrs), {ir::TensorType(DType::kInt64, {})})->output(0);
    }
    /// Gather(Shape(x), k) unsqueezed to [1] (how PyTorch exports x.size(k) in a shape tuple).
    ir::Value* dim(ir::Value* x, int64_t k) {
        return node("Unsqueeze", {node("Gather", {node("Shape", {x}), ints({k}, true)}, {{"axis", ir::Attr(int64_t{0})}}),
                                  ints({0})});
    }
    int count(const std::string& op) const {
        int c = 0;
        for (const ir::Node* n : g.nodes()) c += n->op() == op;
        return c;
    }
};

TEST(ShapeValues, ReshapeTargetsFromShapesBecomeConstants) {
    Builder b;
    ir::Value* x = b.g.add_input("x", ir::TensorType(DType::kFloat32, {S("batch"), S("seq"), 384}));
    // x.view(x.size()[:-1] + (12, 32)), then .view(-1, 384) written as [batch*seq, 384] from sizes.
    ir::Value* heads = b.node("Reshape", {x, b.node("Concat", {b.dim(x, 0), b.dim(x, 1), b.ints({12, 32})},
                                                    {{"axis", ir::Attr(int64_t{0})}})});
    ir::Value* rows = b.node("Mul", {b.dim(x, 0), b.dim(x, 1)});
    ir::Value* flat = b.node("Reshape", {heads, b.node("Concat", {rows, b.ints({384})}, {{"axis", ir::Attr(int64_t{0})}})});
    b.g.add_output(flat);
    EXPECT_EQ(fold_shape_values(b.g), 2);
    EXPECT_EQ(heads->type().str(), "f32[batch,seq,12,32]");
    EXPECT_EQ(flat->type().shape[0].symbol, "batch*seq");  // quoted in the text form
    EXPECT_EQ(flat->type().str(), "f32[\"batch*seq\",384]");
    EXPECT_EQ(b.count("Shape") + b.count("Gather") + b.count("Concat") + b.count("Mul"), 0);
    const std::vector<ir::Node*> nodes = b.g.nodes();
    ASSERT_EQ(nodes.size(), 2u);
    const Tensor& spec = nodes[1]->input(1)->constant();  // [batch*seq, 384]: -1 inferred as batch*seq
    EXPECT_EQ(spec.get_i64(0), -1);
    EXPECT_EQ(spec.get_i64(1), 384);
}

TEST(ShapeValues, ExpandWithTheMinusOneConventionAndPositionIds) {
    Builder b;
    ir::Value* h = b.g.add_input("h", ir::TensorType(DType::kFloat32, {S("batch"), S("seq"), 384}));
    ir::Value* mask = b.g.add_input("mask", ir::TensorType(DType::kFloat32, {S("batch"), S("seq"), 1}));
    // mask.expand(h.size()) as PyTorch exports it: where(shape == -1, 1, shape).
    ir::Value* shape = b.node("Concat", {b.dim(h, 0), b.dim(h, 1), b.dim(h, 2)}, {{"axis", ir::Attr(int64_t{0})}});
    Tensor one(DType::kInt64, {1});
    one.data_as<int64_t>()[0] = 1;
    ir::Value* ones = b.node("ConstantOfShape", {b.node("Shape", {shape})}, {{"value", ir::Attr(one)}});
    ir::Value* minus = b.node("Mul", {ones, b.ints({-1}, true)});
    ir::Value* target = b.node("Where", {b.node("Equal", {shape, minus}), ones, shape});
    ir::Value* wide = b.node("Expand", {mask, target});
    // position_ids[:, 0:seq] of a [1, 512] buffer.
    Tensor pos(DType::kInt64, {1, 512});
    for (int64_t i = 0; i < 512; ++i) pos.data_as<int64_t>()[i] = i;
    ir::Value* ids = b.node("Slice", {b.g.add_constant("position_ids", pos), b.ints({0}), b.dim(h, 1), b.ints({1}), b.ints({1})});
    b.g.add_output(wide);
    b.g.add_output(ids);
    EXPECT_EQ(fold_shape_values(b.g), 2);
    EXPECT_EQ(wide->type().str(), "f32[batch,seq,384]");
    EXPECT_EQ(b.g.outputs()[1]->type().str(), "i64[1,seq]");
    for (const char* op : {"Shape", "Concat", "Where", "Equal", "ConstantOfShape", "Slice", "Mul"})
        EXPECT_EQ(b.count(op), 0) << op;
    EXPECT_EQ(b.count("KilnDimRange"), 1);
    EXPECT_EQ(b.count("Gather"), 1);  // the buffer at the positions 0..seq-1
}

TEST(ShapeValues, ATargetNoConstantCanSayBecomesKilnReshape) {
    Builder b;
    ir::Value* x = b.g.add_input("x", ir::TensorType(DType::kFloat32, {S("batch"), S("seq"), 16}));
    ir::Value* rows = b.node("Reshape", {x, b.ints({-1, 16})});
    // GPT-2's Conv1D: rows.view(x.size()[:-1] + (16,)), [batch*seq, 16] -> [batch, seq, 16].
    ir::Value* prefix = b.node("Slice", {b.node("Shape", {x}), b.ints({0}), b.ints({-1})});
    ir::Value* y = b.node("Reshape", {rows, b.node("Concat", {prefix, b.ints({16})}, {{"axis", ir::Attr(int64_t{0})}})});
    b.g.add_output(y);
    EXPECT_EQ(fold_shape_values(b.g), 1);
    EXPECT_EQ(rows->type().shape[0].symbol, "batch*seq");
    ASSERT_EQ(b.count("KilnReshape"), 1);
    EXPECT_EQ(b.g.outputs()[0]->type().str(), "f32[batch,seq,16]");
    EXPECT_EQ(b.count("Shape"), 0);
}

TEST(ShapeValues, ExpandOfOneToASymbolicDimAndConstantOfShapeBecomeKilnExpand) {
    Builder b;
    ir::Value* ids = b.g.add_input("ids", ir::TensorType(DType::kInt64, {S("batch"), S("seq")}));
    Tensor row(DType::kInt64, {1, 8});
    for (int64_t i = 0; i < 8; ++i) row.data_as<int64_t>()[i] = i % 2;
    // row[:, :seq].expand(batch, seq), and torch.zeros(ids.size()).
    ir::Value* cut = b.node("Slice", {b.g.add_constant("row", row), b.ints({0}), b.dim(ids, 1), b.ints({1})});
    ir::Value* wide = b.node("Expand", {cut, b.node("Concat", {b.dim(ids, 0), b.dim(ids, 1)}, {{"axis", ir::Attr(int64_t{0})}})});
    ir::Value* zeros = b.node("ConstantOfShape", {b.node("Shape", {ids})});
    b.g.add_output(wide);
    b.g.add_output(zeros);
    EXPECT_EQ(fold_shape_values(b.g), 3);
    EXPECT_EQ(b.g.outputs()[0]->type().str(), "i64[batch,seq]");
    EXPECT_EQ(b.g.outputs()[1]->type().str(), "f32[batch,seq]");  // ConstantOfShape's default fill
    EXPECT_EQ(b.count("KilnExpand"), 2);
    EXPECT_EQ(b.count("Shape"), 0);
}

TEST(ShapeValues, WhatItCannotFollowStays) {
    Builder b;
    ir::Value* x = b.g.add_input("x", ir::TensorType(DType::kFloat32, {S("batch"), S("seq")}));
    // [batch, seq / 2, 2]: seq / 2 is no exact dim expression.
    ir::Value* half = b.node("Div", {b.dim(x, 1), b.ints({2})});
    ir::Value* y = b.node("Reshape", {x, b.node("Concat", {b.dim(x, 0), half, b.ints({2})}, {{"axis", ir::Attr(int64_t{0})}})});
    b.g.add_output(y);
    EXPECT_EQ(fold_shape_values(b.g), 0);
    EXPECT_EQ(b.count("Shape"), 2);  // left for the compile to refuse
    EXPECT_EQ(b.count("KilnReshape"), 0);
}

}  // namespace
}  // namespace kiln::compiler
