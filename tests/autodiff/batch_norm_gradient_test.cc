// BatchNormalization's gradient entry (src/op/defs/nn.cc) in training mode (batch statistics)
// and inference mode (a fixed affine), and Dropout's (src/op/defs/movement.cc), against central
// differences in float64 (gradient_check.h). Dropout in training mode: its mask is a pure
// function of (seed, element), so the forward is deterministic and the numerical gradient is
// dY * mask / (1 - ratio); the forward's mask is also checked for its keep rate and for
// y = x * mask / (1 - ratio) exactly.
#include <gtest/gtest.h>

#include <string>

#include "gradient_check.h"
#include "pass/rewrite.h"

namespace kiln::autodiff {
namespace {

using kiln::testing::check_op_gradient;
using kiln::testing::CompiledGraph;
using kiln::testing::random_tensor;

std::vector<Tensor> bn_inputs(const Shape& x, uint64_t seed) {
    const int64_t c = x[1];
    return {random_tensor(x, -2, 2, seed), random_tensor({c}, 0.5, 1.5, seed + 1), random_tensor({c}, -1, 1, seed + 2),
            random_tensor({c}, -0.5, 0.5, seed + 3), random_tensor({c}, 0.5, 1.5, seed + 4)};
}

ir::AttrMap training(double eps = 1e-5) { return {{"training_mode", int64_t{1}}, {"epsilon", eps}}; }

// X, scale and B (the running statistics are constants: in training mode they only feed the
// running_mean / running_var outputs, which are not differentiated).
TEST(BatchNormGradient, TrainingMode4D) {
    check_op_gradient("BatchNormalization", bn_inputs({3, 4, 2, 3}, 1), training(),
                      {.rtol = 1e-5, .atol = 1e-7, .constant_inputs = {3, 4}});
}

TEST(BatchNormGradient, TrainingMode2D) {
    check_op_gradient("BatchNormalization", bn_inputs({5, 3}, 2), training(1e-3),
                      {.rtol = 1e-5, .atol = 1e-7, .constant_inputs = {3, 4}});
}

TEST(BatchNormGradient, TrainingMode3DBatchOfOne) {
    check_op_gradient("BatchNormalization", bn_inputs({1, 2, 7}, 3), training(),
                      {.rtol = 1e-5, .atol = 1e-7, .constant_inputs = {3, 4}});
}

// Every input, mean and var included.
TEST(BatchNormGradient, InferenceMode) {
    check_op_gradient("BatchNormalization", bn_inputs({2, 3, 3, 2}, 4), {{"epsilon", 1e-3}}, {.rtol = 1e-6, .atol = 1e-8});
}

TEST(BatchNormGradient, InferenceModeDataOnly) {
    check_op_gradient("BatchNormalization", bn_inputs({2, 5}, 5), {}, {.rtol = 1e-6, .atol = 1e-8, .wrt = {0}});
}

Tensor f64_scalar(double v) {
    Tensor t(DType::kFloat64, {});
    t.set_f64(0, v);
    return t;
}

Tensor bool_scalar(bool v) {
    Tensor t(DType::kBool, {});
    t.set_i64(0, v ? 1 : 0);
    return t;
}

TEST(DropoutGradient, InferenceIsIdentity) {
    check_op_gradient("Dropout", {random_tensor({3, 4}, -1, 1, 1)}, {}, {.rtol = 1e-8, .atol = 1e-10});
    check_op_gradient("Dropout", {random_tensor({3, 4}, -1, 1, 2), f64_scalar(0.5), bool_scalar(false)}, {},
                      {.rtol = 1e-8, .atol = 1e-10, .num_outputs = 2});
}

TEST(DropoutGradient, TrainingRatioZeroIsIdentity) {
    check_op_gradient("Dropout", {random_tensor({4, 5}, -1, 1, 3), f64_scalar(0.0), bool_scalar(true)}, {},
                      {.rtol = 1e-8, .atol = 1e-10});
}

TEST(DropoutGradient, TrainingWithMaskOutput) {
    check_op_gradient("Dropout", {random_tensor({4, 6}, -1, 1, 4), f64_scalar(0.3), bool_scalar(true)},
                      {{"seed", int64_t{17}}}, {.rtol = 1e-8, .atol = 1e-10, .num_outputs = 2});
}

// Without the mask output the gradient entry re-derives the mask from the seed.
TEST(DropoutGradient, TrainingWithoutMaskOutput) {
    check_op_gradient("Dropout", {random_tensor({3, 2, 5}, -1, 1, 5), f64_scalar(0.6), bool_scalar(true)},
                      {{"seed", int64_t{3}}}, {.rtol = 1e-8, .atol = 1e-10});
    check_op_gradient("Dropout", {random_tensor({3, 7}, -1, 1, 6), f64_scalar(0.25), bool_scalar(true)}, {},
                      {.rtol = 1e-8, .atol = 1e-10});
}

std::vector<Tensor> run_dropout(const Tensor& x, double ratio, ir::AttrMap attrs) {
    ir::Graph g;
    ir::Value* xv = g.add_input("x", ir::TensorType::of_static(x.dtype(), x.shape()));
    ir::Value* r = g.add_constant("ratio", f64_scalar(ratio));
    ir::Value* t = g.add_constant("training_mode", bool_scalar(true));
    ir::Node* n = pass::add_inferred_node(g, "Dropout", {xv, r, t}, std::move(attrs), 2);
    g.set_outputs({n->output(0), n->output(1)});
    return CompiledGraph(g).run({x});
}

TEST(DropoutForward, TrainingMaskKeepsOneMinusRatio) {
    const double ratio = 0.3;
    Tensor x = random_tensor({64, 128}, 0.5, 1.5, 9, DType::kFloat32);
    std::vector<Tensor> out = run_dropout(x, ratio, {{"seed", int64_t{42}}});
    const Tensor &y = out.at(0), &mask = out.at(1);
    ASSERT_EQ(mask.dtype(), DType::kBool);
    int64_t kept = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
        const bool keep = mask.get_i64(i) != 0;
        kept += keep;
        const double want = keep ? static_cast<double>(static_cast<float>(x.get_f64(i) * (1.0 / (1.0 - ratio)))) : 0.0;
        ASSERT_NEAR(y.get_f64(i), want, 1e-6 * std::abs(want)) << i;
    }
    const double rate = static_cast<double>(kept) / static_cast<double>(x.numel());
    EXPECT_NEAR(rate, 1.0 - ratio, 0.015);  // 8192 draws: 3 sigma is about 0.015

    // Neighbouring elements are not correlated: P(both kept) close to (1 - ratio)^2.
    int64_t both = 0;
    for (int64_t i = 0; i + 1 < x.numel(); i += 2) both += mask.get_i64(i) && mask.get_i64(i + 1);
    EXPECT_NEAR(static_cast<double>(both) / static_cast<double>(x.numel() / 2), (1 - ratio) * (1 - ratio), 0.03);

    // Another seed draws another mask; the same seed the same one.
    Tensor other = run_dropout(x, ratio, {{"seed", int64_t{43}}}).at(1);
    Tensor again = run_dropout(x, ratio, {{"seed", int64_t{42}}}).at(1);
    int64_t differ = 0, same = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
        differ += other.get_i64(i) != mask.get_i64(i);
        same += again.get_i64(i) == mask.get_i64(i);
    }
    EXPECT_GT(differ, x.numel() / 4);
    EXPECT_EQ(same, x.numel());
}

}  // namespace
}  // namespace kiln::autodiff
