// The pools' gradient entries (src/op/defs/pool.cc): MaxPool, AveragePool, GlobalAveragePool
// and GlobalMaxPool against central differences in float64 (gradient_check.h) over strides,
// asymmetric pads, dilations, ceil_mode, count_include_pad and 1-D / 2-D / 3-D windows; and
// MaxPool's routing of ties (the first maximum in the window, as PyTorch does), checked against
// a direct loop over the windows (central differences are not defined at a tie).
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "autodiff/differentiate.h"
#include "gradient_check.h"
#include "pass/rewrite.h"

namespace kiln::autodiff {
namespace {

using kiln::testing::check_op_gradient;
using kiln::testing::CompiledGraph;
using kiln::testing::random_tensor;
using Ints = std::vector<int64_t>;

// Random inputs in [-1, 1): ties within the difference step are improbable.
// The average pools are linear (exact differences at a large step); the max pools are linear
// between ties, so their step stays small.
void check_pool(const std::string& op, const Shape& x, ir::AttrMap attrs, int num_outputs = 1, uint64_t seed = 1) {
    std::string what = op + " X " + shape_str(x);
    for (const auto& [k, v] : attrs) what += " " + k + "=" + ir::attr_str(v);
    SCOPED_TRACE(what);
    const bool linear = op.find("Average") != std::string::npos;
    kiln::testing::GradCheckOptions o{.rtol = 1e-6, .atol = 1e-7, .eps = 1e-6, .num_outputs = num_outputs};
    if (linear) o.rtol = 1e-7, o.atol = 1e-9, o.eps = 1e-3;
    check_op_gradient(op, {random_tensor(x, -1, 1, seed)}, attrs, o);
}

TEST(MaxPoolGradient, ResNetStem) {  // 3x3, stride 2, pad 1: overlapping windows
    check_pool("MaxPool", {2, 3, 7, 8}, {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
}

TEST(MaxPoolGradient, NonOverlapping) {
    check_pool("MaxPool", {1, 2, 6, 6}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}});
}

TEST(MaxPoolGradient, StrideOneAsymmetricPads) {
    check_pool("MaxPool", {1, 2, 5, 6}, {{"kernel_shape", Ints{2, 3}}, {"pads", Ints{1, 0, 0, 2}}});
}

TEST(MaxPoolGradient, Dilated) {
    check_pool("MaxPool", {1, 2, 7, 7},
               {{"kernel_shape", Ints{2, 2}}, {"dilations", Ints{2, 3}}, {"strides", Ints{1, 2}}, {"pads", Ints{1, 1, 0, 1}}});
}

TEST(MaxPoolGradient, CeilMode) {
    check_pool("MaxPool", {1, 2, 6, 7}, {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}});
}

TEST(MaxPoolGradient, AutoPadSameUpper) {
    check_pool("MaxPool", {1, 2, 5, 5}, {{"kernel_shape", Ints{3, 2}}, {"strides", Ints{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}});
}

TEST(MaxPoolGradient, WithIndicesOutput) {
    check_pool("MaxPool", {2, 2, 5, 5}, {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}, 2);
}

TEST(MaxPoolGradient, ColumnMajorIndicesOutput) {
    check_pool("MaxPool", {1, 2, 4, 5},
               {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{1, 2}}, {"storage_order", int64_t{1}}}, 2);
}

TEST(MaxPoolGradient, OneDimensional) {
    check_pool("MaxPool", {2, 3, 9}, {{"kernel_shape", Ints{3}}, {"strides", Ints{2}}, {"pads", Ints{1, 2}}});
}

TEST(MaxPoolGradient, ThreeDimensional) {
    check_pool("MaxPool", {1, 2, 4, 5, 4}, {{"kernel_shape", Ints{2, 2, 2}}, {"strides", Ints{2, 2, 1}}, {"pads", Ints{0, 1, 0, 0, 0, 1}}});
}

TEST(AveragePoolGradient, ExcludePad) {
    check_pool("AveragePool", {2, 3, 6, 7}, {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
}

TEST(AveragePoolGradient, IncludePadAsymmetric) {
    check_pool("AveragePool", {1, 2, 5, 6},
               {{"kernel_shape", Ints{3, 2}}, {"pads", Ints{2, 0, 1, 1}}, {"count_include_pad", int64_t{1}}});
}

TEST(AveragePoolGradient, CeilModeBothCounts) {
    for (int64_t include : {0, 1})
        check_pool("AveragePool", {1, 2, 6, 7},
                   {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 0, 0, 1}},
                    {"ceil_mode", int64_t{1}}, {"count_include_pad", include}});
}

TEST(AveragePoolGradient, NonOverlappingNoPads) {
    check_pool("AveragePool", {2, 2, 4, 6}, {{"kernel_shape", Ints{2, 3}}, {"strides", Ints{2, 3}}});
}

TEST(AveragePoolGradient, Dilated) {
    check_pool("AveragePool", {1, 2, 7, 6},
               {{"kernel_shape", Ints{2, 2}}, {"dilations", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"count_include_pad", int64_t{1}}});
}

TEST(AveragePoolGradient, OneAndThreeDimensional) {
    check_pool("AveragePool", {2, 2, 9}, {{"kernel_shape", Ints{4}}, {"strides", Ints{2}}, {"pads", Ints{1, 1}}});
    check_pool("AveragePool", {1, 2, 4, 4, 5}, {{"kernel_shape", Ints{2, 3, 2}}, {"strides", Ints{2, 1, 2}}, {"pads", Ints{0, 1, 1, 1, 0, 0}}});
}

TEST(GlobalPoolGradient, Average) {
    check_pool("GlobalAveragePool", {2, 3, 4, 5}, {});
    check_pool("GlobalAveragePool", {2, 3, 7}, {});
}

TEST(GlobalPoolGradient, Max) {
    check_pool("GlobalMaxPool", {2, 3, 4, 5}, {});
    check_pool("GlobalMaxPool", {1, 2, 3, 2, 3}, {});
}

// Ties: X holds only 0s and 1s, so most windows have several maxima. The gradient of
// sum(Y * R) must put each R[o] on the first maximum of window o (row-major scan), once.
TEST(MaxPoolGradient, TiesGoToTheFirstMaximum) {
    const int64_t N = 2, C = 2, H = 6, W = 7, K = 3, S = 2, P = 1;
    const int64_t OH = (H + 2 * P - K) / S + 1, OW = (W + 2 * P - K) / S + 1;
    Tensor x = random_tensor({N, C, H, W}, 0, 1, 5);
    for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, x.get_f64(i) < 0.6 ? 0.0 : 1.0);
    Tensor r = random_tensor({N, C, OH, OW}, 0.5, 1.5, 6);

