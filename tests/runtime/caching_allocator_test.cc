// Budget, arena and caching allocators: accounting, reuse (hit counts), release, and the
// OutOfMemory path leaving every allocator usable.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "runtime/arena.h"
#include "runtime/budget.h"
#include "runtime/caching_allocator.h"
#include "support/error.h"

namespace kiln::runtime {
namespace {

std::string oom_message(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kOutOfMemory);
        return e.message();
    }
    ADD_FAILURE() << "expected an OutOfMemory error";
    return "";
}

TEST(BudgetAllocator, RefusesPastTheBudgetAndStaysUsable) {
    auto cpu = std::make_shared<CpuAllocator>();
    BudgetAllocator b(cpu, 1000);
    void* p = b.allocate(640, "conv1_out");
    EXPECT_EQ(oom_message([&] { b.allocate(384, "relu2_out"); }),
              "out of memory budget: allocating 384 bytes for 'relu2_out' with 640 bytes in use exceeds the "
              "budget of 1000 bytes");
    EXPECT_EQ(b.bytes_in_use(), 640u);
    EXPECT_EQ(cpu->bytes_in_use(), 640u);  // the refused request never reached the parent
    EXPECT_EQ(b.refusals(), 1u);
    void* q = b.allocate(360, "fits exactly");
    EXPECT_EQ(b.bytes_in_use(), 1000u);
    b.deallocate(p, 640);
    b.deallocate(q, 360);
    EXPECT_EQ(b.bytes_in_use(), 0u);
    EXPECT_EQ(cpu->bytes_in_use(), 0u);
    EXPECT_EQ(b.peak_bytes(), 1000u);
    EXPECT_THROW(b.allocate(SIZE_MAX - 8, "huge"), Error);
    EXPECT_EQ(b.bytes_in_use(), 0u);
}

TEST(ArenaAllocator, PlannedOffsetsAndBumpAllocation) {
    CpuAllocator cpu;
    {
        ArenaAllocator a(&cpu, 1024, "arena");
        EXPECT_EQ(cpu.bytes_in_use(), 1024u);
        ASSERT_NE(a.base(), nullptr);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(a.base()) % 64, 0u);
        EXPECT_EQ(a.at(64, 960), static_cast<char*>(a.base()) + 64);
        EXPECT_EQ(a.at(64, 961), nullptr);
        void* p = a.allocate(100, "x");  // takes 128
        void* q = a.allocate(64, "y");
        EXPECT_EQ(static_cast<char*>(q) - static_cast<char*>(p), 128);
        EXPECT_EQ(a.bytes_in_use(), 192u);
        EXPECT_NE(oom_message([&] { a.allocate(1024, "z"); }).find("'z'"), std::string::npos);
        a.deallocate(q, 64);  // the last one: given back
        EXPECT_EQ(a.bytes_in_use(), 128u);
        a.reset();
        EXPECT_EQ(a.bytes_in_use(), 0u);
        EXPECT_EQ(a.allocate(1024, "all"), a.base());
        EXPECT_EQ(a.peak_bytes(), 1024u);
    }
    EXPECT_EQ(cpu.bytes_in_use(), 0u);
    // The arena's one block is named in the parent's OutOfMemory error.
    CpuAllocator small(100);
    EXPECT_NE(oom_message([&] { ArenaAllocator a(&small, 200, "arena for 3 model intermediates"); })
                  .find("'arena for 3 model intermediates'"),
              std::string::npos);
}

