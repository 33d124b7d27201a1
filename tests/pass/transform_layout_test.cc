// transform_layout: before/after IR of the conv rewrite, the elementwise sinking and the
// cancellation of transform pairs; the packed weights against the blocked index formula.
#include "pass/transform_layout.h"

#include "pass/eliminate_dead_code.h"
#include "pass/fold_constants.h"
#include "pass/rewrite.h"
#include "pass_test_util.h"

namespace kiln::pass {
namespace {

// w[o, i] = W64[o * 8 + i] (8x8, 1x1 kernel).
const std::string kW = "const %w: f32[8,8,1,1] = [-2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1]\n";

TEST(TransformLayout, ConvReluRunBlockedAndPoolReadsNchw) {
    const std::string before = R"(
graph g(%x: f32[1,8,2,2]) {
)" + kW + R"(
  %c = Conv(%x, %w) : f32[1,8,2,2]
  %r = Relu(%c) : f32[1,8,2,2]
  %p = MaxPool(%r) {kernel_shape=[2,2]} : f32[1,8,1,1]
  return %p
})";
    const std::string after = R"(
graph g(%x: f32[1,8,2,2]) {
)" + kW + R"(
  const %s: i64[6] = [1, 8, 1, 8, 1, 1]
  %xb = KilnLayoutToBlocked(%x) {block=8} : f32[1,1,2,2,8]
  %wr = Reshape(%w, %s) : f32[1,8,1,8,1,1]
  %wt = Transpose(%wr) {perm=[0, 2, 4, 5, 3, 1]} : f32[1,1,1,1,8,8]
  %cb = KilnConv2dNCHWc(%xb, %wt) : f32[1,1,2,2,8]
  %rb = Relu(%cb) : f32[1,1,2,2,8]
  %r = KilnLayoutFromBlocked(%rb) : f32[1,8,2,2]
  %p = MaxPool(%r) {kernel_shape=[2,2]} : f32[1,8,1,1]
  return %p
})";
    EXPECT_PASS_GIVES(transform_layout, before, after);
}

TEST(TransformLayout, ConvChainStaysBlockedWithBiasResidualAndChannelConstant) {
    const std::string before = R"(
graph g(%x: f32[1,8,2,2]) {
)" + kW + R"(
  const %b: f32[8] = [-4, -3, -2, -1, 0, 1, 2, 3]
  const %k: f32[1,8,1,1] = [-4, -3, -2, -1, 0, 1, 2, 3]
  %c1 = Conv(%x, %w, %b) {pads=[0,0,0,0]} : f32[1,8,2,2]
  %r = Relu(%c1) : f32[1,8,2,2]
  %c2 = Conv(%r, %w) : f32[1,8,2,2]
  %s = Mul(%c2, %k) : f32[1,8,2,2]
  %y = Add(%s, %r) : f32[1,8,2,2]
  return %y
})";
    const std::string after = R"(
graph g(%x: f32[1,8,2,2]) {
)" + kW + R"(
  const %b: f32[8] = [-4, -3, -2, -1, 0, 1, 2, 3]
  const %k: f32[1,8,1,1] = [-4, -3, -2, -1, 0, 1, 2, 3]
  const %s6: i64[6] = [1, 8, 1, 8, 1, 1]
  const %s2: i64[2] = [1, 8]
  const %s4: i64[4] = [1, 1, 1, 8]
  %xb = KilnLayoutToBlocked(%x) {block=8} : f32[1,1,2,2,8]
  %wr = Reshape(%w, %s6) : f32[1,8,1,8,1,1]
  %wt = Transpose(%wr) {perm=[0, 2, 4, 5, 3, 1]} : f32[1,1,1,1,8,8]
  %bb = Reshape(%b, %s2) : f32[1,8]
  %c1 = KilnConv2dNCHWc(%xb, %wt, %bb) {pads=[0,0,0,0]} : f32[1,1,2,2,8]
  %r = Relu(%c1) : f32[1,1,2,2,8]
  %c2 = KilnConv2dNCHWc(%r, %wt) : f32[1,1,2,2,8]
  %kb = Reshape(%k, %s4) : f32[1,1,1,8]
  %s = Mul(%c2, %kb) : f32[1,1,2,2,8]
  %yb = Add(%s, %r) : f32[1,1,2,2,8]
  %y = KilnLayoutFromBlocked(%yb) : f32[1,8,2,2]
  return %y
})";
    EXPECT_PASS_GIVES(transform_layout, before, after);
}

