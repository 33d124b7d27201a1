// ThreadPool: every index covered exactly once, nesting runs inline, concurrent callers.
#include "runtime/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace kiln::runtime {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
    for (int threads : {1, 2, 3, 4, 7}) {
        ThreadPool pool(threads);
        EXPECT_EQ(pool.num_threads(), threads);
        for (int64_t n : {0, 1, 2, 3, 5, 8, 13, 64, 1000, 4097}) {
            std::vector<std::atomic<int>> hits(n);
            std::atomic<int> calls{0};
            pool.parallel_for(n, [&](int64_t b, int64_t e) {
                ASSERT_LE(0, b);
                ASSERT_LT(b, e);
                ASSERT_LE(e, n);
                ++calls;
                for (int64_t i = b; i < e; ++i) hits[i]++;
            });
            for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " threads=" << threads << " i=" << i;
            EXPECT_LE(calls.load(), std::min<int64_t>(n, threads)) << "n=" << n;
        }
    }
}

TEST(ThreadPool, UsesSeveralThreads) {
    ThreadPool pool(4);
    std::mutex mu;
    std::set<std::thread::id> ids;
    // Repeat: a fast chunk may let one thread take several chunks.
    for (int rep = 0; rep < 50 && ids.size() < 2; ++rep) {
        pool.parallel_for(4, [&](int64_t, int64_t) {
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            std::lock_guard<std::mutex> lock(mu);
            ids.insert(std::this_thread::get_id());
        });
    }
    EXPECT_GE(ids.size(), 2u);
}

TEST(ThreadPool, NestedCallsRunInline) {
    ThreadPool pool(4);
    const int64_t n = 16, m = 33;
    std::vector<std::atomic<int>> hits(n * m);
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
            std::thread::id outer = std::this_thread::get_id();
            int inner_calls = 0;
            pool.parallel_for(m, [&](int64_t b2, int64_t e2) {
                EXPECT_EQ(std::this_thread::get_id(), outer);
                ++inner_calls;
                for (int64_t j = b2; j < e2; ++j) hits[i * m + j]++;
            });
            EXPECT_EQ(inner_calls, 1);
        }
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(ThreadPool, ConcurrentCallers) {
    ThreadPool pool(3);
    const int callers = 4, reps = 200;
    std::vector<std::thread> ts;
    std::atomic<int64_t> total{0};
    for (int c = 0; c < callers; ++c) {
        ts.emplace_back([&, c] {
            for (int r = 0; r < reps; ++r) {
                int64_t n = 1 + (c * 31 + r * 7) % 50;
                std::atomic<int64_t> sum{0};
                pool.parallel_for(n, [&](int64_t b, int64_t e) {
                    for (int64_t i = b; i < e; ++i) sum += i;
                });
                ASSERT_EQ(sum.load(), n * (n - 1) / 2);
                total += n;
            }
        });
    }
    for (auto& t : ts) t.join();
    EXPECT_GT(total.load(), 0);
}

TEST(ThreadPool, ExceptionPropagatesAndPoolStaysUsable) {
    ThreadPool pool(4);
    EXPECT_THROW(pool.parallel_for(8, [](int64_t b, int64_t) {
        if (b >= 4) throw std::runtime_error("chunk failed");
    }), std::runtime_error);
    std::atomic<int64_t> count{0};
    pool.parallel_for(100, [&](int64_t b, int64_t e) { count += e - b; });
    EXPECT_EQ(count.load(), 100);
}

struct CCtx {
    std::atomic<int>* hits;
};
void c_task(int64_t b, int64_t e, void* ctx) {
    for (int64_t i = b; i < e; ++i) static_cast<CCtx*>(ctx)->hits[i]++;
}

TEST(ThreadPool, KernelEnvAdapter) {
    ThreadPool pool(4);
    kiln_kernel_env env = pool.kernel_env();
    EXPECT_EQ(env.pool, &pool);
    std::vector<std::atomic<int>> hits(1001);
    CCtx ctx{hits.data()};
    env.parallel_for(env.pool, 1001, c_task, &ctx);
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

// Several callers at once (the dataflow executor's inter-op threads): every index once, and
// the threads that run chunks are only the callers and the pool's workers.
TEST(ThreadPool, ManyConcurrentCallersStayWithinTheirThreads) {
    ThreadPool pool(3);
    std::mutex mu;
    std::set<std::thread::id> seen;
    std::set<std::thread::id> callers;
    std::vector<std::thread> ts;
    std::atomic<int> bad{0};
    for (int c = 0; c < 4; ++c) {
        ts.emplace_back([&] {
            {
                std::lock_guard<std::mutex> g(mu);
                callers.insert(std::this_thread::get_id());
            }
            for (int rep = 0; rep < 200; ++rep) {
                std::vector<std::atomic<int>> hits(97);
                pool.parallel_for(97, [&](int64_t b, int64_t e) {
                    for (int64_t i = b; i < e; ++i) hits[i]++;
                    std::lock_guard<std::mutex> g(mu);
                    seen.insert(std::this_thread::get_id());
                });
                for (auto& h : hits) bad += h.load() != 1;
            }
        });
    }
    for (auto& t : ts) t.join();
    EXPECT_EQ(bad.load(), 0);
    size_t workers = 0;
    for (auto id : seen) workers += !callers.count(id);
    EXPECT_LE(workers, 2u);  // num_threads - 1 workers, however many callers
}

TEST(ThreadPool, GlobalPoolIsSharedPerSize) {
    ThreadPool* a = global_thread_pool(2);
    EXPECT_EQ(a, global_thread_pool(2));
    EXPECT_EQ(a->num_threads(), 2);
    EXPECT_NE(a, global_thread_pool(3));
    EXPECT_EQ(global_thread_pool(3)->num_threads(), 3);
}

}  // namespace
}  // namespace kiln::runtime
