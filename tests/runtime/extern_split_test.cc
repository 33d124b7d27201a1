// How oneDNN steps split over the intra-op pool (runtime/extern_split.h): the number of parts a
// step gets at 2 and 16 threads. A step with fewer units than threads takes as many parts as it
// has units (it used to fall back to one part: oneDNN on one thread).
#include "runtime/extern_split.h"

#include <gtest/gtest.h>

namespace kiln::runtime {
namespace {

TEST(ExternSplit, ConvOfOneImageSplitsByChannelBlocksUpToTheThreads) {
    // ResNet-50 layer1's 3x3 conv, 64 -> 64 channels: 4 blocks of 16.
    EXPECT_EQ(dnnl_conv_split(1, 64, 64, 1, 2).parts, 2);
    EXPECT_EQ(dnnl_conv_split(1, 64, 64, 1, 4).parts, 4);
    ConvSplit s16 = dnnl_conv_split(1, 64, 64, 1, 16);
    EXPECT_EQ(s16.by, ConvSplit::kChannels);
    EXPECT_EQ(s16.parts, 4) << "one part (one thread) before";
    EXPECT_EQ(dnnl_conv_split(1, 256, 512, 1, 16).parts, 16);
    EXPECT_EQ(dnnl_conv_split(1, 64, 64, 1, 1).parts, 1);
    // 24 output channels in 16-channel blocks cannot split; in 8-channel blocks (Kiln's layout
    // for 24 channels: MobileNetV2's projections) or plain they split by 8: 3 parts.
    EXPECT_EQ(dnnl_conv_split(1, 144, 24, 1, 16, 16).by, ConvSplit::kNone);
    EXPECT_EQ(dnnl_conv_split(1, 144, 24, 1, 16, 16).parts, 1);
    EXPECT_EQ(dnnl_conv_split(1, 144, 24, 1, 16, 8).parts, 3);
    EXPECT_EQ(dnnl_conv_split(1, 144, 24, 1, 16, 8).unit_m, 8);
    EXPECT_EQ(dnnl_conv_split(1, 144, 24, 1, 2, 0).parts, 2);
    EXPECT_EQ(dnnl_conv_split(1, 64, 64, 1, 16, 8).unit_m, 16) << "whole 16-blocks where M allows";
    EXPECT_EQ(dnnl_conv_split(1, 64, 20, 1, 16, 8).parts, 1) << "20 is no multiple of 8";
}

TEST(ExternSplit, FewOutputChannelsOffTheBlockSplitByRows) {
    // PP-OCR det's 96 -> 24 3x3 at 160x160 (and down to 20x20): bands of rows at 2 threads.
    EXPECT_TRUE(dnnl_conv_split_rows(1, 96, 24, 1, 160, 9, 2));
    EXPECT_TRUE(dnnl_conv_split_rows(1, 96, 24, 1, 20, 9, 2));
    EXPECT_FALSE(dnnl_conv_split_rows(1, 96, 24, 1, 20, 9, 4)) << "5 rows a part";
    EXPECT_FALSE(dnnl_conv_split_rows(1, 96, 24, 1, 160, 9, 1));
    EXPECT_FALSE(dnnl_conv_split_rows(2, 96, 24, 1, 160, 9, 2)) << "images split first";
    EXPECT_FALSE(dnnl_conv_split_rows(1, 32, 32, 1, 128, 9, 2)) << "whole 16-channel blocks";
    EXPECT_FALSE(dnnl_conv_split_rows(1, 440, 440, 1, 56, 1, 2)) << "many channels";
    EXPECT_FALSE(dnnl_conv_split_rows(1, 16, 24, 1, 56, 1, 2)) << "a 1x1 of few channels: copies dominate";
    EXPECT_FALSE(dnnl_conv_split_rows(1, 96, 24, 2, 160, 9, 2)) << "grouped";
    EXPECT_TRUE(dnnl_conv_split_rows(1, 3, 24, 1, 112, 9, 2)) << "ShuffleNetV2's stem: 3 input channels";
    EXPECT_FALSE(dnnl_conv_split_rows(1, 3, 32, 1, 112, 9, 2)) << "a stem of whole 16-channel blocks";
}

TEST(ExternSplit, ConvSplitsImagesEvenWhenTheyDoNotDivideTheThreads) {
    EXPECT_EQ(dnnl_conv_split(8, 64, 64, 1, 16).by, ConvSplit::kBatch);
    EXPECT_EQ(dnnl_conv_split(8, 64, 64, 1, 16).parts, 8);
    EXPECT_EQ(dnnl_conv_split(3, 64, 64, 1, 2).parts, 2);
    EXPECT_EQ(dnnl_conv_split(32, 64, 64, 1, 16).parts, 16);
}

TEST(ExternSplit, GroupedConvSplitsByGroupsOfSixteenChannels) {
    // Depthwise, 96 channels: units of 16 groups, 6 of them.
    ConvSplit dw = dnnl_conv_split(1, 96, 96, 96, 16);
    EXPECT_EQ(dw.by, ConvSplit::kGroups);
    EXPECT_EQ(dw.unit_g, 16);
    EXPECT_EQ(dw.parts, 6);
    EXPECT_EQ(dnnl_conv_split(1, 96, 96, 96, 2).parts, 2);
    // 8 groups of 8 -> 8 channels: two groups make a unit of 16.
    EXPECT_EQ(dnnl_conv_split(1, 64, 64, 8, 16).unit_g, 2);
    EXPECT_EQ(dnnl_conv_split(1, 64, 64, 8, 16).parts, 4);
    // In blocks of 8 on both sides a group of 8 channels is a unit: RegNetY's 13 groups of 8
    // (104 channels) and MNASNet's 72-channel depthwise conv split; with 16-blocks they cannot.
    EXPECT_EQ(dnnl_conv_split(1, 104, 104, 13, 2, 8, 8).unit_g, 1);
    EXPECT_EQ(dnnl_conv_split(1, 104, 104, 13, 2, 8, 8).parts, 2);
    EXPECT_EQ(dnnl_conv_split(1, 72, 72, 72, 2, 8, 8).unit_g, 8);
    EXPECT_EQ(dnnl_conv_split(1, 72, 72, 72, 2, 8, 8).parts, 2);
    EXPECT_EQ(dnnl_conv_split(1, 104, 104, 13, 2, 8, 16).parts, 1);  // the input's 16-blocks
    EXPECT_EQ(dnnl_conv_split(1, 104, 104, 13, 2).parts, 1);
}

TEST(ExternSplit, MatmulSplitsRowsColumnsOrBatch) {
    // A classifier at batch 1: M = 1, N = 1000 in columns of at least 64.
    EXPECT_EQ(dnnl_matmul_split(1, 1, 1000, 2).by, MatmulSplit::kCols);
    EXPECT_EQ(dnnl_matmul_split(1, 1, 1000, 2).parts, 2);
    EXPECT_EQ(dnnl_matmul_split(1, 1, 1000, 16).parts, 15) << "one part before (1000 < 64 * 16)";
    EXPECT_EQ(dnnl_matmul_split(1, 128, 768, 16).by, MatmulSplit::kRows);
    EXPECT_EQ(dnnl_matmul_split(1, 128, 768, 16).parts, 8);
    EXPECT_EQ(dnnl_matmul_split(12, 128, 128, 2).by, MatmulSplit::kBatch);
    EXPECT_EQ(dnnl_matmul_split(12, 128, 128, 16).parts, 12);
    EXPECT_EQ(dnnl_matmul_split(1, 16, 64, 16).parts, 1);
}

}  // namespace
}  // namespace kiln::runtime