TEST(TransformLayout, NchwOperandOfABlockedAddSharesTheConvsBlockedInput) {
    // The residual operand comes from a pool (NCHW): it is blocked once, for the conv and the Add.
    const std::string before = R"(
graph g(%x: f32[1,8,4,4]) {
)" + kW + R"(
  %p = MaxPool(%x) {kernel_shape=[1,1]} : f32[1,8,4,4]
  %c = Conv(%p, %w) : f32[1,8,4,4]
  %y = Add(%c, %p) : f32[1,8,4,4]
  return %y
})";
    const std::string after = R"(
graph g(%x: f32[1,8,4,4]) {
)" + kW + R"(
  const %s: i64[6] = [1, 8, 1, 8, 1, 1]
  %p = MaxPool(%x) {kernel_shape=[1,1]} : f32[1,8,4,4]
  %pb = KilnLayoutToBlocked(%p) {block=8} : f32[1,1,4,4,8]
  %wr = Reshape(%w, %s) : f32[1,8,1,8,1,1]
  %wt = Transpose(%wr) {perm=[0, 2, 4, 5, 3, 1]} : f32[1,1,1,1,8,8]
  %cb = KilnConv2dNCHWc(%pb, %wt) : f32[1,1,4,4,8]
  %yb = Add(%cb, %pb) : f32[1,1,4,4,8]
  %y = KilnLayoutFromBlocked(%yb) : f32[1,8,4,4]
  return %y
})";
    EXPECT_PASS_GIVES(transform_layout, before, after);
}

TEST(TransformLayout, LeavesIndivisibleGroupedAndSpatialBroadcastAlone) {
    // 3 input channels; a grouped conv; a Mul varying along W stays in NCHW after its conv.
    const std::string text = R"(
graph g(%x: f32[1,3,4,4], %z: f32[1,8,4,4]) {
  const %w3: f32[8,3,1,1] = [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 3]
  const %wg: f32[8,4,1,1] = [0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1]
  const %kw: f32[4] = [1, 2, 3, 4]
  %a = Conv(%x, %w3) : f32[1,8,4,4]
  %g = Conv(%z, %wg) {group=2} : f32[1,8,4,4]
  %m = Mul(%g, %kw) : f32[1,8,4,4]
  return %a, %m
})";
    EXPECT_PASS_GIVES(transform_layout, text, text);
}

TEST(TransformLayout, PackedWeightsFollowTheBlockedIndex) {
    // 16 output channels (co = 16), 8 input channels (ci = 8), 3x3 kernel.
    Tensor w(DType::kFloat32, {16, 8, 3, 3});
    for (int64_t i = 0; i < w.numel(); ++i) w.set_f64(i, static_cast<double>(i % 97) - 40);
    ir::Graph g;
    ir::Value* x = g.add_input("x", ir::TensorType::of_static(DType::kFloat32, {1, 8, 5, 5}));
    ir::Value* wc = g.add_constant("w", w);
    ir::Node* conv = add_inferred_node(g, "Conv", {x, wc}, {{"pads", ir::Attr(std::vector<int64_t>{1, 1, 1, 1})}});
    g.add_output(conv->output(0));
    PassContext ctx = compiler::pass_context();
    ASSERT_TRUE(transform_layout(g, ctx));
    fold_constants(g, ctx);
    eliminate_dead_code(g, ctx);
    verify_typed_graph(g);
    const ir::Node* blocked = nullptr;
    for (const ir::Node* n : g.nodes())
        if (n->op() == "KilnConv2dNCHWc") blocked = n;
    ASSERT_NE(blocked, nullptr);
    ASSERT_TRUE(blocked->input(1)->is_constant());
    const Tensor& p = blocked->input(1)->constant();
    ASSERT_EQ(p.shape(), Shape({1, 1, 3, 3, 8, 16}));
    for (int64_t o = 0; o < 16; ++o)
        for (int64_t i = 0; i < 8; ++i)
            for (int64_t kh = 0; kh < 3; ++kh)
                for (int64_t kw = 0; kw < 3; ++kw)
                    ASSERT_EQ(p.get_f64(((kh * 3 + kw) * 8 + i) * 16 + o), w.get_f64(((o * 8 + i) * 3 + kh) * 3 + kw));
    EXPECT_EQ(g.outputs()[0]->producer()->op(), "KilnLayoutFromBlocked");
    EXPECT_EQ(g.outputs()[0]->type().static_shape(), Shape({1, 16, 5, 5}));
}

}  // namespace
}  // namespace kiln::pass
