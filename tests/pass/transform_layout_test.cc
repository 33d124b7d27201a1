// transform_layout: before/after IR of the conv and depthwise rewrites, the sinking through
// elementwise ops, pools and channel concats, and the cancellation of transform pairs; the packed
// weights against the blocked index formula.
#include "pass/transform_layout.h"

#include <algorithm>

#include "pass/eliminate_dead_code.h"
#include "pass/fold_constants.h"
#include "pass/rewrite.h"
#include "pass_test_util.h"

namespace kiln::pass {
namespace {

// w[o, i] = W64[o * 8 + i] (8x8, 1x1 kernel).
/// "[v0, v1, ...]": n small integers (constant data of a test graph).
std::string values(int n) {
    std::string s = "[";
    for (int i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(i % 5 - 2);
    return s + "]";
}

const std::string kW = "const %w: f32[8,8,1,1] = [-2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1]\n";

TEST(TransformLayout, ConvReluRunBlockedAndLpPoolReadsNchw) {
    const std::string before = R"(
graph g(%x: f32[1,8,2,2]) {
)" + kW + R"(
  %c = Conv(%x, %w) : f32[1,8,2,2]
  %r = Relu(%c) : f32[1,8,2,2]
  %p = LpPool(%r) {kernel_shape=[2,2]} : f32[1,8,1,1]
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
  %p = LpPool(%r) {kernel_shape=[2,2]} : f32[1,8,1,1]
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
    // 12 input channels; a grouped conv; a Mul varying along W stays in NCHW after its conv.
    const std::string text = R"(
graph g(%x: f32[1,12,4,4], %z: f32[1,8,4,4]) {
  const %w3: f32[8,12,1,1] = )" + values(96) + R"(
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

// Where oneDNN computes the convs (PassContext::nhwc_8_channel_blocks), 24 and 72 channels are
// one NHWC block each (oneDNN's brgemm convs), a depthwise conv keeps its operand's block, and 32
// channels keep blocks of 16; without the flag, 24 and 72 are blocks of 8.
TEST(TransformLayout, ChannelsOf8Not16AreOneNhwcBlockWhereOneDnnComputes) {
    for (bool nhwc8 : {true, false}) {
        ir::Graph g;
        ir::Value* x = g.add_input("x", ir::TensorType::of_static(DType::kFloat32, {1, 24, 6, 6}));
        auto weights = [&](int64_t m, int64_t c, int64_t k) {
            Tensor w(DType::kFloat32, {m, c, k, k});
            for (int64_t i = 0; i < w.numel(); ++i) w.set_f64(i, static_cast<double>(i % 7) - 3);
            return g.add_constant("w" + std::to_string(m) + "_" + std::to_string(c), w);
        };
        ir::Value* expand = add_inferred_node(g, "Conv", {x, weights(72, 24, 1)}, {})->output(0);
        ir::Value* dw = add_inferred_node(g, "Conv", {expand, weights(72, 1, 3)},
                                          {{"group", ir::Attr(int64_t{72})},
                                           {"pads", ir::Attr(std::vector<int64_t>{1, 1, 1, 1})}})->output(0);
        ir::Value* wide = add_inferred_node(g, "Conv", {dw, weights(32, 72, 1)}, {})->output(0);
        g.add_output(wide);
        PassContext ctx = compiler::pass_context();
        ctx.nhwc_8_channel_blocks = nhwc8;
        ASSERT_TRUE(transform_layout(g, ctx));
        std::vector<std::pair<int64_t, int64_t>> blocks;  // (input block, output block) per conv
        for (const ir::Node* n : g.nodes())
            if (n->op() == "KilnConv2dNCHWc" || n->op() == "KilnDepthwiseConv2dNCHWc")
                blocks.emplace_back(n->input(0)->type().static_shape()[4], n->output(0)->type().static_shape()[4]);
        std::sort(blocks.begin(), blocks.end());
        using B = std::vector<std::pair<int64_t, int64_t>>;
        const B want = nhwc8 ? B{{24, 72}, {72, 16}, {72, 72}} : B{{8, 8}, {8, 8}, {8, 16}};
        EXPECT_EQ(blocks, want) << "nhwc8 " << nhwc8;
    }
}

// An image's 3 channels are blocks of one channel: [1, 3, 4, 4, 1] is the image's own memory,
// so the conversion is a Reshape (a view) and oneDNN reads the image as NCHW.
TEST(TransformLayout, StemConvTakesThreeChannelsAsBlocksOfOne) {
    const std::string before = R"(
graph g(%x: f32[1,3,4,4]) {
  const %w: f32[8,3,1,1] = )" + values(24) + R"(
  %c = Conv(%x, %w) : f32[1,8,4,4]
  return %c
})";
    const std::string after = R"(
graph g(%x: f32[1,3,4,4]) {
  const %w: f32[8,3,1,1] = )" + values(24) + R"(
  const %s: i64[6] = [1, 8, 3, 1, 1, 1]
  const %xs: i64[5] = [1, 3, 4, 4, 1]
  %wr = Reshape(%w, %s) : f32[1,8,3,1,1,1]
  %wt = Transpose(%wr) {perm=[0, 2, 4, 5, 3, 1]} : f32[1,3,1,1,1,8]
  %xb = Reshape(%x, %xs) : f32[1,3,4,4,1]
  %cb = KilnConv2dNCHWc(%xb, %wt) : f32[1,1,4,4,8]
  %c = KilnLayoutFromBlocked(%cb) : f32[1,8,4,4]
  return %c
})";
    EXPECT_PASS_GIVES(transform_layout, before, after);
}

TEST(TransformLayout, DepthwiseConvAndPoolsStayBlocked) {
    // conv -> relu -> depthwise 3x3 (bias) -> relu6 -> max pool -> average pool -> global pool:
    // one ToBlocked at the input; the pooled 1x1 map leaves the blocked layout as a Reshape (a
    // view: its blocks hold the channels in order).
    const std::string consts = kW + "  const %wd: f32[8,1,3,3] = " + values(72) + R"(
  const %bd: f32[8] = [-4, -3, -2, -1, 0, 1, 2, 3]
  const %lo: f32[] = [0]
  const %hi: f32[] = [6]
)";
    const std::string before = R"(
graph g(%x: f32[1,8,8,8]) {
)" + consts + R"(
  %c = Conv(%x, %w) : f32[1,8,8,8]
  %r = Relu(%c) : f32[1,8,8,8]
  %d = Conv(%r, %wd, %bd) {group=8, kernel_shape=[3,3], pads=[1,1,1,1]} : f32[1,8,8,8]
  %r6 = Clip(%d, %lo, %hi) : f32[1,8,8,8]
  %m = MaxPool(%r6) {kernel_shape=[2,2], strides=[2,2], storage_order=0} : f32[1,8,4,4]
  %a = AveragePool(%m) {count_include_pad=1, kernel_shape=[3,3], pads=[1,1,1,1]} : f32[1,8,4,4]
  %y = GlobalAveragePool(%a) : f32[1,8,1,1]
  return %y
})";
    const std::string after = R"(
graph g(%x: f32[1,8,8,8]) {
)" + consts + R"(
  const %s6: i64[6] = [1, 8, 1, 8, 1, 1]
  const %s4: i64[4] = [1, 8, 3, 3]
  const %s2: i64[2] = [1, 8]
  const %s11: i64[4] = [1, 8, 1, 1]
  %xb = KilnLayoutToBlocked(%x) {block=8} : f32[1,1,8,8,8]
  %wr = Reshape(%w, %s6) : f32[1,8,1,8,1,1]
  %wt = Transpose(%wr) {perm=[0, 2, 4, 5, 3, 1]} : f32[1,1,1,1,8,8]
  %cb = KilnConv2dNCHWc(%xb, %wt) : f32[1,1,8,8,8]
  %wdr = Reshape(%wd, %s4) : f32[1,8,3,3]
  %wdt = Transpose(%wdr) {perm=[0, 2, 3, 1]} : f32[1,3,3,8]
  %bdb = Reshape(%bd, %s2) : f32[1,8]
  %r = Relu(%cb) : f32[1,1,8,8,8]
  %d = KilnDepthwiseConv2dNCHWc(%r, %wdt, %bdb) {kernel_shape=[3,3], pads=[1,1,1,1]} : f32[1,1,8,8,8]
  %r6 = Clip(%d, %lo, %hi) : f32[1,1,8,8,8]
  %m = KilnMaxPoolNCHWc(%r6) {kernel_shape=[2,2], strides=[2,2]} : f32[1,1,4,4,8]
  %a = KilnAveragePoolNCHWc(%m) {count_include_pad=1, kernel_shape=[3,3], pads=[1,1,1,1]} : f32[1,1,4,4,8]
  %yb = KilnGlobalAveragePoolNCHWc(%a) : f32[1,1,1,1,8]
  %y = Reshape(%yb, %s11) : f32[1,8,1,1]
  return %y
})";
    EXPECT_PASS_GIVES(transform_layout, before, after);
}

TEST(TransformLayout, ChannelConcatOfBlockedBranchesStaysBlocked) {
    // Two conv branches and an NCHW input concatenate blocked (24 channels in blocks of 8); the
    // conv after the concat reads the blocks of 8 it has (not 24's default) without a reorder.
    const std::string consts = kW + "  const %w24: f32[8,24,1,1] = " + values(192) + "\n";
    const std::string before = R"(
graph g(%x: f32[1,8,4,4], %z: f32[1,8,4,4]) {
)" + consts + R"(
  %c1 = Conv(%x, %w) : f32[1,8,4,4]
  %c2 = Conv(%x, %w) : f32[1,8,4,4]
  %r = Relu(%c2) : f32[1,8,4,4]
  %cat = Concat(%c1, %r, %z) {axis=1} : f32[1,24,4,4]
  %y = Conv(%cat, %w24) : f32[1,8,4,4]
  return %y
})";
    const std::string after = R"(
graph g(%x: f32[1,8,4,4], %z: f32[1,8,4,4]) {
)" + consts + R"(
  const %s6: i64[6] = [1, 8, 1, 8, 1, 1]
  const %s24: i64[6] = [1, 8, 3, 8, 1, 1]
  %xb = KilnLayoutToBlocked(%x) {block=8} : f32[1,1,4,4,8]
  %wr = Reshape(%w, %s6) : f32[1,8,1,8,1,1]
  %wt = Transpose(%wr) {perm=[0, 2, 4, 5, 3, 1]} : f32[1,1,1,1,8,8]
  %c1 = KilnConv2dNCHWc(%xb, %wt) : f32[1,1,4,4,8]
  %c2 = KilnConv2dNCHWc(%xb, %wt) : f32[1,1,4,4,8]
  %w24r = Reshape(%w24, %s24) : f32[1,8,3,8,1,1]
  %w24t = Transpose(%w24r) {perm=[0, 2, 4, 5, 3, 1]} : f32[1,3,1,1,8,8]
  %r = Relu(%c2) : f32[1,1,4,4,8]
  %zb = KilnLayoutToBlocked(%z) {block=8} : f32[1,1,4,4,8]
  %cat = Concat(%c1, %r, %zb) {axis=1} : f32[1,3,4,4,8]
  %yb = KilnConv2dNCHWc(%cat, %w24t) : f32[1,1,4,4,8]
  %y = KilnLayoutFromBlocked(%yb) : f32[1,8,4,4]
  return %y
})";
    EXPECT_PASS_GIVES(transform_layout, before, after);
}

