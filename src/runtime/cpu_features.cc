// Host features through the compiler's __builtin_cpu_supports, which takes only literal names:
// hence one macro line per feature.
#include "runtime/cpu_features.h"

#include <algorithm>

namespace kiln::runtime {

std::vector<std::string> host_cpu_features() {
    std::vector<std::string> f;
#if defined(__x86_64__)
    f.push_back("x86_64");
    __builtin_cpu_init();
#define KILN_CPU_FEATURE(name) \
    if (__builtin_cpu_supports(name)) f.push_back(name);
    KILN_CPU_FEATURE("sse4.1")
    KILN_CPU_FEATURE("sse4.2")
    KILN_CPU_FEATURE("popcnt")
    KILN_CPU_FEATURE("avx")
    KILN_CPU_FEATURE("avx2")
    KILN_CPU_FEATURE("fma")
    KILN_CPU_FEATURE("f16c")
    KILN_CPU_FEATURE("bmi")
    KILN_CPU_FEATURE("bmi2")
    KILN_CPU_FEATURE("avx512f")
    KILN_CPU_FEATURE("avx512bw")
    KILN_CPU_FEATURE("avx512dq")
    KILN_CPU_FEATURE("avx512vl")
    KILN_CPU_FEATURE("avx512cd")
    KILN_CPU_FEATURE("avx512vnni")
    KILN_CPU_FEATURE("avx512bf16")
    KILN_CPU_FEATURE("avx512fp16")
    KILN_CPU_FEATURE("avx512vbmi")
    KILN_CPU_FEATURE("avx512ifma")
    KILN_CPU_FEATURE("avxvnni")
    KILN_CPU_FEATURE("amx-tile")
    KILN_CPU_FEATURE("amx-int8")
    KILN_CPU_FEATURE("amx-bf16")
    KILN_CPU_FEATURE("gfni")
    KILN_CPU_FEATURE("vpclmulqdq")
#undef KILN_CPU_FEATURE
#elif defined(__aarch64__)
    // Kernels for aarch64 are compiled for the host too; the architecture is what is checked.
    f.push_back("aarch64");
#else
    f.push_back("unknown-arch");
#endif
    return f;
}

std::vector<std::string> missing_cpu_features(const std::vector<std::string>& wanted) {
    static const std::vector<std::string> have = host_cpu_features();
    std::vector<std::string> missing;
    for (const std::string& w : wanted)
        if (std::find(have.begin(), have.end(), w) == have.end()) missing.push_back(w);
    return missing;
}

}  // namespace kiln::runtime
