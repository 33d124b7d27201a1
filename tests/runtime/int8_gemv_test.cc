// The VNNI GEMV (runtime/int8_gemv.h) against an int64 loop written here, exactly: u8 and s8
// activations with zero points, K not a multiple of 4, N not a multiple of 16, 1 to 4 rows, and
// column ranges that start inside B.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "runtime/int8_gemv.h"

namespace kiln::runtime {
namespace {

void check(int64_t rows, int64_t k, int64_t n, bool a_signed, int32_t zp, int64_t c0, int64_t c1) {
    std::mt19937 rng(static_cast<unsigned>(rows * 1000 + k * 10 + n));
    std::vector<int8_t> b(static_cast<size_t>(k * n));
    for (int8_t& v : b) v = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
    std::vector<uint8_t> a(static_cast<size_t>(rows * k));
    for (uint8_t& v : a) v = static_cast<uint8_t>(rng() % 256);
    Int8Gemv g(b.data(), k, n);
    std::vector<int32_t> acc(static_cast<size_t>(rows * (c1 - c0)), -1);
    g.run(a.data(), rows, a_signed, zp, c0, c1, acc.data());
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = c0; j < c1; ++j) {
            int64_t want = 0;
            for (int64_t t = 0; t < k; ++t) {
                const int64_t x = a_signed ? static_cast<int8_t>(a[static_cast<size_t>(r * k + t)])
                                           : a[static_cast<size_t>(r * k + t)];
                want += (x - zp) * b[static_cast<size_t>(t * n + j)];
            }
            ASSERT_EQ(acc[static_cast<size_t>(r * (c1 - c0) + j - c0)], want)
                << rows << "x" << k << "x" << n << (a_signed ? " s8" : " u8") << " row " << r << " column " << j;
        }
}

TEST(Int8Gemv, ExactAgainstAnIntegerLoop) {
    if (!Int8Gemv::available()) GTEST_SKIP() << "no AVX-512 VNNI on this host";
    check(1, 2048, 1000, false, 131, 0, 1000);  // ResNet-50's classifier
    check(1, 97, 333, false, 0, 0, 333);        // K % 4 == 1, N % 16 == 13
    check(2, 66, 70, true, -5, 0, 70);          // s8 activations
    check(3, 64, 130, false, 255, 64, 130);     // a column range from inside B
    check(4, 130, 200, true, 127, 16, 137);     // four rows, a range ending mid-block
}

}  // namespace
}  // namespace kiln::runtime
