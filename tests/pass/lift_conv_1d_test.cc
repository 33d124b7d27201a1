// lift_conv_1d: before/after IR of a 1-D conv stack lifted to 2-D convs over a unit height (the
// squeezing reshapes moved below the elementwise ops between the convs and cancelled against the
// next conv's), the operands that broadcast reshaped so they broadcast as before, and what stays
// 1-D. The lifted graph's numbers against ONNX Runtime: tests/models/test_conv_variants_vs_ort.py.
#include "pass/lift_conv_1d.h"

#include "pass_test_util.h"

namespace kiln::pass {
namespace {

const std::string kConsts = R"(
  const %w: f32[4,4,3] = [-2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2, -1, 1, -2, 0, 2]
  const %b: f32[4] = [1, -1, 2, 0]
  const %k: f32[4,1] = [2, 1, -1, 3]
)";

TEST(LiftConv1d, ConvStackWithResidualAndChannelScaleRunsOverAUnitHeight) {
    const std::string before = R"(
graph g(%x: f32[1,4,6]) {)" + kConsts + R"(
  %c1 = Conv(%x, %w, %b) {dilations=[2], pads=[2,2]} : f32[1,4,6]
  %r = Relu(%c1) : f32[1,4,6]
  %s = Mul(%r, %k) : f32[1,4,6]
  %c2 = Conv(%s, %w) {pads=[1,1], strides=[2]} : f32[1,4,3]
  %e = Erf(%c2) : f32[1,4,3]
  %a = Add(%e, %c2) : f32[1,4,3]
  return %a, %r
})";
    const std::string after = R"(
graph g(%x: f32[1,4,6]) {)" + kConsts + R"(
  const %sx: i64[4] = [1, 4, 1, 6]
  const %sw: i64[4] = [4, 4, 1, 3]
  const %sw2: i64[4] = [4, 4, 1, 3]
  const %sr: i64[3] = [1, 4, 6]
  const %sk: i64[3] = [4, 1, 1]
  const %sa: i64[3] = [1, 4, 3]
  %x4 = Reshape(%x, %sx) : f32[1,4,1,6]
  %w4 = Reshape(%w, %sw) : f32[4,4,1,3]
  %c14 = Conv(%x4, %w4, %b) {dilations=[1, 2], group=1, kernel_shape=[1, 3], pads=[0, 2, 0, 2], strides=[1, 1]} : f32[1,4,1,6]
  %w42 = Reshape(%w, %sw2) : f32[4,4,1,3]
  %r4 = Relu(%c14) : f32[1,4,1,6]
  %r = Reshape(%r4, %sr) : f32[1,4,6]
  %k4 = Reshape(%k, %sk) : f32[4,1,1]
  %s4 = Mul(%r4, %k4) : f32[1,4,1,6]
  %c24 = Conv(%s4, %w42) {dilations=[1, 1], group=1, kernel_shape=[1, 3], pads=[0, 1, 0, 1], strides=[1, 2]} : f32[1,4,1,3]
  %e4 = Erf(%c24) : f32[1,4,1,3]
  %a4 = Add(%e4, %c24) : f32[1,4,1,3]
  %a = Reshape(%a4, %sa) : f32[1,4,3]
  return %a, %r
})";
    EXPECT_PASS_GIVES(lift_conv_1d, before, after);
}

TEST(LiftConv1d, NonLiftedOperandsAreReshapedToBroadcastAsBefore) {
    // A graph input of the output's type and a per-position row [W] (rank 1: the last axis in
    // both forms) beside a lifted operand.
    const std::string before = R"(
graph g(%x: f32[1,4,6], %y: f32[1,4,6], %row: f32[6]) {)" + kConsts + R"(
  %c = Conv(%x, %w) {pads=[1,1]} : f32[1,4,6]
  %a = Add(%y, %c) : f32[1,4,6]
  %m = Mul(%a, %row) : f32[1,4,6]
  return %m
})";
    const std::string after = R"(
graph g(%x: f32[1,4,6], %y: f32[1,4,6], %row: f32[6]) {)" + kConsts + R"(
  const %sx: i64[4] = [1, 4, 1, 6]
  const %sw: i64[4] = [4, 4, 1, 3]
  const %sy: i64[4] = [1, 4, 1, 6]
  const %sm: i64[3] = [1, 4, 6]
  %x4 = Reshape(%x, %sx) : f32[1,4,1,6]
  %w4 = Reshape(%w, %sw) : f32[4,4,1,3]
  %c4 = Conv(%x4, %w4) {dilations=[1, 1], group=1, kernel_shape=[1, 3], pads=[0, 1, 0, 1], strides=[1, 1]} : f32[1,4,1,6]
  %y4 = Reshape(%y, %sy) : f32[1,4,1,6]
  %a4 = Add(%y4, %c4) : f32[1,4,1,6]
  %m4 = Mul(%a4, %row) : f32[1,4,1,6]
  %m = Reshape(%m4, %sm) : f32[1,4,6]
  return %m
})";
    EXPECT_PASS_GIVES(lift_conv_1d, before, after);
}

TEST(LiftConv1d, LeavesTwoDConvsRuntimeWeightsAndGraphsWithoutOneDConvsAlone) {
    const std::string two_d = R"(
graph g(%x: f32[1,4,5,6]) {
  const %w: f32[4,4,1,1] = [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]
  %c = Conv(%x, %w) : f32[1,4,5,6]
  %r = Relu(%c) : f32[1,4,5,6]
  return %r
})";
    EXPECT_PASS_GIVES(lift_conv_1d, two_d, two_d);
    // Weights computed at run time (a training graph's parameters): no constant to reshape.
    const std::string runtime_w = R"(
graph g(%x: f32[1,4,6], %w: f32[4,4,3]) {
  %c = Conv(%x, %w) {pads=[1,1]} : f32[1,4,6]
  %r = Relu(%c) : f32[1,4,6]
  return %r
})";
    EXPECT_PASS_GIVES(lift_conv_1d, runtime_w, runtime_w);
}

}  // namespace
}  // namespace kiln::pass
