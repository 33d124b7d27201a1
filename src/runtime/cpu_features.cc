// Host features from the CPUID instruction (leaves 1 and 7) and the OS's XCR0 register (which
// register states it saves: a feature whose registers the OS does not save is absent), so the
// list is the same whichever compiler built the runtime (compilers' __builtin_cpu_supports
// know different names).
#include "runtime/cpu_features.h"

#include <algorithm>
#include <cstdint>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace kiln::runtime {

#if defined(__x86_64__)
namespace {

struct Regs {
    unsigned a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(unsigned leaf, unsigned sub) {
    Regs r;
    if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) return Regs{};
    return r;
}

uint64_t xcr0() {
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (static_cast<uint64_t>(hi) << 32) | lo;
}

bool bit(unsigned v, int i) { return (v >> i) & 1u; }

}  // namespace
#endif

std::vector<std::string> host_cpu_features() {
    std::vector<std::string> f;
#if defined(__x86_64__)
    f.push_back("x86_64");
    const Regs l1 = cpuid(1, 0);
    const Regs l7 = cpuid(0, 0).a >= 7 ? cpuid(7, 0) : Regs{};
    const Regs l7s1 = l7.a >= 1 ? cpuid(7, 1) : Regs{};
    const uint64_t xcr = bit(l1.c, 27) ? xcr0() : 0;  // OSXSAVE: the OS manages XCR0
    const bool os_avx = (xcr & 0x6) == 0x6;              // XMM and YMM state
    const bool os_avx512 = os_avx && (xcr & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
    const bool os_amx = (xcr & 0x60000) == 0x60000;      // XTILECFG, XTILEDATA
    auto add = [&](const char* name, bool have) {
        if (have) f.push_back(name);
    };
    add("sse4.1", bit(l1.c, 19));
    add("sse4.2", bit(l1.c, 20));
    add("popcnt", bit(l1.c, 23));
    add("avx", os_avx && bit(l1.c, 28));
    add("avx2", os_avx && bit(l7.b, 5));
    add("fma", os_avx && bit(l1.c, 12));
    add("f16c", os_avx && bit(l1.c, 29));
    add("bmi", bit(l7.b, 3));
    add("bmi2", bit(l7.b, 8));
    add("avx512f", os_avx512 && bit(l7.b, 16));
    add("avx512bw", os_avx512 && bit(l7.b, 30));
    add("avx512dq", os_avx512 && bit(l7.b, 17));
    add("avx512vl", os_avx512 && bit(l7.b, 31));
    add("avx512cd", os_avx512 && bit(l7.b, 28));
    add("avx512vnni", os_avx512 && bit(l7.c, 11));
    add("avx512bf16", os_avx512 && bit(l7s1.a, 5));
    add("avx512fp16", os_avx512 && bit(l7.d, 23));
    add("avx512vbmi", os_avx512 && bit(l7.c, 1));
    add("avx512ifma", os_avx512 && bit(l7.b, 21));
    add("avxvnni", os_avx && bit(l7s1.a, 4));
    add("amx-tile", os_amx && bit(l7.d, 24));
    add("amx-int8", os_amx && bit(l7.d, 25));
    add("amx-bf16", os_amx && bit(l7.d, 22));
    add("gfni", bit(l7.c, 8));
    add("vpclmulqdq", os_avx && bit(l7.c, 10));
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

bool host_has_int8_dot_product() {
    return missing_cpu_features({"avx512vnni", "avxvnni", "amx-int8"}).size() < 3;  // any one of them
}

}  // namespace kiln::runtime
