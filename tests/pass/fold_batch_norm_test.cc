// fold_batch_norm: the rewrite's structure, and the folded weights against the BatchNorm
// formula evaluated here in double precision (an independent reference).
#include "pass/fold_batch_norm.h"

#include <cmath>

#include "pass/eliminate_dead_code.h"
#include "pass/fold_constants.h"
#include "pass_test_util.h"

namespace kiln::pass {
namespace {

const char* kConvBn = R"(
graph g(%x: f32[1,2,5,5]) {
  const %w: f32[2,2,1,1] = [1, 2, 3, 4]
  const %b: f32[2] = [0.5, -1]
  const %scale: f32[2] = [2, 3]
  const %shift: f32[2] = [0.25, 0.75]
  const %mean: f32[2] = [1, -2]
  const %var: f32[2] = [4, 0.25]
  %c = Conv(%x, %w, %b) : f32[1,2,5,5] # name="conv"
  %y = BatchNormalization(%c, %scale, %shift, %mean, %var) {epsilon=0.01} : f32[1,2,5,5]
  return %y
})";

void fold_all(ir::Graph& g) {
    PassContext ctx = compiler::pass_context();
    ASSERT_TRUE(fold_batch_norm(g, ctx));
    fold_constants(g, ctx);
    eliminate_dead_code(g, ctx);
    verify_typed_graph(g);
}

TEST(FoldBatchNorm, ConvBnBecomesOneConvWithFoldedWeights) {
    ir::Graph g = ir::parse_graph(kConvBn);
    fold_all(g);
    ASSERT_EQ(g.num_nodes(), 1u);
    ir::Node* conv = g.nodes()[0];
    EXPECT_EQ(conv->op(), "Conv");
    EXPECT_EQ(conv->name(), "conv");
    EXPECT_EQ(conv->output(0)->name(), "y");  // the graph output keeps its name
    const double w[4] = {1, 2, 3, 4}, b[2] = {0.5, -1}, scale[2] = {2, 3}, shift[2] = {0.25, 0.75},
                 mean[2] = {1, -2}, var[2] = {4, 0.25};
    const Tensor& wf = conv->input(1)->constant();
    const Tensor& bf = conv->input(2)->constant();
    for (int m = 0; m < 2; ++m) {
        double s = scale[m] / std::sqrt(var[m] + 0.01);
        for (int c = 0; c < 2; ++c) EXPECT_NEAR(wf.get_f64(m * 2 + c), w[m * 2 + c] * s, 1e-5);
        EXPECT_NEAR(bf.get_f64(m), (b[m] - mean[m]) * s + shift[m], 1e-5);
    }
}

TEST(FoldBatchNorm, PerChannelScaleAndShiftFoldIntoConv) {
    ir::Graph g = ir::parse_graph(R"(
graph g(%x: f32[1,2,3,3]) {
  const %w: f32[2,2,1,1] = [1, 2, 3, 4]
  const %k: f32[2,1,1] = [10, 100]
  const %t: f32[1,2,1,1] = [1, 2]
  %c = Conv(%x, %w) : f32[1,2,3,3]
  %m = Mul(%c, %k) : f32[1,2,3,3]
  %y = Add(%t, %m) : f32[1,2,3,3]
  return %y
})");
    fold_all(g);
    ASSERT_EQ(g.num_nodes(), 1u);
    const Tensor& wf = g.nodes()[0]->input(1)->constant();
    const Tensor& bf = g.nodes()[0]->input(2)->constant();
    const double want_w[4] = {10, 20, 300, 400}, want_b[2] = {1, 2};
    for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(wf.get_f64(i), want_w[i]);
    for (int i = 0; i < 2; ++i) EXPECT_DOUBLE_EQ(bf.get_f64(i), want_b[i]);
}

TEST(FoldBatchNorm, LeavesSharedConvAndSpatialScaleAlone) {
    // The conv output has a second user; the Mul varies along a spatial axis.
    const char* text = R"(
graph g(%x: f32[1,2,3,3]) {
  const %w: f32[2,2,1,1] = [1, 2, 3, 4]
  const %k: f32[3] = [1, 2, 3]
  %c = Conv(%x, %w) : f32[1,2,3,3]
  %m = Mul(%c, %k) : f32[1,2,3,3]
  %c2 = Conv(%x, %w) : f32[1,2,3,3]
  %n = Mul(%c2, %k) : f32[1,2,3,3]
  %z = Add(%n, %c2) : f32[1,2,3,3]
  return %m, %z
})";
    EXPECT_PASS_GIVES(fold_batch_norm, text, text);
}

}  // namespace
}  // namespace kiln::pass

namespace kiln::pass {
namespace {

TEST(FoldBatchNorm, GemmWithTransposedWeightsAndBeta) {
    // y = BN(1 * x B^T + 0.5 * C) with B [2,3] (transB), C [2]: B'[n,:] = B[n,:] * s[n],
    // C' = (0.5 * C - mean) * s + shift, beta = 1.
    ir::Graph g = ir::parse_graph(R"(
graph g(%x: f32[4,3]) {
  const %b: f32[2,3] = [1, 2, 3, 4, 5, 6]
  const %c: f32[2] = [2, -4]
  const %scale: f32[2] = [2, 3]
  const %shift: f32[2] = [0.25, 0.75]
  const %mean: f32[2] = [1, -2]
  const %var: f32[2] = [4, 0.25]
  %m = Gemm(%x, %b, %c) {beta=0.5, transB=1} : f32[4,2]
  %y = BatchNormalization(%m, %scale, %shift, %mean, %var) {epsilon=0} : f32[4,2]
  return %y
})");
    fold_all(g);
    ASSERT_EQ(g.num_nodes(), 1u);
    ir::Node* gemm = g.nodes()[0];
    EXPECT_EQ(gemm->op(), "Gemm");
    EXPECT_DOUBLE_EQ(gemm->attr_float("beta", 0), 1.0);
    const double b[6] = {1, 2, 3, 4, 5, 6}, c[2] = {2, -4}, scale[2] = {2, 3}, shift[2] = {0.25, 0.75},
                 mean[2] = {1, -2}, var[2] = {4, 0.25};
    for (int n = 0; n < 2; ++n) {
        double s = scale[n] / std::sqrt(var[n]);
        for (int k = 0; k < 3; ++k) EXPECT_NEAR(gemm->input(1)->constant().get_f64(n * 3 + k), b[n * 3 + k] * s, 1e-5);
        EXPECT_NEAR(gemm->input(2)->constant().get_f64(n), (0.5 * c[n] - mean[n]) * s + shift[n], 1e-5);
    }
}

}  // namespace
}  // namespace kiln::pass
