// LayerNormalization's gradient entry (X, Scale, B) against central differences
// (tests/autodiff/gradient_check.h): float64 over every axis (negative too), Scale / B of the
// full normalized shape or broadcast, B omitted; the Mean / InvStdDev outputs in the loss (they
// are float32, the stash type: float32 checks with larger steps, and a float64 X whose
// statistics are cast up).
#include <gtest/gtest.h>

#include <string>

#include "gradient_check.h"

namespace kiln {
namespace {

using testing::check_graph_gradient;
using testing::check_op_gradient;
using testing::GradCheckOptions;
using testing::random_tensor;

TEST(LayerNormalizationGradient, EveryAxisFullScaleAndBias) {
    const Shape s = {2, 3, 4};
    uint64_t seed = 1;
    for (int64_t axis : {-1, -2, 0, 1, 2}) {
        const int ax = axis < 0 ? static_cast<int>(axis) + 3 : static_cast<int>(axis);
        const Shape norm(s.begin() + ax, s.end());
        SCOPED_TRACE("axis " + std::to_string(axis));
        check_op_gradient("LayerNormalization",
                          {random_tensor(s, -2, 2, seed++), random_tensor(norm, 0.5, 1.5, seed++),
                           random_tensor(norm, -1, 1, seed++)},
                          {{"axis", axis}, {"epsilon", 1e-3}});
    }
}

TEST(LayerNormalizationGradient, BroadcastScaleAndNoBias) {
    uint64_t seed = 10;
    // Normalizing [3, 4] with Scale [4] and B [1, 4]; then Scale [1] and no B.
    check_op_gradient("LayerNormalization",
                      {random_tensor({2, 3, 4}, -2, 2, seed++), random_tensor({4}, 0.5, 1.5, seed++),
                       random_tensor({1, 4}, -1, 1, seed++)},
                      {{"axis", int64_t{1}}});
    check_op_gradient("LayerNormalization",
                      {random_tensor({3, 5}, -2, 2, seed++), random_tensor({1}, 0.5, 1.5, seed++)}, {});
    // Only X differentiated (Scale and B constants).
    GradCheckOptions o;
    o.constant_inputs = {1, 2};
    check_op_gradient("LayerNormalization",
                      {random_tensor({4, 3}, -2, 2, seed++), random_tensor({3}, 0.5, 1.5, seed++),
                       random_tensor({3}, -1, 1, seed++)},
                      {}, o);
}

// Float32 with all three outputs in the loss: the entry reads the node's Mean / InvStdDev.
// And with Y only (the entry recomputes the statistics in f32).
TEST(LayerNormalizationGradient, Float32WithStatisticsOutputs) {
    uint64_t seed = 20;
    GradCheckOptions o;
    o.eps = 1e-2;
    o.rtol = 2e-2;
    o.atol = 2e-3;
    check_op_gradient("LayerNormalization",
                      {random_tensor({3, 4}, -2, 2, seed++, DType::kFloat32),
                       random_tensor({4}, 0.5, 1.5, seed++, DType::kFloat32)},
                      {}, o);
    o.num_outputs = 3;
    for (int64_t axis : {-1, 1}) {
        SCOPED_TRACE("axis " + std::to_string(axis));
        const Shape norm = axis == 1 ? Shape{3, 4} : Shape{4};
        check_op_gradient("LayerNormalization",
                          {random_tensor({2, 3, 4}, -2, 2, seed++, DType::kFloat32),
                           random_tensor(norm, 0.5, 1.5, seed++, DType::kFloat32),
                           random_tensor(norm, -1, 1, seed++, DType::kFloat32)},
                          {{"axis", axis}}, o);
    }
}

// Float64 X with the float32 statistics cast up and in the loss (the entry recomputes them in
// f64). Central differences of f32 values: steps of 1e-3.
TEST(LayerNormalizationGradient, Float64WithStatisticsOutputs) {
    for (const std::vector<int>& used : std::vector<std::vector<int>>{{0, 1, 2}, {1}, {2}, {1, 2}}) {
        SCOPED_TRACE("outputs used: " + std::to_string(used.size()) + ", first " + std::to_string(used[0]));
        auto build = [&used](ir::Graph& g) {
            ir::Value* x = g.add_input("x", ir::TensorType::of_static(DType::kFloat64, {3, 4}));
            ir::Value* scale = g.add_input("scale", ir::TensorType::of_static(DType::kFloat64, {4}));
            ir::Node* n = pass::add_inferred_node(g, "LayerNormalization", {x, scale}, {}, 3, "y");
            std::vector<ir::Value*> outs;
            for (int k : used) {
                ir::Value* v = n->output(k);
                if (k > 0) v = pass::add_inferred_node(g, "Cast", {v}, {{"to", int64_t{11}}})->output(0);  // to f64
                outs.push_back(v);
            }
            return testing::weighted_sum_loss(g, outs, 6);
        };
        GradCheckOptions o;
        o.eps = 1e-3;
        o.rtol = 2e-3;
        o.atol = 2e-4;
        check_graph_gradient("LayerNormalization", build,
                             {random_tensor({3, 4}, -2, 2, 31), random_tensor({4}, 0.5, 1.5, 32)}, o);
    }
}

// Unfused (-O0): every gradient node its own kernel.
TEST(LayerNormalizationGradient, Unfused) {
    GradCheckOptions o;
    o.compile.opt_level = 0;
    check_op_gradient("LayerNormalization",
                      {random_tensor({2, 3, 4}, -2, 2, 41), random_tensor({3, 4}, 0.5, 1.5, 42),
                       random_tensor({4}, -1, 1, 43)},
                      {{"axis", int64_t{-2}}}, o);
}

}  // namespace
}  // namespace kiln