TEST(CachingAllocator, ReusesFreedBlocksAndCountsHits) {
    auto cpu = std::make_shared<CpuAllocator>();
    auto pool = std::make_shared<CachingAllocator>(cpu);
    void* a = pool->allocate(1000, "a");  // miss: a 1024-byte block
    void* b = pool->allocate(4096, "b");  // miss
    EXPECT_EQ(pool->stats().misses, 2u);
    EXPECT_EQ(pool->stats().hits, 0u);
    pool->deallocate(a, 1000);
    EXPECT_EQ(pool->stats().bytes_cached, 1024u);
    EXPECT_EQ(cpu->bytes_in_use(), 1024u + 4096u);  // cached, not returned
    void* c = pool->allocate(1024, "c");  // same class: hit, same block
    EXPECT_EQ(c, a);
    EXPECT_EQ(pool->stats().hits, 1u);
    pool->deallocate(b, 4096);
    void* d = pool->allocate(4000, "d");  // 4032 -> the 4096 block is within 1/8: hit
    EXPECT_EQ(d, b);
    EXPECT_EQ(pool->stats().hits, 2u);
    pool->deallocate(d, 4000);
    void* e = pool->allocate(64, "e");  // far smaller than any cached block: miss
    EXPECT_NE(e, b);
    EXPECT_EQ(pool->stats().misses, 3u);
    EXPECT_EQ(pool->bytes_in_use(), 1024u + 64u);
    EXPECT_EQ(pool->release_cached(), 4096u);
    EXPECT_EQ(pool->stats().bytes_cached, 0u);
    EXPECT_EQ(cpu->bytes_in_use(), 1024u + 64u);
    pool->deallocate(c, 1024);
    pool->deallocate(e, 64);
    EXPECT_EQ(pool->stats().peak_bytes, 1024u + 4096u);
    pool.reset();
    EXPECT_EQ(cpu->bytes_in_use(), 0u);  // destruction gives everything back
}

TEST(CachingAllocator, TensorsReturnTheirBlockAndKeepThePoolAlive) {
    auto cpu = std::make_shared<CpuAllocator>();
    auto pool = std::make_shared<CachingAllocator>(cpu);
    const void* first = nullptr;
    {
        Tensor t = pool->allocate_tensor(DType::kFloat32, {4, 16}, "out");
        first = t.data();
        EXPECT_EQ(t.nbytes(), 256u);
        EXPECT_EQ(pool->bytes_in_use(), 256u);
    }
    EXPECT_EQ(pool->bytes_in_use(), 0u);
    Tensor again = pool->allocate_tensor(DType::kFloat32, {64}, "out");
    EXPECT_EQ(again.data(), first);
    EXPECT_EQ(pool->stats().hits, 1u);
    // The tensor outlives the last named owner of the pool: the block still goes back safely.
    std::weak_ptr<CachingAllocator> weak = pool;
    pool.reset();
    EXPECT_FALSE(weak.expired());
    again = Tensor();
    EXPECT_TRUE(weak.expired());
    EXPECT_EQ(cpu->bytes_in_use(), 0u);
}

TEST(CachingAllocator, BudgetBelowTheCacheReleasesCachedBlocksBeforeFailing) {
    auto cpu = std::make_shared<CpuAllocator>();
    auto budget = std::make_shared<BudgetAllocator>(cpu, 4096);
    CachingAllocator pool(budget);
    void* a = pool.allocate(3072, "a");
    pool.deallocate(a, 3072);  // cached: still counts against the budget
    EXPECT_EQ(budget->bytes_in_use(), 3072u);
    void* b = pool.allocate(2048, "b");  // does not fit next to the cache; the cache is released
    EXPECT_EQ(pool.stats().bytes_cached, 0u);
    EXPECT_EQ(budget->bytes_in_use(), 2048u);
    std::string msg = oom_message([&] { pool.allocate(4096, "c"); });
    EXPECT_EQ(msg, "out of memory budget: allocating 4096 bytes for 'c' with 2048 bytes in use exceeds the budget "
                   "of 4096 bytes");
    pool.deallocate(b, 2048);
    void* c = pool.allocate(4096, "c");  // usable again once memory is free
    pool.deallocate(c, 4096);
}

TEST(SessionAllocator, StacksPoolOverBudget) {
    auto pool = make_session_allocator(1 << 12);
    void* p = pool->allocate(4096, "exact");
    EXPECT_THROW(pool->allocate(64, "one more"), Error);
    pool->deallocate(p, 4096);
    auto unlimited = make_session_allocator(0);
    void* q = unlimited->allocate(1 << 20, "big");
    unlimited->deallocate(q, 1 << 20);
}

}  // namespace
}  // namespace kiln::runtime
