// Conv's gradient entry (src/op/defs/conv.cc) against central differences in float64
// (gradient_check.h): the data, weight and bias gradients over 1-D, 2-D and 3-D convolutions
// with groups (depthwise included), strides, asymmetric pads, dilations, auto_pad, and seeded
// random configurations. The loss is linear in each input, so central differences are exact up
// to rounding: a large step (1e-3) keeps the rounding small and the tolerances tight.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "gradient_check.h"

namespace kiln::autodiff {
namespace {

using kiln::testing::check_op_gradient;
using kiln::testing::random_tensor;

struct ConvCase {
    Shape x;   // [N, C, spatial...]
    Shape w;   // [M, C / group, kernel...]
    bool bias = true;
    ir::AttrMap attrs;
};

std::string describe(const ConvCase& c) {
    std::string s = "X " + shape_str(c.x) + " W " + shape_str(c.w) + (c.bias ? " +B" : "");
    for (const auto& [k, v] : c.attrs) s += " " + k + "=" + ir::attr_str(v);
    return s;
}

void check_conv(const ConvCase& c, uint64_t seed = 1) {
    SCOPED_TRACE(describe(c));
    std::vector<Tensor> inputs = {random_tensor(c.x, -1, 1, seed), random_tensor(c.w, -1, 1, seed + 1)};
    if (c.bias) inputs.push_back(random_tensor({c.w[0]}, -1, 1, seed + 2));
    check_op_gradient("Conv", inputs, c.attrs, {.rtol = 1e-7, .atol = 1e-9, .eps = 1e-3});
}

using Ints = std::vector<int64_t>;

TEST(ConvGradient, Plain3x3Padded) {
    check_conv({{2, 3, 5, 6}, {4, 3, 3, 3}, true, {{"pads", Ints{1, 1, 1, 1}}}});
}

TEST(ConvGradient, NoPadsNoBias) { check_conv({{1, 2, 4, 5}, {3, 2, 2, 3}, false, {}}); }

TEST(ConvGradient, StridedAsymmetricPadsDilated) {
    check_conv({{2, 2, 7, 8},
                {3, 2, 2, 3},
                true,
                {{"strides", Ints{2, 3}}, {"pads", Ints{0, 1, 2, 0}}, {"dilations", Ints{1, 2}}}});
}

// A stride that leaves the last input rows unread (in 6, kernel 3, stride 2: rows 0..4 read).
TEST(ConvGradient, StrideLeavesTrailingRowsUnread) {
    check_conv({{1, 2, 6, 6}, {2, 2, 3, 3}, false, {{"strides", Ints{2, 2}}}});
}

// Pads larger than the kernel's reach (a 1x1 kernel padded by 2): the data gradient crops.
TEST(ConvGradient, PadsBeyondTheKernel) {
    check_conv({{1, 2, 4, 3}, {2, 2, 1, 1}, true, {{"pads", Ints{2, 1, 1, 2}}, {"strides", Ints{2, 1}}}});
}

TEST(ConvGradient, Groups) {
    check_conv({{2, 4, 5, 5}, {6, 2, 3, 2}, true, {{"group", int64_t{2}}, {"strides", Ints{2, 1}}, {"pads", Ints{1, 0, 1, 1}}}});
}

TEST(ConvGradient, Depthwise) {
    check_conv({{2, 3, 6, 5}, {3, 1, 3, 3}, true, {{"group", int64_t{3}}, {"pads", Ints{1, 1, 1, 1}}}});
}

TEST(ConvGradient, DepthwiseMultiplierStrided) {
    check_conv({{1, 3, 7, 7}, {6, 1, 3, 3}, false, {{"group", int64_t{3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}});
}

TEST(ConvGradient, OneDimensional) {
    check_conv({{2, 3, 11}, {2, 3, 4}, true, {{"strides", Ints{3}}, {"dilations", Ints{2}}, {"pads", Ints{2, 1}}}});
}

TEST(ConvGradient, ThreeDimensional) {
    check_conv({{1, 2, 4, 4, 3}, {2, 2, 2, 2, 2}, true, {{"strides", Ints{2, 1, 1}}, {"pads", Ints{1, 0, 1, 0, 1, 0}}}});
}

TEST(ConvGradient, AutoPadSameUpper) {
    check_conv({{1, 2, 5, 6}, {3, 2, 3, 3}, true, {{"auto_pad", std::string("SAME_UPPER")}, {"strides", Ints{2, 2}}}});
}

TEST(ConvGradient, AutoPadSameLowerDilated) {
    check_conv({{1, 2, 6, 5}, {2, 2, 2, 3}, false, {{"auto_pad", std::string("SAME_LOWER")}, {"dilations", Ints{2, 1}}}});
}

TEST(ConvGradient, AutoPadValid) {
    check_conv({{2, 2, 5, 5}, {2, 2, 3, 2}, true, {{"auto_pad", std::string("VALID")}, {"strides", Ints{1, 2}}}});
}

// Seeded random 2-D configurations: group in {1, 2, C}, kernel 1..3, stride 1..3, dilation 1..2,
// each pad 0..2 (kept below the window so the output is not empty).
TEST(ConvGradient, RandomConfigurations) {
    std::mt19937_64 rng(20240614);
    auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
    for (int trial = 0; trial < 8; ++trial) {
        const int64_t groups[] = {1, 2, 4};
        const int64_t g = groups[pick(0, 2)];
        const int64_t c = g == 4 ? 4 : 2 * pick(1, 2), m = g * pick(1, 2);
        Ints k = {pick(1, 3), pick(1, 3)}, s = {pick(1, 3), pick(1, 3)}, d = {pick(1, 2), pick(1, 2)};
        Ints pads = {pick(0, 2), pick(0, 2), pick(0, 2), pick(0, 2)};
        Shape x = {pick(1, 2), c, 0, 0};
        for (int i = 0; i < 2; ++i) x[2 + i] = (k[i] - 1) * d[i] + 1 + pick(0, 4);
        ConvCase cc{x, {m, c / g, k[0], k[1]}, pick(0, 1) == 1,
                    {{"group", g}, {"strides", s}, {"dilations", d}, {"pads", pads}}};
        check_conv(cc, 100 + trial);
    }
}

// Only the weight's gradient (the data input a constant, as for a network's first layer).
TEST(ConvGradient, WeightOnly) {
    std::vector<Tensor> in = {random_tensor({2, 3, 5, 5}, -1, 1, 3), random_tensor({2, 3, 3, 3}, -1, 1, 4)};
    check_op_gradient("Conv", in, {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}},
                      {.rtol = 1e-7, .atol = 1e-9, .eps = 1e-3, .constant_inputs = {0}});
}

}  // namespace
}  // namespace kiln::autodiff