TEST(TransformLayout, LeavesUsedIndicesSpatialConcatAndDepthMultiplierAlone) {
    // A MaxPool whose Indices are used, a Concat along H, a Concat with 4 (< block) channels and
    // a depthwise conv with channel multiplier 2 read NCHW.
    const std::string consts = kW + "  const %wm: f32[16,1,1,1] = " + values(16) + "\n";
    const std::string before = R"(
graph g(%x: f32[1,8,2,2], %z: f32[1,4,2,2]) {
)" + consts + R"(
  %c = Conv(%x, %w) : f32[1,8,2,2]
  %p, %i = MaxPool(%c) {kernel_shape=[1,1]} : f32[1,8,2,2], i64[1,8,2,2]
  %h = Concat(%c, %c) {axis=2} : f32[1,8,4,2]
  %q = Concat(%c, %z) {axis=1} : f32[1,12,2,2]
  %d = Conv(%c, %wm) {group=8} : f32[1,16,2,2]
  return %p, %i, %h, %q, %d
})";
    const std::string after = R"(
graph g(%x: f32[1,8,2,2], %z: f32[1,4,2,2]) {
)" + consts + R"(
  const %s6: i64[6] = [1, 8, 1, 8, 1, 1]
  %xb = KilnLayoutToBlocked(%x) {block=8} : f32[1,1,2,2,8]
  %wr = Reshape(%w, %s6) : f32[1,8,1,8,1,1]
  %wt = Transpose(%wr) {perm=[0, 2, 4, 5, 3, 1]} : f32[1,1,1,1,8,8]
  %cb = KilnConv2dNCHWc(%xb, %wt) : f32[1,1,2,2,8]
  %c = KilnLayoutFromBlocked(%cb) : f32[1,8,2,2]
  %p, %i = MaxPool(%c) {kernel_shape=[1,1]} : f32[1,8,2,2], i64[1,8,2,2]
  %h = Concat(%c, %c) {axis=2} : f32[1,8,4,2]
  %q = Concat(%c, %z) {axis=1} : f32[1,12,2,2]
  %d = Conv(%c, %wm) {group=8} : f32[1,16,2,2]
  return %p, %i, %h, %q, %d
})";
    EXPECT_PASS_GIVES(transform_layout, before, after);
}

