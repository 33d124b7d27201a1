// Gradient entries of the shape and movement ops (Reshape, Flatten, Transpose, Concat, Split,
// Slice, Gather, Squeeze, Unsqueeze, Expand) against central differences in float64
// (tests/autodiff/gradient_check.h): random shapes and attributes, negative axes, negative and
// strided Slice steps, repeated and negative Gather indices, Split outputs off the loss path.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>

#include "gradient_check.h"

namespace kiln {
namespace {

using testing::check_graph_gradient;
using testing::check_op_gradient;
using testing::GradCheckOptions;
using testing::int64_tensor;
using testing::random_int64_tensor;
using testing::random_tensor;

// A random shape of `rank` dims in [lo, hi].
Shape random_shape(std::mt19937_64& rng, int rank, int64_t lo = 1, int64_t hi = 4) {
    std::uniform_int_distribution<int64_t> dim(lo, hi);
    Shape s;
    for (int i = 0; i < rank; ++i) s.push_back(dim(rng));
    return s;
}

TEST(ReshapeGradient, ShapesWithInferredAndCopiedDims) {
    const std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {
        {{2, 3, 4}, {4, -1}}, {{2, 3, 4}, {0, 12}}, {{6}, {2, 1, 3}}, {{2, 3, 4}, {24}}, {{3, 4}, {0, 2, -1}},
    };
    uint64_t seed = 1;
    for (const auto& [s, spec] : cases) {
        SCOPED_TRACE(shape_str(s) + " -> " + shape_str(spec));
        check_op_gradient("Reshape", {random_tensor(s, -1, 1, seed++), int64_tensor(spec)}, {});
    }
}

TEST(FlattenGradient, EveryAxisIncludingNegative) {
    const Shape s = {2, 3, 2, 2};
    uint64_t seed = 1;
    for (int64_t axis : {0, 1, 2, 4, -1, -3}) {
        SCOPED_TRACE("axis " + std::to_string(axis));
        check_op_gradient("Flatten", {random_tensor(s, -1, 1, seed++)}, {{"axis", axis}});
    }
}

TEST(TransposeGradient, RandomPermutationsAndDefault) {
    std::mt19937_64 rng(7);
    uint64_t seed = 1;
    for (int rank : {2, 3, 4}) {
        for (int rep = 0; rep < 3; ++rep) {
            const Shape s = random_shape(rng, rank, 2, 3);
            std::vector<int64_t> perm(rank);
            for (int i = 0; i < rank; ++i) perm[i] = i;
            std::shuffle(perm.begin(), perm.end(), rng);
            SCOPED_TRACE(shape_str(s) + " perm " + shape_str(perm));
            check_op_gradient("Transpose", {random_tensor(s, -1, 1, seed++)}, {{"perm", perm}});
        }
        SCOPED_TRACE("default perm, rank " + std::to_string(rank));
        check_op_gradient("Transpose", {random_tensor(random_shape(rng, rank, 2, 3), -1, 1, seed++)}, {});
    }
}

TEST(ConcatGradient, AxesAndConstantInputs) {
    uint64_t seed = 1;
    for (int64_t axis : {0, 1, 2, -1, -2}) {
        const int ax = axis < 0 ? static_cast<int>(axis) + 3 : static_cast<int>(axis);
        std::vector<Tensor> ins;
        for (int64_t len : {2, 1, 3}) {
            Shape s = {2, 3, 2};
            s[ax] = len;
            ins.push_back(random_tensor(s, -1, 1, seed++));
        }
        SCOPED_TRACE("axis " + std::to_string(axis));
        check_op_gradient("Concat", ins, {{"axis", axis}});
        // The middle input a constant: its gradient is not wanted, the others still right.
        GradCheckOptions o;
        o.constant_inputs = {1};
        check_op_gradient("Concat", ins, {{"axis", axis}}, o);
    }
    SCOPED_TRACE("one input");
    check_op_gradient("Concat", {random_tensor({2, 3}, -1, 1, seed++)}, {{"axis", int64_t{1}}});
}

TEST(SplitGradient, SizesNumOutputsAndEqualParts) {
    uint64_t seed = 1;
    {
        SCOPED_TRACE("split sizes [1, 3, 2], axis 1");
        GradCheckOptions o;
        o.num_outputs = 3;
        check_op_gradient("Split", {random_tensor({2, 6, 2}, -1, 1, seed++), int64_tensor({1, 3, 2})},
                          {{"axis", int64_t{1}}}, o);
    }
    {
        SCOPED_TRACE("num_outputs=3 over 7 (3, 3, 1), axis -1");
        GradCheckOptions o;
        o.num_outputs = 3;
        check_op_gradient("Split", {random_tensor({2, 7}, -1, 1, seed++)},
                          {{"axis", int64_t{-1}}, {"num_outputs", int64_t{3}}}, o);
    }
    {
        SCOPED_TRACE("equal parts, axis 0");
        GradCheckOptions o;
        o.num_outputs = 2;
        check_op_gradient("Split", {random_tensor({4, 3}, -1, 1, seed++)}, {}, o);
    }
}

// Only some Split outputs reach the loss: the others contribute zeros (output_grad_or_zeros).
// The last output is always used: the dead-code pass drops unused *trailing* outputs of any
// node, which for Split changes the split itself (a compiler issue outside these entries).
TEST(SplitGradient, OutputsOffTheLossPath) {
    const std::vector<std::vector<int>> used_sets = {{2}, {0, 2}, {1, 2}};
    for (const std::vector<int>& used : used_sets) {
        SCOPED_TRACE("outputs used: " + std::to_string(used.size()) + ", first " + std::to_string(used[0]));
        auto build = [&used](ir::Graph& g) {
            ir::Value* x = g.add_input("x", ir::TensorType::of_static(DType::kFloat64, {3, 5}));
            ir::Value* sizes = g.add_constant("sizes", int64_tensor({2, 1, 2}));
            ir::Node* n = pass::add_inferred_node(g, "Split", {x, sizes}, {{"axis", int64_t{1}}}, 3, "y");
            std::vector<ir::Value*> outs;
            for (int k : used) outs.push_back(n->output(k));
            return testing::weighted_sum_loss(g, outs, 3);
        };
        check_graph_gradient("Split", build, {random_tensor({3, 5}, -1, 1, 11)});
    }
}

// Forward Slice count along an axis of size dim (numpy rules), to skip empty random slices.
int64_t slice_count(int64_t dim, int64_t start, int64_t end, int64_t step) {
    int64_t s = start < 0 ? start + dim : start, e = end < 0 ? end + dim : end;
    if (step > 0) {
        s = std::clamp<int64_t>(s, 0, dim);
        e = std::clamp<int64_t>(e, 0, dim);
        return e > s ? (e - s + step - 1) / step : 0;
    }
    s = std::clamp<int64_t>(s, 0, dim - 1);
    e = std::clamp<int64_t>(e, -1, dim - 1);
    return s > e ? (s - e - step - 1) / -step : 0;
}

TEST(SliceGradient, FixedCasesWithNegativeAndStridedSteps) {
    const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
    struct Case {
        Shape shape;
        std::vector<int64_t> starts, ends, axes, steps;
    };
    const std::vector<Case> cases = {
        {{5, 6}, {1}, {4}, {0}, {1}},                       // plain crop
        {{5, 6}, {-1}, {lo}, {1}, {-1}},                    // full reverse
        {{7, 4}, {0}, {hi}, {0}, {3}},                      // stride 3 over 7: 0, 3, 6
        {{8, 3}, {6}, {0}, {0}, {-2}},                      // 6, 4, 2 (end exclusive)
        {{5, 6, 7}, {1, -1}, {5, lo}, {0, 2}, {2, -3}},     // mixed
        {{4, 5, 3}, {-3, 1, 0}, {-1, 5, 3}, {-3, -2, -1}, {1, 2, 1}},
        {{6}, {10}, {-10}, {0}, {-4}},                      // clamped start and end
    };
    uint64_t seed = 1;
    for (const Case& c : cases) {
        SCOPED_TRACE(shape_str(c.shape) + " starts " + shape_str(c.starts) + " ends " + shape_str(c.ends) + " axes " +
                     shape_str(c.axes) + " steps " + shape_str(c.steps));
        check_op_gradient("Slice",
                          {random_tensor(c.shape, -1, 1, seed++), int64_tensor(c.starts), int64_tensor(c.ends),
                           int64_tensor(c.axes), int64_tensor(c.steps)},
                          {});
    }
    SCOPED_TRACE("no axes or steps inputs");
    check_op_gradient("Slice", {random_tensor({4, 5}, -1, 1, seed++), int64_tensor({1, 2}), int64_tensor({3, 5})}, {});
}

TEST(SliceGradient, RandomSpecs) {
    std::mt19937_64 rng(2024);
    uint64_t seed = 100;
    int checked = 0;
    while (checked < 12) {
        const int rank = std::uniform_int_distribution<int>(1, 3)(rng);
        const Shape s = random_shape(rng, rank, 2, 6);
        std::vector<int64_t> starts, ends, axes, steps;
        bool empty = false;
        for (int d = 0; d < rank; ++d) {
            if (std::uniform_int_distribution<int>(0, 3)(rng) == 0) continue;  // axis left whole
            const int64_t dim = s[d];
            std::uniform_int_distribution<int64_t> pos(-dim - 1, dim + 1);
            const int64_t step_choices[] = {-3, -2, -1, 1, 2, 3};
            const int64_t step = step_choices[std::uniform_int_distribution<int>(0, 5)(rng)];
            const int64_t st = pos(rng), en = pos(rng);
            if (slice_count(dim, st, en, step) == 0) empty = true;
            starts.push_back(st);
            ends.push_back(en);
            axes.push_back(std::uniform_int_distribution<int>(0, 1)(rng) ? d : d - rank);  // negative axes too
            steps.push_back(step);
        }
        if (empty || axes.empty()) continue;
        SCOPED_TRACE(shape_str(s) + " starts " + shape_str(starts) + " ends " + shape_str(ends) + " axes " +
                     shape_str(axes) + " steps " + shape_str(steps));
        check_op_gradient("Slice",
                          {random_tensor(s, -1, 1, seed++), int64_tensor(starts), int64_tensor(ends),
                           int64_tensor(axes), int64_tensor(steps)},
                          {});
        ++checked;
    }
}

TEST(GatherGradient, RepeatedAndNegativeIndicesAccumulate) {
    uint64_t seed = 1;
    // Axis 0 (an embedding lookup) with repeats and negative indices.
    check_op_gradient("Gather", {random_tensor({5, 3}, -1, 1, seed++), int64_tensor({1, 3, 1, -1, 1, 0})}, {});
    // 2-D indices, each axis and a negative one.
    const Tensor idx2 = int64_tensor({2, 0, 2, -3, 1, 2}, {2, 3});
    for (int64_t axis : {0, 1, 2, -1, -2}) {
        SCOPED_TRACE("axis " + std::to_string(axis));
        check_op_gradient("Gather", {random_tensor({3, 3, 3}, -1, 1, seed++), idx2}, {{"axis", axis}});
    }
    // A scalar index drops the axis.
    Tensor scalar_index(DType::kInt64, Shape{});
    scalar_index.set_i64(0, -2);
    SCOPED_TRACE("scalar index");
    check_op_gradient("Gather", {random_tensor({2, 4, 3}, -1, 1, seed++), scalar_index}, {{"axis", int64_t{1}}});
    // int32 indices.
    Tensor i32(DType::kInt32, {4});
    for (int k = 0; k < 4; ++k) i32.set_i64(k, k % 2);
    SCOPED_TRACE("int32 indices");
    check_op_gradient("Gather", {random_tensor({2, 3}, -1, 1, seed++), i32}, {{"axis", int64_t{1}}});
}

TEST(GatherGradient, RandomShapesAndIndices) {
    std::mt19937_64 rng(99);
    uint64_t seed = 50;
    for (int rep = 0; rep < 6; ++rep) {
        const int rank = std::uniform_int_distribution<int>(1, 3)(rng);
        const Shape s = random_shape(rng, rank, 2, 4);
        const int axis = std::uniform_int_distribution<int>(-rank, rank - 1)(rng);
        const int64_t extent = s[axis < 0 ? axis + rank : axis];
        const Shape ishape = random_shape(rng, std::uniform_int_distribution<int>(1, 2)(rng), 1, 4);
        const Tensor idx = random_int64_tensor(ishape, -extent, extent - 1, seed++);
        SCOPED_TRACE(shape_str(s) + " axis " + std::to_string(axis) + " indices " + shape_str(ishape));
        check_op_gradient("Gather", {random_tensor(s, -1, 1, seed++), idx}, {{"axis", int64_t{axis}}});
    }
}

TEST(SqueezeUnsqueezeGradient, AxesGivenAndOmitted) {
    uint64_t seed = 1;
    check_op_gradient("Squeeze", {random_tensor({1, 3, 1, 2}, -1, 1, seed++), int64_tensor({0, -2})}, {});
    check_op_gradient("Squeeze", {random_tensor({1, 3, 1, 2}, -1, 1, seed++), int64_tensor({2})}, {});
    check_op_gradient("Squeeze", {random_tensor({1, 3, 1, 2}, -1, 1, seed++)}, {});
    check_op_gradient("Unsqueeze", {random_tensor({3, 2}, -1, 1, seed++), int64_tensor({0, -1})}, {});
    check_op_gradient("Unsqueeze", {random_tensor({3, 2}, -1, 1, seed++), int64_tensor({1, 3})}, {});
}

TEST(ExpandGradient, BroadcastAxesAreSummed) {
    const std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {
        {{3, 1}, {2, 3, 4}},  // new leading axis and a stretched one
        {{1, 4}, {3, 1}},     // the output is [3, 4]: both operands broadcast
        {{2, 1, 3}, {3}},     // the shape has lower rank
        {{2, 3}, {2, 3}},     // identity
        {{1}, {2, 2}},
    };
    uint64_t seed = 1;
    for (const auto& [s, shape] : cases) {
        SCOPED_TRACE(shape_str(s) + " to " + shape_str(shape));
        check_op_gradient("Expand", {random_tensor(s, -1, 1, seed++), int64_tensor(shape)}, {});
    }
}

// Float32 (the usual training dtype): the gradient graphs' kernels in f32, larger steps.
TEST(ShapeGradient, Float32) {
    GradCheckOptions o;
    o.eps = 1e-2;
    o.rtol = 1e-2;
    o.atol = 1e-3;
    const DType f32 = DType::kFloat32;
    uint64_t seed = 300;
    check_op_gradient("Slice",
                      {random_tensor({5, 6}, -1, 1, seed++, f32), int64_tensor({-1, 1}), int64_tensor({0, 6}),
                       int64_tensor({0, 1}), int64_tensor({-2, 2})},
                      {}, o);
    check_op_gradient("Gather", {random_tensor({6, 4}, -1, 1, seed++, f32), int64_tensor({5, 0, 5, 2, -1})}, {}, o);
    check_op_gradient("Concat", {random_tensor({2, 3}, -1, 1, seed++, f32), random_tensor({2, 2}, -1, 1, seed++, f32)},
                      {{"axis", int64_t{-1}}}, o);
    check_op_gradient("Expand", {random_tensor({3, 1}, -1, 1, seed++, f32), int64_tensor({2, 3, 4})}, {}, o);
    check_op_gradient("Transpose", {random_tensor({2, 3, 4}, -1, 1, seed++, f32)}, {{"perm", std::vector<int64_t>{1, 2, 0}}}, o);
}

// Unfused (-O0): every gradient node its own kernel.
TEST(ShapeGradient, Unfused) {
    GradCheckOptions o;
    o.compile.opt_level = 0;
    uint64_t seed = 400;
    check_op_gradient("Slice",
                      {random_tensor({6, 5}, -1, 1, seed++), int64_tensor({-2, 0}), int64_tensor({-7, 5}),
                       int64_tensor({0, 1}), int64_tensor({-3, 2})},
                      {}, o);
    check_op_gradient("Gather", {random_tensor({3, 4, 2}, -1, 1, seed++), int64_tensor({3, 3, 0}, {1, 3})},
                      {{"axis", int64_t{1}}}, o);
    o.num_outputs = 2;
    check_op_gradient("Split", {random_tensor({4, 3}, -1, 1, seed++)}, {}, o);
}

}  // namespace
}  // namespace kiln
