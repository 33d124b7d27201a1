// host_cpu_features (CPUID + XCR0) against GCC's __builtin_cpu_supports for every name: the
// compiler's own detection is the independent reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "runtime/cpu_features.h"

namespace kiln::runtime {
namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
TEST(CpuFeatures, AgreeWithTheCompilersDetection) {
    const std::vector<std::string> have = host_cpu_features();
    ASSERT_FALSE(have.empty());
    EXPECT_EQ(have[0], "x86_64");
    auto has = [&](const char* n) { return std::find(have.begin(), have.end(), n) != have.end(); };
    __builtin_cpu_init();
#define KILN_EXPECT_FEATURE(name) EXPECT_EQ(has(name), __builtin_cpu_supports(name) != 0) << name;
    KILN_EXPECT_FEATURE("sse4.1")
    KILN_EXPECT_FEATURE("sse4.2")
    KILN_EXPECT_FEATURE("popcnt")
    KILN_EXPECT_FEATURE("avx")
    KILN_EXPECT_FEATURE("avx2")
    KILN_EXPECT_FEATURE("fma")
    KILN_EXPECT_FEATURE("f16c")
    KILN_EXPECT_FEATURE("bmi")
    KILN_EXPECT_FEATURE("bmi2")
    KILN_EXPECT_FEATURE("avx512f")
    KILN_EXPECT_FEATURE("avx512bw")
    KILN_EXPECT_FEATURE("avx512dq")
    KILN_EXPECT_FEATURE("avx512vl")
    KILN_EXPECT_FEATURE("avx512cd")
    KILN_EXPECT_FEATURE("avx512vnni")
    KILN_EXPECT_FEATURE("avx512bf16")
    KILN_EXPECT_FEATURE("avx512fp16")
    KILN_EXPECT_FEATURE("avx512vbmi")
    KILN_EXPECT_FEATURE("avx512ifma")
    KILN_EXPECT_FEATURE("avxvnni")
    KILN_EXPECT_FEATURE("amx-tile")
    KILN_EXPECT_FEATURE("amx-int8")
    KILN_EXPECT_FEATURE("amx-bf16")
    KILN_EXPECT_FEATURE("gfni")
    KILN_EXPECT_FEATURE("vpclmulqdq")
#undef KILN_EXPECT_FEATURE
}
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
// The int8 dot product against the kernel's own report of the CPU (/proc/cpuinfo's flags).
TEST(CpuFeatures, Int8DotProductAsTheKernelReportsIt) {
    std::ifstream cpuinfo("/proc/cpuinfo");
    if (!cpuinfo) GTEST_SKIP() << "no /proc/cpuinfo";
    std::string line;
    while (std::getline(cpuinfo, line) && line.rfind("flags", 0) != 0) {
    }
    ASSERT_EQ(line.rfind("flags", 0), 0u) << "no flags line in /proc/cpuinfo";
    std::istringstream words(line.substr(line.find(':') + 1));
    bool vnni = false;
    for (std::string w; words >> w;) vnni = vnni || w == "avx512_vnni" || w == "avx_vnni" || w == "amx_int8";
    EXPECT_EQ(host_has_int8_dot_product(), vnni);
}
#endif

TEST(CpuFeatures, MissingNamesTheAbsentAndTheUnknown) {
    const std::vector<std::string> have = host_cpu_features();
    EXPECT_TRUE(missing_cpu_features(have).empty());
    EXPECT_EQ(missing_cpu_features({have[0], "no-such-feature", "avx9000"}),
              (std::vector<std::string>{"no-such-feature", "avx9000"}));
}

}  // namespace
}  // namespace kiln::runtime