TEST(TransformLayout, PackedDepthwiseWeightsFollowTheBlockedIndex) {
    // 32 channels (c = 16), 3x3 kernel, bias.
    Tensor w(DType::kFloat32, {32, 1, 3, 3}), b(DType::kFloat32, {32});
    for (int64_t i = 0; i < w.numel(); ++i) w.set_f64(i, static_cast<double>(i % 89) - 40);
    for (int64_t i = 0; i < b.numel(); ++i) b.set_f64(i, static_cast<double>(i) - 16);
    ir::Graph g;
    ir::Value* x = g.add_input("x", ir::TensorType::of_static(DType::kFloat32, {1, 32, 6, 6}));
    ir::Node* conv = add_inferred_node(g, "Conv", {x, g.add_constant("w", w), g.add_constant("b", b)},
                                       {{"group", ir::Attr(int64_t{32})}, {"strides", ir::Attr(std::vector<int64_t>{2, 2})}});
    g.add_output(conv->output(0));
    PassContext ctx = compiler::pass_context();
    ASSERT_TRUE(transform_layout(g, ctx));
    fold_constants(g, ctx);
    eliminate_dead_code(g, ctx);
    verify_typed_graph(g);
    const ir::Node* dw = nullptr;
    for (const ir::Node* n : g.nodes())
        if (n->op() == "KilnDepthwiseConv2dNCHWc") dw = n;
    ASSERT_NE(dw, nullptr);
    ASSERT_TRUE(dw->input(1)->is_constant() && dw->input(2)->is_constant());
    const Tensor& p = dw->input(1)->constant();
    ASSERT_EQ(p.shape(), Shape({2, 3, 3, 16}));
    for (int64_t c = 0; c < 32; ++c) {
        for (int64_t kh = 0; kh < 3; ++kh)
            for (int64_t kw = 0; kw < 3; ++kw)
                ASSERT_EQ(p.get_f64(((c / 16 * 3 + kh) * 3 + kw) * 16 + c % 16), w.get_f64((c * 3 + kh) * 3 + kw));
        ASSERT_EQ(dw->input(2)->constant().get_f64(c), b.get_f64(c));  // [2, 16] row-major = [32]
    }
    EXPECT_EQ(dw->input(2)->type().static_shape(), Shape({2, 16}));
    EXPECT_EQ(dw->output(0)->type().static_shape(), Shape({1, 2, 2, 2, 16}));  // (6 - 3) / 2 + 1
    EXPECT_EQ(g.outputs()[0]->producer()->op(), "KilnLayoutFromBlocked");
}

