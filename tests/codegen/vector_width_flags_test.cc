// Full-width vectors on AVX-512 hosts (codegen/vector_width_flags.h), fed the target reports of
// GCC 12 for the CPUs Kiln runs on: an Intel Xeon (sapphirerapids, skylake-avx512: 256-bit
// preference, so -mprefer-vector-width=512 is added), the AMD Zen 4 development machine (znver3 /
// znver4 tuning: no preference, nothing added) and an AVX2-only host (nothing added). Then, on an
// AVX-512 host with GCC, the flag's effect itself: a kernel-like loop compiled under Sapphire
// Rapids tuning uses zmm FMAs only with it.
#include "codegen/vector_width_flags.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/cpu_features.h"

namespace kiln::codegen {
namespace {

// Lines of `gcc-12 -march=X -Q --help=target` (tabs as GCC prints them).
const char* kSapphireRapids =
    "  -mprefer-avx128             \t\t-mprefer-vector-width=128\n"
    "  -mprefer-vector-width=      \t\t256\n"
    "  -mpreferred-stack-boundary= \t\t0\n";
const char* kZnver4 =
    "  -mprefer-avx128             \t\t-mprefer-vector-width=128\n"
    "  -mprefer-vector-width=      \t\tnone\n";
const char* kPrefer128 = "  -mprefer-vector-width=      \t\t128\n";

TEST(VectorWidthFlags, IntelTuningGetsFullWidthVectorsOnAvx512) {
    EXPECT_EQ(wide_vector_flags(kSapphireRapids, true), std::vector<std::string>{"-mprefer-vector-width=512"});
    EXPECT_EQ(wide_vector_flags(kPrefer128, true), std::vector<std::string>{"-mprefer-vector-width=512"});
}

TEST(VectorWidthFlags, NothingAddedWithoutAPreferenceOrWithoutAvx512) {
    EXPECT_TRUE(wide_vector_flags(kZnver4, true).empty()) << "AMD Zen 4: GCC already uses 512-bit vectors";
    EXPECT_TRUE(wide_vector_flags(kSapphireRapids, false).empty()) << "AVX2-only host: 512 is no option";
    EXPECT_EQ(wide_vector_flags("", true).size(), 1u) << "a compiler without the report (clang): asked to accept it";
    EXPECT_TRUE(wide_vector_flags("  -mprefer-avx128 \t\t-mprefer-vector-width=128\n"
                                  "  -mprefer-vector-width=      \t\tnone\n",
                                  true)
                    .empty())
        << "the alias line names 128 as its meaning, not as the setting";
}

bool host_has_avx512() {
    const std::vector<std::string> f = runtime::host_cpu_features();
    return std::find(f.begin(), f.end(), "avx512f") != f.end();
}

/// zmm FMAs in `cc -O3 -march=native FLAGS` of a kernel-like loop (a 64-wide accumulator tile).
int zmm_fmas(const std::string& flags) {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("kiln_vw_test_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::ofstream(dir / "k.c") << "void k(const float* restrict a, const float* restrict b, float* restrict c) {\n"
                                  "  float acc[64] = {0};\n"
                                  "  for (long k = 0; k < 512; ++k)\n"
                                  "    for (long i = 0; i < 64; ++i) acc[i] += a[k] * b[k * 64 + i];\n"
                                  "  for (long i = 0; i < 64; ++i) c[i] = acc[i];\n}\n";
    const std::string cmd = "gcc -O3 -march=native -ffp-contract=fast -std=gnu11 " + flags + " -S -o " +
                            (dir / "k.s").string() + " " + (dir / "k.c").string() + " 2>/dev/null";
    int n = -1;
    if (std::system(cmd.c_str()) == 0) {
        std::ifstream in(dir / "k.s");
        n = 0;
        for (std::string line; std::getline(in, line);)
            n += line.find("vfmadd") != std::string::npos && line.find("zmm") != std::string::npos;
    }
    fs::remove_all(dir);
    return n;
}

TEST(VectorWidthFlags, TheFlagMakesIntelTunedKernelsUseZmm) {
    if (!host_has_avx512() || std::system("gcc --version >/dev/null 2>&1") != 0)
        GTEST_SKIP() << "needs an AVX-512 host and gcc";
    const int narrow = zmm_fmas("-mtune=sapphirerapids");
    ASSERT_GE(narrow, 0) << "gcc failed";
    EXPECT_EQ(narrow, 0) << "Intel tuning was expected to prefer ymm";
    EXPECT_GT(zmm_fmas("-mtune=sapphirerapids " + wide_vector_flags(kSapphireRapids, true).at(0)), 0);
}

}  // namespace
}  // namespace kiln::codegen
