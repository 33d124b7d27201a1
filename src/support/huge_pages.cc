#include "support/huge_pages.h"

#include <cstdint>
#include <cstdlib>
#include <string>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace kiln {

namespace {

/// madvise(advice) over the 2 MB-aligned part of [p, p + bytes), for buffers of 4 MB and more.
void advise_aligned(void* p, size_t bytes, [[maybe_unused]] int advice) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    constexpr uintptr_t kHuge = uintptr_t{2} << 20;
    static const bool off = [] {
        const char* v = std::getenv("KILN_HUGE_PAGES");
        return v && std::string(v) == "0";
    }();
    if (off || p == nullptr || bytes < 2 * kHuge) return;
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, advice);
#else
    (void)p;
    (void)bytes;
#endif
}

}  // namespace

#if defined(__linux__) && defined(MADV_HUGEPAGE)
void advise_huge_pages(void* p, size_t bytes) { advise_aligned(p, bytes, MADV_HUGEPAGE); }
void advise_small_pages(void* p, size_t bytes) { advise_aligned(p, bytes, MADV_NOHUGEPAGE); }
#else
void advise_huge_pages(void* p, size_t bytes) { advise_aligned(p, bytes, 0); }
void advise_small_pages(void* p, size_t bytes) { advise_aligned(p, bytes, 0); }
#endif

}  // namespace kiln