TEST(TransformLayout, SqueezeExciteAndBatchNormStayBlocked) {
    // Squeeze-and-excitation: the squeeze to 4 channels over the 1x1 map takes them as one block,
    // and the Mul by the [1, 8, 1, 1] channel scale reads it blocked (no layout round trip).
    // A BatchNormalization of a blocked value (after a Concat) becomes a blocked x * s + t. (The
    // FromBlocked of a pooled 1x1 map becomes a Reshape: DepthwiseConvAndPoolsStayBlocked.)
    const std::string consts = kW + "  const %w4: f32[4,8,1,1] = " + values(32) + "\n  const %w8: f32[8,4,1,1] = " +
                               values(32) + R"(
  const %k: f32[8] = [1, 2, 3, 4, 1, 2, 3, 4]
)";
    const std::string before = R"(
graph g(%x: f32[1,8,4,4]) {
)" + consts + R"(
  %c = Conv(%x, %w) : f32[1,8,4,4]
  %p = GlobalAveragePool(%c) : f32[1,8,1,1]
  %q = Conv(%p, %w4) : f32[1,4,1,1]
  %r = Relu(%q) : f32[1,4,1,1]
  %e = Conv(%r, %w8) : f32[1,8,1,1]
  %s = Sigmoid(%e) : f32[1,8,1,1]
  %m = Mul(%c, %s) : f32[1,8,4,4]
  %y = BatchNormalization(%m, %k, %k, %k, %k) {epsilon=0.5} : f32[1,8,4,4]
  return %y
})";
    const std::string after = R"(
