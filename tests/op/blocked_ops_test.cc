// Blocked-layout (NCHW{c}) depthwise convolution and pools: the op-harness cases (naive
// references: unblock to NCHW, apply the ONNX formulas of op_reference.h or a direct loop,
// block again) and the shape-inference errors.
#include <gtest/gtest.h>

#include "op_harness_cases.h"
#include "op_test_util.h"

namespace kiln::op::testing {
namespace {

using Ints = std::vector<int64_t>;
constexpr DType F32 = DType::kFloat32;

/// [N, C/c, H, W, c] -> [N, C, H, W].
Arr unblock(const Arr& x) {
    const Shape& s = x.shape;
    Arr y({s[0], s[1] * s[4], s[2], s[3]});
    for (int64_t f = 0; f < x.numel(); ++f) {
        auto i = x.unravel(f);
        y.v[y.ravel({i[0], i[1] * s[4] + i[4], i[2], i[3]})] = x.v[f];
    }
    return y;
}

/// [N, C, H, W] -> [N, C/c, H, W, c] with `blocked` the target shape.
Arr reblock(const Arr& x, const Shape& blocked) {
    Arr y(blocked);
    for (int64_t f = 0; f < y.numel(); ++f) {
        auto i = y.unravel(f);
        y.v[f] = x.at({i[0], i[1] * blocked[4] + i[4], i[2], i[3]});
    }
    return y;
}

Shape nchw(const Shape& blocked) { return {blocked[0], blocked[1] * blocked[4], blocked[2], blocked[3]}; }

/// Depthwise conv: y[n, ch, oh, ow] = b[ch] + sum over the window of x[n, ch, p] * w[ch, kh, kw]
/// with zero padding (pads from ref_window: explicit or auto_pad), w read from the packed
/// [C/c, KH, KW, c] weights.
RefFn depthwise_ref() {
    return [](const std::vector<Arr>& in, const ir::Node& n, const std::vector<Shape>& out) {
        const Arr x = unblock(in[0]);
        const Arr& w = in[1];
        const int64_t c = in[0].shape[4];
        Arr y(nchw(out[0]));
        RefWindow g = ref_window(n, x.shape, {w.shape[1], w.shape[2]}, y.shape);
        for (int64_t f = 0; f < y.numel(); ++f) {
            auto o = y.unravel(f);
            const int64_t ch = o[1];
            double acc = in.size() > 2 && in[2].present ? in[2].at({ch / c, ch % c}) : 0.0;
            for (int64_t kh = 0; kh < w.shape[1]; ++kh)
                for (int64_t kw = 0; kw < w.shape[2]; ++kw) {
                    int64_t h = o[2] * g.s[0] - g.pb[0] + kh * g.d[0], ww = o[3] * g.s[1] - g.pb[1] + kw * g.d[1];
                    if (h < 0 || h >= g.in[0] || ww < 0 || ww >= g.in[1]) continue;
                    acc += x.at({o[0], ch, h, ww}) * w.at({ch / c, kh, kw, ch % c});
                }
            y.v[f] = acc;
        }
        return Refs{reblock(y, out[0])};
    };
}

RefFn blocked_pool_ref(bool is_max) {
    return [is_max](const std::vector<Arr>& in, const ir::Node& n, const std::vector<Shape>& out) {
        Refs r = ref_pool(unblock(in[0]), n, nchw(out[0]), is_max);
        return Refs{reblock(r[0], out[0])};
    };
}

RefFn blocked_global_ref(bool is_max) {
    return [is_max](const std::vector<Arr>& in, const ir::Node&, const std::vector<Shape>& out) {
        const Arr x = unblock(in[0]);
        Arr y(nchw(out[0]));
        const int64_t plane = x.shape[2] * x.shape[3];
        for (int64_t f = 0; f < y.numel(); ++f) {
            double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
            for (int64_t k = 0; k < plane; ++k) acc = is_max ? std::max(acc, x.v[f * plane + k]) : acc + x.v[f * plane + k];
            y.v[f] = is_max ? acc : acc / static_cast<double>(plane);
        }
        return Refs{reblock(y, out[0])};
    };
}

}  // namespace

void add_blocked_op_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, ir::AttrMap attrs, RefFn ref) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), 1});
    };
    const std::string dw = "KilnDepthwiseConv2dNCHWc";
    add("dwconv_nchwc_3x3_pad_bias", dw, {in(F32, {1, 2, 9, 10, 16}), in(F32, {2, 3, 3, 16}), in(F32, {2, 16})},
        {{"pads", Ints{1, 1, 1, 1}}, {"kernel_shape", Ints{3, 3}}}, depthwise_ref());
    add("dwconv_nchwc_stride2_same_upper", dw, {in(F32, {2, 1, 11, 13, 8}), in(F32, {1, 3, 3, 8})},
        {{"auto_pad", std::string("SAME_UPPER")}, {"strides", Ints{2, 2}}}, depthwise_ref());
    add("dwconv_nchwc_dilated_asym_pad", dw, {in(F32, {1, 1, 12, 14, 16}), in(F32, {1, 5, 3, 16}), in(F32, {1, 16})},
        {{"pads", Ints{2, 0, 1, 1}}, {"dilations", Ints{2, 1}}, {"strides", Ints{1, 2}}}, depthwise_ref());
    add("dwconv_nchwc_parallel", dw, {in(F32, {1, 2, 28, 28, 16}), in(F32, {2, 3, 3, 16}), in(F32, {2, 16})},
        {{"pads", Ints{1, 1, 1, 1}}}, depthwise_ref());
    const std::string mp = "KilnMaxPoolNCHWc", ap = "KilnAveragePoolNCHWc";
    add("maxpool_nchwc_3x3_s2_pad1", mp, {in(F32, {1, 2, 13, 13, 16})},
        {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}, blocked_pool_ref(true));
    add("maxpool_nchwc_ceil_dilated", mp, {in(F32, {2, 1, 10, 9, 8})},
        {{"kernel_shape", Ints{2, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}, {"dilations", Ints{1, 2}}},
        blocked_pool_ref(true));
    add("maxpool_nchwc_same_lower", mp, {in(F32, {1, 1, 7, 8, 8})},
        {{"kernel_shape", Ints{3, 3}}, {"auto_pad", std::string("SAME_LOWER")}}, blocked_pool_ref(true));
    add("maxpool_nchwc_large", mp, {in(F32, {1, 4, 32, 32, 16})},
        {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}, blocked_pool_ref(true));
    add("avgpool_nchwc_ceil_exclude_pad", ap, {in(F32, {1, 2, 9, 9, 8})},
        {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"ceil_mode", int64_t{1}}},
        blocked_pool_ref(false));
    add("avgpool_nchwc_include_pad", ap, {in(F32, {1, 1, 8, 10, 16})},
        {{"kernel_shape", Ints{2, 3}}, {"pads", Ints{1, 1, 0, 2}}, {"count_include_pad", int64_t{1}}},
        blocked_pool_ref(false));
    // The register-tile accumulation of the window schedule: an unblocked row of 13 columns (one
    // column per tile), 28 columns in tiles of 7 (in parallel), and a 160-channel block whose
    // tile of 8 columns is over the local limit (the output stays the accumulator).
    add("maxpool_nchwc_3x3_s1_cols13", mp, {in(F32, {1, 3, 13, 13, 16})},
        {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}}, blocked_pool_ref(true));
    add("avgpool_nchwc_3x3_s1_include_pad_28", ap, {in(F32, {1, 4, 28, 28, 16})},
        {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}, {"count_include_pad", int64_t{1}}},
        blocked_pool_ref(false));
    // Undilated windows past the input's end (ceil mode) read the clamped edge, no select.
    add("maxpool_nchwc_ceil_clamped", mp, {in(F32, {1, 1, 12, 11, 16})},
        {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}}, blocked_pool_ref(true));
    add("maxpool_nchwc_block160", mp, {in(F32, {1, 1, 6, 17, 160})}, {{"kernel_shape", Ints{2, 2}}},
        blocked_pool_ref(true));
    add("gap_nchwc", "KilnGlobalAveragePoolNCHWc", {in(F32, {1, 3, 7, 7, 16})}, {}, blocked_global_ref(false));
    add("gmp_nchwc", "KilnGlobalMaxPoolNCHWc", {in(F32, {2, 2, 5, 4, 8})}, {}, blocked_global_ref(true));
}

