// The float matrix transpose around oneDNN's 1-D convolutions (runtime/transpose_2d.h) against
// the index formula, for shapes with and without whole 8x8 blocks, either side the longer, strides
// that are multiples of 512 floats (blocks of 8) and not (blocks of 16, with a remainder of 8).
#include <gtest/gtest.h>

#include <vector>

#include "runtime/transpose_2d.h"

namespace kiln::runtime {
namespace {

TEST(Transpose2d, MatchesTheIndexFormula) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{128, 1024}, {1024, 128}, {1, 7}, {7, 1}, {8, 8}, {37, 24},
                              {24, 37}, {65, 130}, {3999, 64}, {24, 100}, {100, 24}, {256, 500}}) {
        std::vector<float> src(static_cast<size_t>(rows * cols)), dst(src.size(), -1.0f);
        for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) * 0.5f + 1.0f;
        transpose_2d(src.data(), rows, cols, dst.data());
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c)
                ASSERT_EQ(dst[c * rows + r], src[r * cols + c]) << rows << "x" << cols << " at " << r << "," << c;
    }
}

}  // namespace
}  // namespace kiln::runtime
