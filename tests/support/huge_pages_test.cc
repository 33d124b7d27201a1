// advise_huge_pages marks the 2 MB-aligned interior of a large buffer for transparent huge pages:
// the kernel's own view of the mapping (/proc/self/smaps: VmFlags "hg" = MADV_HUGEPAGE) is the
// reference; small buffers and null are left alone.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "kiln/tensor.h"
#include "support/huge_pages.h"

namespace kiln {
namespace {

/// The VmFlags of the mapping holding `addr` ("" when /proc/self/smaps cannot say).
std::string vm_flags_at(const void* addr) {
    std::ifstream smaps("/proc/self/smaps");
    const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
    bool inside = false;
    for (std::string line; std::getline(smaps, line);) {
        uintptr_t lo = 0, hi = 0;
        char dash = 0;
        std::istringstream head(line);
        if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
            inside = lo <= a && a < hi;
            continue;
        }
        if (inside && line.rfind("VmFlags:", 0) == 0) return line;
    }
    return "";
}

bool thp_enabled() {
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string s;
    std::getline(f, s);
    return !s.empty() && s.find("[never]") == std::string::npos;
}

TEST(HugePages, LargeBuffersAreAdvisedSmallOnesNot) {
    static const int probe = 0;
    if (!thp_enabled() || vm_flags_at(&probe).empty()) GTEST_SKIP() << "no transparent huge pages here";
    const size_t big = size_t{16} << 20;
    void* p = std::aligned_alloc(64, big);
    ASSERT_NE(p, nullptr);
    advise_huge_pages(p, big);
    const uintptr_t inner = (reinterpret_cast<uintptr_t>(p) + (size_t{2} << 20)) & ~((uintptr_t{2} << 20) - 1);
    EXPECT_NE(vm_flags_at(reinterpret_cast<void*>(inner)).find(" hg"), std::string::npos)
        << vm_flags_at(reinterpret_cast<void*>(inner));
    std::free(p);
    // A tensor of 32 MB is advised by its constructor; one of 1 MB is not.
    Tensor large(DType::kFloat32, {8 << 20});
    const uintptr_t t = (reinterpret_cast<uintptr_t>(large.data()) + (size_t{2} << 20)) & ~((uintptr_t{2} << 20) - 1);
    EXPECT_NE(vm_flags_at(reinterpret_cast<void*>(t)).find(" hg"), std::string::npos);
    Tensor small(DType::kFloat32, {1 << 18});
    EXPECT_EQ(vm_flags_at(small.data()).find(" hg"), std::string::npos) << vm_flags_at(small.data());
    advise_huge_pages(nullptr, big);  // nothing to do
}

}  // namespace
}  // namespace kiln
