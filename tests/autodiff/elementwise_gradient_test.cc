// Gradient entries of the elementwise, activation, Cast and variadic ops against central
// differences in float64 (tests/autodiff/gradient_check.h), over several broadcast patterns.
#include <gtest/gtest.h>

#include <cmath>

#include "gradient_check.h"

namespace kiln {
namespace {

using testing::check_op_gradient;
using testing::float_tensor;
using testing::GradCheckOptions;
using testing::random_tensor;

// Moves every element at least `margin` away from each of `points` (kinks of Relu/Abs/Clip,
// where a central difference straddles two slopes).
Tensor away_from(Tensor t, std::vector<double> points, double margin = 0.05) {
    for (int64_t i = 0; i < t.numel(); ++i) {
        double v = t.get_f64(i);
        for (double p : points)
            if (std::abs(v - p) < margin) v = v < p ? p - margin : p + margin;
        t.set_f64(i, v);
    }
    return t;
}

// Pairs of broadcast shapes: equal, trailing vector, both sides broadcast, scalar, [1].
const std::vector<std::pair<Shape, Shape>> kBroadcastPairs = {
    {{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{2, 1, 4}, {3, 1}}, {{}, {2, 3}}, {{1}, {2, 2}}, {{3, 1}, {1, 4}},
};

TEST(ElementwiseGradient, AddSubMulDivWithBroadcasting) {
    uint64_t seed = 1;
    for (const auto& [as, bs] : kBroadcastPairs) {
        SCOPED_TRACE(shape_str(as) + " with " + shape_str(bs));
        for (const char* op : {"Add", "Sub", "Mul"})
            check_op_gradient(op, {random_tensor(as, -1, 1, seed++), random_tensor(bs, -1, 1, seed++)}, {});
        // Divisors away from zero, both signs.
        Tensor divisor = away_from(random_tensor(bs, -2, 2, seed++), {0.0}, 0.5);
        check_op_gradient("Div", {random_tensor(as, -1, 1, seed++), divisor}, {});
    }
}

TEST(ElementwiseGradient, PowBothOperandsAndAnIntegerExponent) {
    uint64_t seed = 100;
    for (const auto& [as, bs] : kBroadcastPairs) {
        SCOPED_TRACE(shape_str(as) + " with " + shape_str(bs));
        check_op_gradient("Pow", {random_tensor(as, 0.5, 2, seed++), random_tensor(bs, -1.5, 2.5, seed++)}, {});
    }
    // Zero bases: d/dp 0^p = 0 (not 0 * ln 0 = NaN); the exponent alone is differentiated
    // (a central difference in the base would read 0^p at a negative base).
    GradCheckOptions exponent_only;
    exponent_only.wrt = {1};
    check_op_gradient("Pow", {float_tensor({2, 3}, {0.0, 1.5, 0.0, 0.7, 2.0, 0.0}), random_tensor({3}, 1.5, 2.5, 8)}, {},
                      exponent_only);
    // An int64 exponent is a constant: only the base is differentiated (negative bases too).
    check_op_gradient("Pow", {random_tensor({2, 3}, -2, 2, 7), testing::int64_tensor({3})}, {});
}

TEST(ElementwiseGradient, UnaryMath) {
    const Shape s = {2, 3, 4};
    check_op_gradient("Neg", {random_tensor(s, -2, 2, 1)}, {});
    check_op_gradient("Abs", {away_from(random_tensor(s, -2, 2, 2), {0.0})}, {});
    check_op_gradient("Sqrt", {random_tensor(s, 0.2, 3, 3)}, {});
    check_op_gradient("Exp", {random_tensor(s, -2, 2, 4)}, {});
    check_op_gradient("Log", {random_tensor(s, 0.2, 3, 5)}, {});
    check_op_gradient("Reciprocal", {away_from(random_tensor(s, -2, 2, 6), {0.0}, 0.3)}, {});
    check_op_gradient("Erf", {random_tensor(s, -2, 2, 7)}, {});
    check_op_gradient("Identity", {random_tensor(s, -2, 2, 8)}, {});
}

TEST(ElementwiseGradient, Activations) {
    const Shape s = {3, 5};
    check_op_gradient("Relu", {away_from(random_tensor(s, -2, 2, 1), {0.0})}, {});
    for (double alpha : {0.01, 0.3})
        check_op_gradient("LeakyRelu", {away_from(random_tensor(s, -2, 2, 2), {0.0})}, {{"alpha", alpha}});
    check_op_gradient("Sigmoid", {random_tensor(s, -4, 4, 3)}, {});
    check_op_gradient("Tanh", {random_tensor(s, -3, 3, 4)}, {});
    for (const char* approx : {"none", "tanh"})
        check_op_gradient("Gelu", {random_tensor(s, -3, 3, 5)}, {{"approximate", std::string(approx)}});
}

TEST(ElementwiseGradient, ClipPassesTheGradientInsideTheBoundsOnly) {
    const Shape s = {4, 5};
    Tensor x = away_from(random_tensor(s, -2, 2, 1), {-0.5, 0.7});
    Tensor lo = float_tensor({}, {-0.5}), hi = float_tensor({1}, {0.7});
    // min and max are float inputs, but the entry differentiates x only: constants here.
    GradCheckOptions o;
    o.constant_inputs = {1, 2};
    check_op_gradient("Clip", {x, lo, hi}, {}, o);
    check_op_gradient("Clip", {x, lo}, {}, o);
    check_op_gradient("Clip", {x, Tensor(), hi}, {}, o);
    check_op_gradient("Clip", {x}, {});
}

TEST(ElementwiseGradient, CastBetweenFloatTypes) {
    // f32 -> f64: the loss is linear in x, so a large step is exact; f64 -> f32 loses precision
    // in the f32 loss, hence the looser tolerance.
    GradCheckOptions wide;
    wide.eps = 1e-2;
    check_op_gradient("Cast", {random_tensor({3, 4}, -2, 2, 1, DType::kFloat32)}, {{"to", int64_t{11}}}, wide);
    GradCheckOptions narrow;
    narrow.eps = 1e-2;
    narrow.rtol = 1e-3;
    narrow.atol = 1e-3;
    check_op_gradient("Cast", {random_tensor({3, 4}, -2, 2, 2)}, {{"to", int64_t{1}}}, narrow);
    check_op_gradient("CastLike", {random_tensor({3, 4}, -2, 2, 3, DType::kFloat32), random_tensor({1}, 0, 1, 4)}, {},
                      [] {
                          GradCheckOptions o;
                          o.eps = 1e-2;
                          o.wrt = {0};
                          return o;
                      }());
}

TEST(VariadicGradient, SumMeanMaxMinWithBroadcasting) {
    uint64_t seed = 1;
    for (const char* op : {"Sum", "Mean", "Max", "Min"}) {
        SCOPED_TRACE(op);
        check_op_gradient(op, {random_tensor({2, 3}, -1, 1, seed++)}, {});
        check_op_gradient(op, {random_tensor({2, 3}, -1, 1, seed++), random_tensor({3}, -1, 1, seed++),
                               random_tensor({2, 1}, -1, 1, seed++)},
                          {});
    }
}

// The f32 path (oneDNN-free elementwise kernels in f32): a looser check, same formulas.
TEST(ElementwiseGradient, Float32) {
    GradCheckOptions o;
    o.eps = 1e-2;
    o.rtol = 2e-2;
    o.atol = 2e-3;
    check_op_gradient("Mul", {random_tensor({2, 3}, -1, 1, 1, DType::kFloat32), random_tensor({3}, -1, 1, 2, DType::kFloat32)},
                      {}, o);
    check_op_gradient("Tanh", {random_tensor({2, 3}, -1, 1, 3, DType::kFloat32)}, {}, o);
}

}  // namespace
}  // namespace kiln