graph g(%x: f32[1,8,4,4]) {
)" + consts + R"(
  const %s6: i64[6] = [1, 8, 1, 8, 1, 1]
  const %s4: i64[6] = [1, 4, 1, 8, 1, 1]
  const %s8: i64[6] = [1, 8, 1, 4, 1, 1]
  const %eps: f32[] = [0.5]
  const %sb: i64[4] = [1, 1, 1, 8]
  const %tb: i64[4] = [1, 1, 1, 8]
  %xb = KilnLayoutToBlocked(%x) {block=8} : f32[1,1,4,4,8]
  %wr = Reshape(%w, %s6) : f32[1,8,1,8,1,1]
  %wt = Transpose(%wr) {perm=[0, 2, 4, 5, 3, 1]} : f32[1,1,1,1,8,8]
  %c = KilnConv2dNCHWc(%xb, %wt) : f32[1,1,4,4,8]
  %w4r = Reshape(%w4, %s4) : f32[1,4,1,8,1,1]
  %w4t = Transpose(%w4r) {perm=[0, 2, 4, 5, 3, 1]} : f32[1,1,1,1,8,4]
  %w8r = Reshape(%w8, %s8) : f32[1,8,1,4,1,1]
  %w8t = Transpose(%w8r) {perm=[0, 2, 4, 5, 3, 1]} : f32[1,1,1,1,4,8]
  %p = KilnGlobalAveragePoolNCHWc(%c) : f32[1,1,1,1,8]
  %q = KilnConv2dNCHWc(%p, %w4t) : f32[1,1,1,1,4]
  %r = Relu(%q) : f32[1,1,1,1,4]
  %e = KilnConv2dNCHWc(%r, %w8t) : f32[1,1,1,1,8]
  %s = Sigmoid(%e) : f32[1,1,1,1,8]
  %m = Mul(%c, %s) : f32[1,1,4,4,8]
  %ve = Add(%k, %eps) : f32[8]
  %sd = Sqrt(%ve) : f32[8]
  %sc = Div(%k, %sd) : f32[8]
  %ms = Mul(%k, %sc) : f32[8]
  %sh = Sub(%k, %ms) : f32[8]
  %scb = Reshape(%sc, %sb) : f32[1,1,1,8]
  %y1 = Mul(%m, %scb) : f32[1,1,4,4,8]
  %shb = Reshape(%sh, %tb) : f32[1,1,1,8]
  %y2 = Add(%y1, %shb) : f32[1,1,4,4,8]
  %y = KilnLayoutFromBlocked(%y2) : f32[1,8,4,4]
  return %y
})";
    EXPECT_PASS_GIVES(transform_layout, before, after);
}


