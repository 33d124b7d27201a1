// fuse_operators: which nodes share a group, on the patterns of TVM's fusion rules.
#include "pass/fuse_operators.h"

#include "pass_test_util.h"

namespace kiln::pass {
namespace {

TEST(FuseOperators, ConvWithBiasActivationAndResidualIsOneGroup) {
    EXPECT_PASS_GIVES(fuse_operators, R"(
graph g(%x: f32[1,4,8,8], %w: f32[4,4,3,3], %skip: f32[1,4,8,8]) {
  const %b: f32[1,4,1,1] = [1, 2, 3, 4]
  %c = Conv(%x, %w) {pads=[1,1,1,1]} : f32[1,4,8,8]
  %cb = Add(%c, %b) : f32[1,4,8,8]
  %r = Add(%cb, %skip) : f32[1,4,8,8]
  %y = Relu(%r) : f32[1,4,8,8]
  return %y
})", R"(
graph g(%x: f32[1,4,8,8], %w: f32[4,4,3,3], %skip: f32[1,4,8,8]) {
  const %b: f32[1,4,1,1] = [1, 2, 3, 4]
  %c = Conv(%x, %w) {pads=[1,1,1,1]} : f32[1,4,8,8] # group=0
  %cb = Add(%c, %b) : f32[1,4,8,8] # group=0
  %r = Add(%cb, %skip) : f32[1,4,8,8] # group=0
  %y = Relu(%r) : f32[1,4,8,8] # group=0
  return %y
})");
}

TEST(FuseOperators, TwoConvsIntoOneAddKeepOneAnchorPerGroup) {
    EXPECT_PASS_GIVES(fuse_operators, R"(
graph g(%x: f32[1,2,4,4], %w: f32[2,2,1,1]) {
  %a = Conv(%x, %w) : f32[1,2,4,4]
  %b = Conv(%x, %w) : f32[1,2,4,4]
  %y = Add(%a, %b) : f32[1,2,4,4]
  return %y
})", R"(
graph g(%x: f32[1,2,4,4], %w: f32[2,2,1,1]) {
  %a = Conv(%x, %w) : f32[1,2,4,4] # group=0
  %b = Conv(%x, %w) : f32[1,2,4,4]
  %y = Add(%a, %b) : f32[1,2,4,4] # group=0
  return %y
})");
}

TEST(FuseOperators, ElementwiseDiamondFusesWhole) {
    // GELU as exporters write it: x feeds two paths that meet again.
    EXPECT_PASS_GIVES(fuse_operators, R"(
graph g(%x: f32[8]) {
  const %s2: f32[] = [1.41421]
  const %one: f32[] = [1]
  const %half: f32[] = [0.5]
  %d = Div(%x, %s2) : f32[8]
  %e = Erf(%d) : f32[8]
  %p = Add(%e, %one) : f32[8]
  %m = Mul(%x, %p) : f32[8]
  %y = Mul(%m, %half) : f32[8]
  return %y
})", R"(
graph g(%x: f32[8]) {
  const %s2: f32[] = [1.41421]
  const %one: f32[] = [1]
  const %half: f32[] = [0.5]
  %d = Div(%x, %s2) : f32[8] # group=0
  %e = Erf(%d) : f32[8] # group=0
  %p = Add(%e, %one) : f32[8] # group=0
  %m = Mul(%x, %p) : f32[8] # group=0
  %y = Mul(%m, %half) : f32[8] # group=0
  return %y
})");
}

TEST(FuseOperators, ReductionTakesItsElementwisePrologueAndEpilogue) {
    EXPECT_PASS_GIVES(fuse_operators, R"(
graph g(%x: f32[4,8]) {
  const %ax: i64[1] = [1]
  %e = Exp(%x) : f32[4,8]
  %s = ReduceSum(%e, %ax) : f32[4,1]
  %y = Log(%s) : f32[4,1]
  return %y
})", R"(
graph g(%x: f32[4,8]) {
  const %ax: i64[1] = [1]
  %e = Exp(%x) : f32[4,8] # group=0
  %s = ReduceSum(%e, %ax) : f32[4,1] # group=0
  %y = Log(%s) : f32[4,1] # group=0
  return %y
})");
}

TEST(FuseOperators, GraphOutputsAndOpaqueOpsBoundGroups) {
    // %r is a graph output read on by Tanh: an elementwise output joins its user's group as one
    // more output of that kernel (a training step's updated optimizer state, which the parameter
    // update reads); Softmax is opaque and bounds the group.
    EXPECT_PASS_GIVES(fuse_operators, R"(
graph g(%x: f32[4,8]) {
  %a = Neg(%x) : f32[4,8]
  %r = Relu(%a) : f32[4,8]
  %t = Tanh(%r) : f32[4,8]
  %s = Softmax(%t) {axis=1} : f32[4,8]
  %y = Exp(%s) : f32[4,8]
  return %r, %y
})", R"(
graph g(%x: f32[4,8]) {
  %a = Neg(%x) : f32[4,8] # group=0
  %r = Relu(%a) : f32[4,8] # group=0
  %t = Tanh(%r) : f32[4,8] # group=0
  %s = Softmax(%t) {axis=1} : f32[4,8]
  %y = Exp(%s) : f32[4,8]
  return %r, %y
})");
    // A graph output that is not injective (a reduction) still ends its group: nothing fuses
    // past it into its user.
    EXPECT_PASS_GIVES(fuse_operators, R"(
graph g(%x: f32[4,8]) {
  const %ax: i64[1] = [1]
  %a = Neg(%x) : f32[4,8]
  %m = ReduceSum(%a, %ax) : f32[4,1]
  %e = Exp(%m) : f32[4,1]
  return %m, %e
})", R"(
graph g(%x: f32[4,8]) {
  const %ax: i64[1] = [1]
  %a = Neg(%x) : f32[4,8] # group=0
  %m = ReduceSum(%a, %ax) : f32[4,1] # group=0
  %e = Exp(%m) : f32[4,1]
  return %m, %e
})");
}

TEST(FuseOperators, InjectiveChainsFuseButNotIntoAConvEpilogue) {
    EXPECT_PASS_GIVES(fuse_operators, R"(
graph g(%x: f32[2,3], %w: f32[3,4]) {
  const %s: i64[3] = [2, 2, 2]
  %m = MatMul(%x, %w) : f32[2,4]
  %r = Reshape(%m, %s) : f32[2,2,2]
  %y = Transpose(%r) {perm=[2,0,1]} : f32[2,2,2]
  return %y
})", R"(
graph g(%x: f32[2,3], %w: f32[3,4]) {
  const %s: i64[3] = [2, 2, 2]
  %m = MatMul(%x, %w) : f32[2,4]
  %r = Reshape(%m, %s) : f32[2,2,2] # group=0
  %y = Transpose(%r) {perm=[2,0,1]} : f32[2,2,2] # group=0
  return %y
})");
}

// The attention's head merge: a Transpose that moves the contiguous axis stays out of the
// Reshape after it (alone it takes its tiled schedule; the Reshape is then a view), while one
// that keeps the last axis, and a Reshape before a Transpose (the head split), still fuse.
TEST(FuseOperators, ATransposeMovingTheLastAxisStaysOutOfTheReshapeAfterIt) {
    EXPECT_PASS_GIVES(fuse_operators, R"(
graph g(%k: f32[2,3,4,8], %v: f32[2,3,8,4], %x: f32[16,12]) {
  const %s: i64[2] = [16, 12]
  const %h: i64[4] = [2, 8, 3, 4]
  %kt = Transpose(%k) {perm=[0,3,1,2]} : f32[2,8,3,4]
  %km = Reshape(%kt, %s) : f32[16,12]
  %vt = Transpose(%v) {perm=[0,2,1,3]} : f32[2,8,3,4]
  %vm = Reshape(%vt, %s) : f32[16,12]
  %xr = Reshape(%x, %h) : f32[2,8,3,4]
  %xt = Transpose(%xr) {perm=[0,2,3,1]} : f32[2,3,4,8]
  return %km, %vm, %xt
})", R"(
graph g(%k: f32[2,3,4,8], %v: f32[2,3,8,4], %x: f32[16,12]) {
  const %s: i64[2] = [16, 12]
  const %h: i64[4] = [2, 8, 3, 4]
  %kt = Transpose(%k) {perm=[0,3,1,2]} : f32[2,8,3,4]
  %km = Reshape(%kt, %s) : f32[16,12]
  %vt = Transpose(%v) {perm=[0,2,1,3]} : f32[2,8,3,4] # group=0
  %vm = Reshape(%vt, %s) : f32[16,12] # group=0
  %xr = Reshape(%x, %h) : f32[2,8,3,4] # group=1
  %xt = Transpose(%xr) {perm=[0,2,3,1]} : f32[2,3,4,8] # group=1
  return %km, %vm, %xt
})");
}

}  // namespace
}  // namespace kiln::pass
