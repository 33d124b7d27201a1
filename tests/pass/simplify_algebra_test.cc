// simplify_algebra: before/after IR for each rewrite, and the cases it must leave alone.
#include "pass/simplify_algebra.h"

#include "pass_test_util.h"

namespace kiln::pass {
namespace {

TEST(SimplifyAlgebra, RemovesNeutralArithmeticAndIdentity) {
    EXPECT_PASS_GIVES(simplify_algebra, R"(
graph g(%x: f32[2,3]) {
  const %one: f32[] = [1]
  const %zero: f32[3] = [0, 0, 0]
  %a = Mul(%x, %one) : f32[2,3]
  %b = Add(%zero, %a) : f32[2,3]
  %c = Identity(%b) : f32[2,3]
  %y = Relu(%c) : f32[2,3]
  return %y
})", R"(
graph g(%x: f32[2,3]) {
  %y = Relu(%x) : f32[2,3]
  return %y
})");
}

TEST(SimplifyAlgebra, KeepsABroadcastingNeutralOperand) {
    // x + 0 with a wider zero changes the result's shape: not an identity.
    const char* text = R"(
graph g(%x: f32[3]) {
  const %zero: f32[2,3] = [0, 0, 0, 0, 0, 0]
  %y = Add(%x, %zero) : f32[2,3]
  return %y
})";
    EXPECT_PASS_GIVES(simplify_algebra, text, text);
}

TEST(SimplifyAlgebra, GraphOutputKeepsItsName) {
    EXPECT_PASS_GIVES(simplify_algebra, R"(
graph g(%x: f32[4]) {
  %r = Relu(%x) : f32[4]
  %out = Identity(%r) : f32[4]
  return %out
})", R"(
graph g(%x: f32[4]) {
  %out = Relu(%x) : f32[4]
  return %out
})");
}

TEST(SimplifyAlgebra, IdentityOfAGraphInputStays) {
    // Removing it would rename the model's input or output.
    const char* text = R"(
graph g(%x: f32[4]) {
  %out = Identity(%x) : f32[4]
  return %out
})";
    EXPECT_PASS_GIVES(simplify_algebra, text, text);
}

TEST(SimplifyAlgebra, DoubleTransposeComposesOrVanishes) {
    EXPECT_PASS_GIVES(simplify_algebra, R"(
graph g(%x: f32[2,3,4]) {
  %a = Transpose(%x) {perm=[1,0,2]} : f32[3,2,4]
  %b = Transpose(%a) {perm=[1,0,2]} : f32[2,3,4]
  %c = Transpose(%b) {perm=[2,0,1]} : f32[4,2,3]
  %d = Transpose(%c) {perm=[0,2,1]} : f32[4,3,2]
  %y = Relu(%d) : f32[4,3,2]
  return %y
})", R"(
graph g(%x: f32[2,3,4]) {
  %d = Transpose(%x) {perm=[2,1,0]} : f32[4,3,2]
  %y = Relu(%d) : f32[4,3,2]
  return %y
})");
}

TEST(SimplifyAlgebra, ReshapeChainBecomesOneReshape) {
    EXPECT_PASS_GIVES(simplify_algebra, R"(
graph g(%x: f32[2,3,4]) {
  const %s: i64[2] = [6, 4]
  const %ax: i64[1] = [0]
  %a = Reshape(%x, %s) : f32[6,4]
  %b = Unsqueeze(%a, %ax) : f32[1,6,4]
  %c = Flatten(%b) {axis=2} : f32[6,4]
  %y = Relu(%c) : f32[6,4]
  return %y
})", R"(
graph g(%x: f32[2,3,4]) {
  const %s: i64[2] = [6, 4]
  %c = Reshape(%x, %s) : f32[6,4]
  %y = Relu(%c) : f32[6,4]
  return %y
})");
}

TEST(SimplifyAlgebra, ReassociatesConstants) {
    EXPECT_PASS_GIVES(simplify_algebra, R"(
graph g(%x: f32[2]) {
  const %c1: f32[2] = [1, 2]
  const %c2: f32[] = [10]
  %a = Add(%x, %c1) : f32[2]
  %y = Add(%a, %c2) : f32[2]
  return %y
})", R"(
graph g(%x: f32[2]) {
  const %c1: f32[2] = [1, 2]
  const %c2: f32[] = [10]
  %k = Add(%c1, %c2) : f32[2]
  %y = Add(%x, %k) : f32[2]
  return %y
})");
}

TEST(SimplifyAlgebra, DropoutInInferenceAndSameTypeCast) {
    EXPECT_PASS_GIVES(simplify_algebra, R"(
graph g(%x: f32[2]) {
  %a = Dropout(%x) : f32[2]
  %b = Cast(%a) {to=1} : f32[2]
  %y = Neg(%b) : f32[2]
  return %y
})", R"(
graph g(%x: f32[2]) {
  %y = Neg(%x) : f32[2]
  return %y
})");
}