namespace {

TEST(BlockedOps, InferenceChecksTheBlockedLayouts) {
    ir::Graph g;
    ir::Node* n = make_node(g, "KilnDepthwiseConv2dNCHWc", {tt(F32, {1, 2, 8, 8, 16}), tt(F32, {2, 3, 3, 16})},
                            {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}});
    EXPECT_EQ(n->output(0)->type().static_shape(), Shape({1, 2, 4, 4, 16}));
    n = make_node(g, "KilnMaxPoolNCHWc", {tt(F32, {1, 4, 112, 112, 16})},
                  {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
    EXPECT_EQ(n->output(0)->type().static_shape(), Shape({1, 4, 56, 56, 16}));
    n = make_node(g, "KilnGlobalAveragePoolNCHWc", {tt(F32, {1, 4, 7, 7, 16})});
    EXPECT_EQ(n->output(0)->type().static_shape(), Shape({1, 4, 1, 1, 16}));
    expect_error([&] { make_node(g, "KilnDepthwiseConv2dNCHWc", {tt(F32, {1, 2, 8, 8, 16}), tt(F32, {2, 3, 3, 8})}); },
                 ErrorKind::kInvalidModel, "W must be [C/c, KH, KW, c]");
    expect_error([&] { make_node(g, "KilnAveragePoolNCHWc", {tt(F32, {1, 2, 8, 8})}, {{"kernel_shape", Ints{2, 2}}}); },
                 ErrorKind::kInvalidModel, "rank");
    expect_error(
        [&] {
            make_node(g, "KilnDepthwiseConv2dNCHWc",
                      {tt(F32, {1, 2, 8, 8, 16}), tt(F32, {2, 3, 3, 16}), tt(F32, {32})});
        },
        ErrorKind::kInvalidModel, "bias must be [2, 16]");
}

}  // namespace
}  // namespace kiln::op::testing
