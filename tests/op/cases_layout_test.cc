// Op-harness cases: Blocked-layout ops (transform_layout). op_harness_test.cc runs them (all_cases()).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <vector>

#include "op_harness_refs.h"

namespace kiln::op::testing {

void add_layout_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), 1});
    };
    add("to_blocked_8", "KilnLayoutToBlocked", {in(F32, {2, 16, 3, 5})}, {{"block", int64_t{8}}}, to_blocked_ref());
    add("from_blocked_16", "KilnLayoutFromBlocked", {in(F32, {1, 2, 3, 4, 16})}, {}, from_blocked_ref());
    // A padded depthwise conv's conversions (transform_layout): 58 channels padded to 4 blocks
    // of 16 (zeros past 58), and the first 58 channels of 4 blocks back.
    add("to_blocked_16_padded", "KilnLayoutToBlocked", {in(F32, {1, 58, 3, 18})},
        {{"block", int64_t{16}}, {"padded_channels", int64_t{64}}}, to_blocked_ref());
    add("from_blocked_16_cropped", "KilnLayoutFromBlocked", {in(F32, {1, 4, 3, 18, 16})}, {{"channels", int64_t{58}}},
        from_blocked_ref());
    add("conv_nchwc_3x3_pad_bias", "KilnConv2dNCHWc",
        {in(F32, {1, 2, 9, 10, 8}), in(F32, {2, 2, 3, 3, 8, 16}), in(F32, {2, 16})},
        {{"pads", Ints{1, 1, 1, 1}}}, conv_nchwc_ref());
    // An image in blocks of one channel (transform_layout's stem): the padding copy row by row.
    add("conv_nchwc_3x3_image_blocks_of_1", "KilnConv2dNCHWc",
        {in(F32, {1, 3, 11, 13, 1}), in(F32, {1, 3, 3, 3, 1, 16}), in(F32, {1, 16})},
        {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}, conv_nchwc_ref());
    add("conv_nchwc_1x1_stride2", "KilnConv2dNCHWc", {in(F32, {2, 1, 7, 7, 16}), in(F32, {1, 1, 1, 1, 16, 8})},
        {{"strides", Ints{2, 2}}}, conv_nchwc_ref());
    add("conv_nchwc_dilated_asym_pad", "KilnConv2dNCHWc",
        {in(F32, {1, 1, 12, 14, 8}), in(F32, {1, 1, 3, 2, 8, 8}), in(F32, {1, 8})},
        {{"pads", Ints{2, 0, 1, 1}}, {"dilations", Ints{2, 3}}, {"strides", Ints{1, 2}}}, conv_nchwc_ref());
    // Batched A; n = 40 of 3 blocks of 16 (the last block partly unused): tails in M and N.
    add("matmul_packed_b_batched_tail", "KilnMatMulPackedB", {in(F32, {2, 5, 12}), in(F32, {3, 12, 16})},
        {{"n", int64_t{40}}}, matmul_packed_ref());
    // Gemm's epilogue: alpha, beta and a C over rows and columns.
    add("matmul_packed_b_alpha_beta_c", "KilnMatMulPackedB",
        {in(F32, {7, 9}), in(F32, {2, 9, 8}), in(F32, {7, 16})},
        {{"n", int64_t{16}}, {"alpha", 0.5}, {"beta", 2.0}}, matmul_packed_ref());
    // Grouped: 3 groups of 2 input and 2 output blocks (ResNeXt's), strided with a bias.
    add("conv_nchwc_grouped3_stride2", "KilnConv2dNCHWc",
        {in(F32, {1, 6, 9, 9, 8}), in(F32, {6, 2, 3, 3, 8, 8}), in(F32, {6, 8})},
        {{"group", int64_t{3}}, {"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}, conv_nchwc_ref());
    // A stem conv: 3 input channels are one block (transform_layout writes ci = C when C < 8).
    add("conv_nchwc_stem_ci3", "KilnConv2dNCHWc", {in(F32, {1, 1, 11, 11, 3}), in(F32, {1, 1, 3, 3, 3, 16})},
        {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}, conv_nchwc_ref());
}

// Naive references for the nn2 family: BatchNormalization training mode, MaxUnpool, DeformConv.

}  // namespace kiln::op::testing
