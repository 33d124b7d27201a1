// Loop limits (runtime::LoopLimits, runtime::RunControl): a thread cap, and preemptible loops
// that cover every index once unless stopped, and stop handing out chunks once requested.
#include "runtime/run_control.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace kiln::runtime {
namespace {

TEST(LoopLimits, MaxThreadsCapsTheThreadsOfALoop) {
    ThreadPool pool(4);
    for (int cap : {1, 2, 3}) {
        std::mutex mu;
        std::set<std::thread::id> ids;
        std::atomic<int> inside{0}, most{0};
        for (int rep = 0; rep < 50; ++rep) {
            pool.parallel_for(64, [&](int64_t, int64_t) {
                int now = ++inside;
                int seen = most.load();
                while (now > seen && !most.compare_exchange_weak(seen, now)) {}
                {
                    std::lock_guard<std::mutex> g(mu);
                    ids.insert(std::this_thread::get_id());
                }
                std::this_thread::sleep_for(std::chrono::microseconds(50));
                --inside;
            }, LoopLimits{cap, nullptr, nullptr});
        }
        EXPECT_LE(most.load(), cap) << "cap " << cap;
    }
}

TEST(LoopLimits, PreemptibleLoopCoversEveryIndexOnce) {
    for (int threads : {1, 2, 4}) {
        ThreadPool pool(threads);
        std::atomic<int32_t> request{0}, stopped{0};
        for (int64_t n : {1, 2, 7, 100, 10000}) {
            std::vector<std::atomic<int>> hits(n);
            pool.parallel_for(n, [&](int64_t b, int64_t e) {
                for (int64_t i = b; i < e; ++i) hits[i]++;
            }, LoopLimits{0, &request, &stopped});
            for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
            EXPECT_EQ(stopped.load(), 0);
        }
    }
}

TEST(LoopLimits, PreemptibleLoopStopsOnceRequested) {
    ThreadPool pool(3);
    std::atomic<int32_t> request{0}, stopped{0};
    std::atomic<int64_t> done{0};
    const int64_t n = 100000;
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
        std::this_thread::sleep_for(std::chrono::microseconds(5 * (e - b)));
        if (done.fetch_add(e - b) + (e - b) >= 50) request.store(1);
    }, LoopLimits{0, &request, &stopped});
    EXPECT_EQ(stopped.load(), 1);
    EXPECT_LT(done.load(), n) << "the loop ran to the end";
    // Already requested: nothing runs.
    stopped = 0;
    std::atomic<int> calls{0};
    pool.parallel_for(10, [&](int64_t, int64_t) { ++calls; }, LoopLimits{0, &request, &stopped});
    EXPECT_EQ(calls.load(), 0);
    EXPECT_EQ(stopped.load(), 1);
}

TEST(RunControl, EnvWithoutLimitsIsThePoolsAndStopIsTheLatch) {
    ThreadPool pool(4);
    RunControl plain(&pool, 0);
    kiln_kernel_env e = plain.env(true);
    EXPECT_EQ(e.pool, &pool);
    EXPECT_EQ(e.stop, nullptr);
    EXPECT_EQ(kernel_env_threads(e), 4);

    std::atomic<int32_t> request{0};
    RunControl capped(&pool, 2, &request);
    EXPECT_EQ(kernel_env_threads(capped.env(false)), 2);
    EXPECT_EQ(capped.env(false).stop, nullptr);
    kiln_kernel_env pe = capped.env(true);
    ASSERT_NE(pe.stop, nullptr);
    EXPECT_EQ(*pe.stop, 0);
    request = 1;
    std::atomic<int> calls{0};
    pe.parallel_for(pe.pool, 8, [](int64_t, int64_t, void* c) { ++*static_cast<std::atomic<int>*>(c); }, &calls);
    EXPECT_EQ(calls.load(), 0);
    EXPECT_EQ(*pe.stop, 1);
    EXPECT_TRUE(capped.take_stopped());
    EXPECT_FALSE(capped.take_stopped());
}

}  // namespace
}  // namespace kiln::runtime
