// gelu_from_erf: before/after IR of the written-out exact GELU (PyTorch's opset-17 export and its
// variants) becoming one Gelu node, and the chains it must leave alone. Gelu's gradient against
// a numerical one: tests/autodiff/elementwise_gradient_test.cc; a training step through the
// rewritten encoder against PyTorch: tests/training/test_vs_torch.py.
#include "pass/gelu_from_erf.h"

#include "pass_test_util.h"

namespace kiln::pass {
namespace {

const auto kPass = [](ir::Graph& g, const PassContext&) { return gelu_from_erf(g); };

TEST(GeluFromErf, PyTorchsExportBecomesOneGelu) {
    const std::string before = R"(
graph g(%x: f32[2,8]) {
  const %sqrt2: f32[] = [1.4142135]
  const %one: f32[] = [1]
  const %half: f32[] = [0.5]
  %d = Div(%x, %sqrt2) : f32[2,8]
  %e = Erf(%d) : f32[2,8]
  %a = Add(%e, %one) : f32[2,8]
  %m = Mul(%x, %a) : f32[2,8]
  %y = Mul(%m, %half) : f32[2,8]
  %z = Relu(%y) : f32[2,8]
  return %z
})";
    const std::string after = R"(
graph g(%x: f32[2,8]) {
  %y = Gelu(%x) {approximate="none"} : f32[2,8]
  %z = Relu(%y) : f32[2,8]
  return %z
})";
    EXPECT_PASS_GIVES(kPass, before, after);
}

TEST(GeluFromErf, ScaleByReciprocalAndOperandsInEitherOrder) {
    // x * (1/sqrt 2), constants first, the GELU's result a graph output.
    const std::string before = R"(
graph g(%x: f32[3,4]) {
  const %r: f32[1] = [0.70710677]
  const %one: f32[] = [1]
  const %half: f32[] = [0.5]
  %d = Mul(%r, %x) : f32[3,4]
  %e = Erf(%d) : f32[3,4]
  %a = Add(%one, %e) : f32[3,4]
  %m = Mul(%a, %x) : f32[3,4]
  %y = Mul(%half, %m) : f32[3,4]
  return %y
})";
    const std::string after = R"(
graph g(%x: f32[3,4]) {
  %y = Gelu(%x) {approximate="none"} : f32[3,4]
  return %y
})";
    EXPECT_PASS_GIVES(kPass, before, after);
}

TEST(GeluFromErf, LeavesChainsThatAreNotExactlyGelu) {
    // An intermediate read elsewhere, a wrong constant, the product with another tensor, and a
    // constant that broadcasts the result to a larger shape: each stays as written.
    const std::string before = R"(
graph g(%x: f32[2,4], %w: f32[2,4]) {
  const %sqrt2: f32[] = [1.4142135]
  const %two: f32[] = [2]
  const %one: f32[] = [1]
  const %half: f32[] = [0.5]
  const %halves: f32[3,2,4] = [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
  %d1 = Div(%x, %sqrt2) : f32[2,4]
  %e1 = Erf(%d1) : f32[2,4]
  %a1 = Add(%e1, %one) : f32[2,4]
  %m1 = Mul(%x, %a1) : f32[2,4]
  %y1 = Mul(%m1, %half) : f32[2,4]
  %k1 = Add(%y1, %a1) : f32[2,4]
  %d2 = Div(%x, %two) : f32[2,4]
  %e2 = Erf(%d2) : f32[2,4]
  %a2 = Add(%e2, %one) : f32[2,4]
  %m2 = Mul(%x, %a2) : f32[2,4]
  %y2 = Mul(%m2, %half) : f32[2,4]
  %d3 = Div(%x, %sqrt2) : f32[2,4]
  %e3 = Erf(%d3) : f32[2,4]
  %a3 = Add(%e3, %one) : f32[2,4]
  %m3 = Mul(%w, %a3) : f32[2,4]
  %y3 = Mul(%m3, %half) : f32[2,4]
  %d4 = Div(%x, %sqrt2) : f32[2,4]
  %e4 = Erf(%d4) : f32[2,4]
  %a4 = Add(%e4, %one) : f32[2,4]
  %m4 = Mul(%x, %a4) : f32[2,4]
  %y4 = Mul(%m4, %halves) : f32[3,2,4]
  return %k1, %y2, %y3, %y4
})";
    EXPECT_PASS_GIVES(kPass, before, before);
}

}  // namespace
}  // namespace kiln::pass
