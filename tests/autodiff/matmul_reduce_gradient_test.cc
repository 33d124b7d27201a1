// Gradient entries of MatMul, Gemm and the Reduce* family against central differences in
// float64 (tests/autodiff/gradient_check.h): batch broadcasting, 1-D operands, every Gemm
// transpose and C shape, axes and keepdims both ways.
#include <gtest/gtest.h>

#include "gradient_check.h"

namespace kiln {
namespace {

using testing::check_op_gradient;
using testing::GradCheckOptions;
using testing::int64_tensor;
using testing::random_tensor;

TEST(MatMulGradient, BatchedBroadcastAndOneDimensionalOperands) {
    const std::vector<std::pair<Shape, Shape>> shapes = {
        {{3, 4}, {4, 5}},       {{2, 3, 4}, {4, 5}},    {{3, 4}, {2, 4, 5}}, {{2, 1, 3, 4}, {3, 4, 2}},
        {{2, 3, 4}, {2, 4, 2}}, {{4}, {4, 5}},          {{3, 4}, {4}},       {{4}, {4}},
        {{4}, {2, 4, 3}},       {{2, 3, 4}, {4}},
    };
    uint64_t seed = 1;
    for (const auto& [as, bs] : shapes) {
        SCOPED_TRACE(shape_str(as) + " x " + shape_str(bs));
        check_op_gradient("MatMul", {random_tensor(as, -1, 1, seed++), random_tensor(bs, -1, 1, seed++)}, {});
    }
}

TEST(GemmGradient, TransposesAlphaBetaAndCShapes) {
    const int64_t m = 3, k = 4, n = 2;
    uint64_t seed = 1;
    for (int64_t ta : {0, 1})
        for (int64_t tb : {0, 1}) {
            const Shape as = ta ? Shape{k, m} : Shape{m, k};
            const Shape bs = tb ? Shape{n, k} : Shape{k, n};
            for (const Shape& cs : std::vector<Shape>{{m, n}, {n}, {1, n}, {m, 1}, {}}) {
                SCOPED_TRACE("transA=" + std::to_string(ta) + " transB=" + std::to_string(tb) + " C " + shape_str(cs));
                check_op_gradient("Gemm",
                                  {random_tensor(as, -1, 1, seed++), random_tensor(bs, -1, 1, seed++),
                                   random_tensor(cs, -1, 1, seed++)},
                                  {{"transA", ta}, {"transB", tb}, {"alpha", 0.7}, {"beta", -1.3}});
            }
            SCOPED_TRACE("no C");
            check_op_gradient("Gemm", {random_tensor(as, -1, 1, seed++), random_tensor(bs, -1, 1, seed++)},
                              {{"transA", ta}, {"transB", tb}, {"alpha", 2.0}});
        }
}

// -O0: every node its own kernel (no fusion, no folding), the same gradients.
TEST(MatMulGradient, UnfusedAtO0) {
    GradCheckOptions o;
    o.compile.opt_level = 0;
    check_op_gradient("MatMul", {random_tensor({2, 3, 4}, -1, 1, 1), random_tensor({4, 2}, -1, 1, 2)}, {}, o);
    check_op_gradient("Gemm", {random_tensor({4, 3}, -1, 1, 3), random_tensor({2, 4}, -1, 1, 4), random_tensor({2}, -1, 1, 5)},
                      {{"transA", int64_t{1}}, {"transB", int64_t{1}}, {"alpha", 0.5}, {"beta", 2.0}}, o);
    check_op_gradient("ReduceMean", {random_tensor({3, 4}, -1, 1, 6), int64_tensor({0})}, {{"keepdims", int64_t{0}}}, o);
}

TEST(ReduceGradient, AxesAndKeepdimsBothWays) {
    const Shape s = {2, 3, 4};
    const std::vector<std::vector<int64_t>> axes_sets = {{1}, {0, 2}, {-1}, {0, 1, 2}};
    uint64_t seed = 1;
    for (const char* op : {"ReduceSum", "ReduceMean", "ReduceSumSquare"}) {
        for (int64_t keep : {0, 1}) {
            for (const auto& axes : axes_sets) {
                SCOPED_TRACE(std::string(op) + " keepdims=" + std::to_string(keep) + " axes " + shape_str(axes));
                check_op_gradient(op, {random_tensor(s, -1, 1, seed++), int64_tensor(axes)}, {{"keepdims", keep}});
            }
            SCOPED_TRACE(std::string(op) + " keepdims=" + std::to_string(keep) + " no axes");
            check_op_gradient(op, {random_tensor(s, -1, 1, seed++)}, {{"keepdims", keep}});
        }
        // Empty axes: reduce everything, or nothing with noop_with_empty_axes=1.
        for (int64_t noop : {0, 1}) {
            SCOPED_TRACE(std::string(op) + " empty axes, noop_with_empty_axes=" + std::to_string(noop));
            check_op_gradient(op, {random_tensor(s, -1, 1, seed++), int64_tensor({})},
                              {{"keepdims", int64_t{0}}, {"noop_with_empty_axes", noop}});
        }
    }
}

}  // namespace
}  // namespace kiln
