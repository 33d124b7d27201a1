// Transparent huge pages for large buffers: weights and arenas are streamed through on every run,
// and with 4 KB pages a ResNet-50's 100 MB of weights touch 25 000 TLB entries per inference
// (the second-level TLB holds about 3 000). Where the kernel's THP mode is `madvise` (Debian's
// default), a buffer gets 2 MB pages only if asked: ResNet-50 at one thread ran 3% faster with
// the process's mallocs advised (GLIBC_TUNABLES=glibc.malloc.hugetlb=1, 37.3 -> 36.2 ms).
// KILN_HUGE_PAGES=0 turns the advice off.
#pragma once

#include <cstddef>

namespace kiln {

/// Asks for 2 MB pages over the 2 MB-aligned part of [p, p + bytes) (nothing for buffers under
/// 4 MB, or off Linux). Call before the buffer is first written: pages already touched stay small.
/// A refusal (THP off) is ignored: the buffer works either way.
void advise_huge_pages(void* p, size_t bytes);

/// The opposite, for a buffer about to be written for the first time on a latency-critical path:
/// with THP's defrag at `madvise` (Debian's default) a first touch of an advised region compacts
/// memory synchronously (a 64 MB buffer: ~150 ms against ~25 ms in 4 KB pages). Advising it again
/// later lets khugepaged collapse it in the background.
void advise_small_pages(void* p, size_t bytes);

}  // namespace kiln