TEST(SimplifyAlgebra, ConcatOfOneAndPadByZerosVanishButARealPadStays) {
    EXPECT_PASS_GIVES(simplify_algebra, R"(
graph g(%x: f32[1,2,3,3]) {
  const %zeros: i64[8] = [0, 0, 0, 0, 0, 0, 0, 0]
  const %ones: i64[8] = [0, 0, 1, 1, 0, 0, 1, 1]
  %c = Concat(%x) {axis=1} : f32[1,2,3,3]
  %p = Pad(%c, %zeros) {mode="constant"} : f32[1,2,3,3]
  %q = Pad(%p, %ones) {mode="constant"} : f32[1,2,5,5]
  return %q
})", R"(
graph g(%x: f32[1,2,3,3]) {
  const %ones: i64[8] = [0, 0, 1, 1, 0, 0, 1, 1]
  %q = Pad(%x, %ones) {mode="constant"} : f32[1,2,5,5]
  return %q
})");
}

TEST(SimplifyAlgebra, ZeroPadBeforeAveragePoolBecomesItsPads) {
    // The padded zeros count in the divisor: count_include_pad=1. A Pad by a non-zero value, or
    // of the channel axis, or one wider than the window, stays.
    EXPECT_PASS_GIVES(simplify_algebra, R"(
graph g(%x: f32[1,2,5,5]) {
  const %p: i64[8] = [0, 0, 1, 1, 0, 0, 1, 2]
  %xp = Pad(%x, %p) {mode="constant"} : f32[1,2,7,8]
  %y = AveragePool(%xp) {kernel_shape=[3,3], count_include_pad=0} : f32[1,2,5,6]
  return %y
})", R"(
graph g(%x: f32[1,2,5,5]) {
  %y = AveragePool(%x) {kernel_shape=[3,3], count_include_pad=1, pads=[1,1,1,2]} : f32[1,2,5,6]
  return %y
})");
    const char* kept = R"(
graph g(%x: f32[1,2,5,5]) {
  const %pc: i64[8] = [0, 1, 0, 0, 0, 0, 0, 0]
  const %pw: i64[8] = [0, 0, 3, 0, 0, 0, 0, 0]
  const %p: i64[8] = [0, 0, 1, 1, 0, 0, 1, 1]
  const %one: f32[] = [1]
  %a = Pad(%x, %pc) {mode="constant"} : f32[1,3,5,5]
  %ya = AveragePool(%a) {kernel_shape=[3,3]} : f32[1,3,3,3]
  %b = Pad(%x, %pw) {mode="constant"} : f32[1,2,8,5]
  %yb = AveragePool(%b) {kernel_shape=[3,3]} : f32[1,2,6,3]
  %c = Pad(%x, %p, %one) {mode="constant"} : f32[1,2,7,7]
  %yc = AveragePool(%c) {kernel_shape=[3,3]} : f32[1,2,5,5]
  return %ya, %yb, %yc
})";
    EXPECT_PASS_GIVES(simplify_algebra, kept, kept);
}

TEST(SimplifyAlgebra, BatchedRowProductsAgainstOneMatrixBecomeOneProduct) {
    // [5, 1, 8] x [8, 6]: five one-row products sharing B -> one [5, 8] x [8, 6] product.
    EXPECT_PASS_GIVES(simplify_algebra, R"(
graph g(%a: f32[5,1,8], %b: f32[8,6]) {
  %y = MatMul(%a, %b) : f32[5,1,6]
  return %y
})", R"(
graph g(%a: f32[5,1,8], %b: f32[8,6]) {
  const %s1: i64[2] = [5, 8]
  const %s2: i64[3] = [5, 1, 6]
  %r = Reshape(%a, %s1) : f32[5,8]
  %m = MatMul(%r, %b) : f32[5,6]
  %y = Reshape(%m, %s2) : f32[5,1,6]
  return %y
})");
}

TEST(SimplifyAlgebra, ProductsWithManyRowsOrOwnMatricesStay) {
    // M = 16 rows per batch (an encoder's [1, S, d] with S >= 16), a batch of one, and a 3-D B.
    for (const char* text : {R"(
graph g(%a: f32[2,16,8], %b: f32[8,6]) {
  %y = MatMul(%a, %b) : f32[2,16,6]
  return %y
})", R"(
graph g(%a: f32[1,1,8], %b: f32[8,6]) {
  %y = MatMul(%a, %b) : f32[1,1,6]
  return %y
})", R"(
graph g(%a: f32[5,1,8], %b: f32[5,8,6]) {
  %y = MatMul(%a, %b) : f32[5,1,6]
  return %y
})"})
        EXPECT_PASS_GIVES(simplify_algebra, text, text);
}

}  // namespace
}  // namespace kiln::pass