// Channels no block divides (ShuffleNetV2's 58) are zero-padded to 64 around a dense conv as
// around a depthwise one; between two padded convs the crop and the pad cancel (the ReLU and the
// residual Add sinking through the crop), so the chain runs blocked from its one ToBlocked to its
// one FromBlocked, and the packed weights and bias are zero past the 58 real channels.
TEST(TransformLayout, PaddedChannelsStayBlockedThroughAConvChain) {
    auto weights = [](Shape s, int seed) {
        Tensor t(DType::kFloat32, s);
        for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, static_cast<double>((i * 7 + seed) % 11) - 5);
        return t;
    };
    ir::Graph g;
    ir::Value* x = g.add_input("x", ir::TensorType::of_static(DType::kFloat32, {1, 58, 6, 6}));
    ir::Value* w1 = g.add_constant("w1", weights({58, 58, 1, 1}, 1));
    ir::Value* b1 = g.add_constant("b1", weights({58}, 2));
    ir::Value* wd = g.add_constant("wd", weights({58, 1, 3, 3}, 3));
    ir::Value* w2 = g.add_constant("w2", weights({58, 58, 1, 1}, 4));
    ir::Value* c1 = add_inferred_node(g, "Conv", {x, w1, b1})->output(0);
    ir::Value* r1 = add_inferred_node(g, "Relu", {c1})->output(0);
    ir::Value* d = add_inferred_node(g, "Conv", {r1, wd},
                                     {{"group", ir::Attr(int64_t{58})}, {"pads", ir::Attr(std::vector<int64_t>{1, 1, 1, 1})}})
                       ->output(0);
    ir::Value* c2 = add_inferred_node(g, "Conv", {d, w2})->output(0);
    ir::Value* sum = add_inferred_node(g, "Add", {c2, r1})->output(0);
    g.add_output(add_inferred_node(g, "Relu", {sum})->output(0));
    PassContext ctx = compiler::pass_context();
    ASSERT_TRUE(transform_layout(g, ctx));
    fold_constants(g, ctx);
    eliminate_dead_code(g, ctx);
    verify_typed_graph(g);
    int to = 0, from = 0, convs = 0;
    const ir::Node* first = nullptr;
    for (const ir::Node* n : g.nodes()) {
        if (n->op() == "KilnLayoutToBlocked") {
            ++to;
            EXPECT_EQ(n->attr_int("padded_channels", 0), 64);
            EXPECT_EQ(n->output(0)->type().static_shape(), Shape({1, 4, 6, 6, 16}));
        }
        if (n->op() == "KilnLayoutFromBlocked") ++from;
        if (n->op() == "KilnConv2dNCHWc" || n->op() == "KilnDepthwiseConv2dNCHWc") ++convs;
        if (n->op() == "KilnConv2dNCHWc" && !first) first = n;
    }
    EXPECT_EQ(to, 1);
    EXPECT_EQ(from, 1);
    EXPECT_EQ(convs, 3);
    const ir::Node* out = g.outputs()[0]->producer();
    ASSERT_EQ(out->op(), "KilnLayoutFromBlocked");
    EXPECT_EQ(out->attr_int("channels", 0), 58);
    EXPECT_EQ(g.outputs()[0]->type().static_shape(), Shape({1, 58, 6, 6}));
    // The first conv's packed weights [4, 4, 1, 1, 16, 16] and bias [4, 16]: W and B where both
    // channels are real, 0 past them.
    ASSERT_NE(first, nullptr);
    ASSERT_TRUE(first->input(1)->is_constant() && first->input(2)->is_constant());
    const Tensor& p = first->input(1)->constant();
    const Tensor& pb = first->input(2)->constant();
    const Tensor w = weights({58, 58, 1, 1}, 1), b = weights({58}, 2);
    ASSERT_EQ(p.shape(), Shape({4, 4, 1, 1, 16, 16}));
    for (int64_t o = 0; o < 64; ++o) {
        EXPECT_EQ(pb.get_f64(o), o < 58 ? b.get_f64(o) : 0.0);
        for (int64_t i = 0; i < 64; ++i)
            ASSERT_EQ(p.get_f64((((o / 16) * 4 + i / 16) * 16 + i % 16) * 16 + o % 16),
                      o < 58 && i < 58 ? w.get_f64(o * 58 + i) : 0.0)
                << "o " << o << " i " << i;
    }
}

}  // namespace
}  // namespace kiln::pass