    ir::Graph g;
    ir::Value* xv = g.add_input("x", ir::TensorType::of_static(DType::kFloat64, x.shape()));
    ir::Value* y = pass::add_inferred_node(g, "MaxPool", {xv},
                                           {{"kernel_shape", Ints{K, K}}, {"strides", Ints{S, S}}, {"pads", Ints{P, P, P, P}}})
                       ->output(0);
    ir::Value* rv = g.add_constant("r", r);
    ir::Value* prod = pass::add_inferred_node(g, "Mul", {y, rv})->output(0);
    ir::Value* loss = pass::add_inferred_node(g, "ReduceSum", {prod}, {{"keepdims", int64_t{0}}})->output(0);
    Gradients grads = differentiate(g, loss, {xv});
    g.set_outputs(grads.grads);
    Tensor dx = CompiledGraph(g).run({x}).at(0);

    std::vector<double> expect(static_cast<size_t>(x.numel()), 0.0);
    for (int64_t nc = 0; nc < N * C; ++nc)
        for (int64_t oh = 0; oh < OH; ++oh)
            for (int64_t ow = 0; ow < OW; ++ow) {
                int64_t best = -1;
                double best_v = -std::numeric_limits<double>::infinity();
                for (int64_t kh = 0; kh < K; ++kh)
                    for (int64_t kw = 0; kw < K; ++kw) {
                        const int64_t h = oh * S + kh - P, w = ow * S + kw - P;
                        if (h < 0 || h >= H || w < 0 || w >= W) continue;
                        const int64_t i = (nc * H + h) * W + w;
                        if (x.get_f64(i) > best_v) best_v = x.get_f64(i), best = i;  // strict: first max wins
                    }
                expect[static_cast<size_t>(best)] += r.get_f64((nc * OH + oh) * OW + ow);
            }
    for (int64_t i = 0; i < x.numel(); ++i) EXPECT_NEAR(dx.get_f64(i), expect[static_cast<size_t>(i)], 1e-12) << "element " << i;
}

}  // namespace
}  // namespace kiln::autodiff
