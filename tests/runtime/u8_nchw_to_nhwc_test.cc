// interleave_planes (runtime/u8_nchw_to_nhwc.h) against the index formula: 3 planes (the VBMI
// path where the host has it, with a scalar tail) and other channel counts (the loop).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "runtime/u8_nchw_to_nhwc.h"

namespace kiln::runtime {
namespace {

void check(int64_t channels, int64_t pixels) {
    std::mt19937 rng(static_cast<unsigned>(channels * 1000 + pixels));
    std::vector<uint8_t> x(static_cast<size_t>(channels * pixels));
    for (uint8_t& v : x) v = static_cast<uint8_t>(rng());
    std::vector<const uint8_t*> planes;
    for (int64_t c = 0; c < channels; ++c) planes.push_back(x.data() + c * pixels);
    std::vector<uint8_t> out(static_cast<size_t>(channels * pixels + 1), 0xEE);
    interleave_planes(planes.data(), channels, pixels, out.data());
    for (int64_t p = 0; p < pixels; ++p)
        for (int64_t c = 0; c < channels; ++c)
            ASSERT_EQ(out[static_cast<size_t>(p * channels + c)], x[static_cast<size_t>(c * pixels + p)])
                << channels << " planes of " << pixels << ": pixel " << p << " channel " << c;
    EXPECT_EQ(out.back(), 0xEE) << "wrote past the end";
}

TEST(U8NchwToNhwc, InterleavesPlanes) {
    check(3, 224 * 224);  // a stem's input
    check(3, 64);         // one vector step
    check(3, 64 * 5 + 17);  // vector steps and a tail
    check(3, 5);          // only the tail
    check(1, 100);
    check(4, 333);
}

}  // namespace
}  // namespace kiln::runtime
