// InterOpThreadPool: every task runs once, at most num_threads threads run them (the waiting
// caller included), run_until returns when its flag is set, the global pool is shared.
#include "runtime/inter_op_thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

namespace kiln::runtime {
namespace {

TEST(InterOpThreadPool, RunsEveryTaskOnAtMostItsThreads) {
    for (int threads : {1, 2, 4}) {
        InterOpThreadPool pool(threads);
        EXPECT_EQ(pool.num_threads(), threads);
        const int kTasks = 200;
        std::atomic<int> left{kTasks};
        std::atomic<bool> done{false};
        std::mutex mu;
        std::set<std::thread::id> ids;
        for (int i = 0; i < kTasks; ++i) {
            pool.schedule([&] {
                {
                    std::lock_guard<std::mutex> g(mu);
                    ids.insert(std::this_thread::get_id());
                }
                std::this_thread::sleep_for(std::chrono::microseconds(200));
                if (--left == 0) {
                    done = true;
                    pool.notify();
                }
            });
        }
        pool.run_until(done);
        EXPECT_EQ(left.load(), 0);
        EXPECT_LE(ids.size(), static_cast<size_t>(threads)) << threads;
        if (threads > 1) EXPECT_GE(ids.size(), 2u) << "200 sleeping tasks ran on one thread";
    }
}

TEST(InterOpThreadPool, RunUntilReturnsWhenAnotherThreadSetsTheFlag) {
    InterOpThreadPool pool(2);
    std::atomic<bool> done{false};
    std::thread setter([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        done = true;
        pool.notify();
    });
    pool.run_until(done);
    EXPECT_TRUE(done.load());  // before the join: run_until must not return while done is false
    setter.join();
}

TEST(InterOpThreadPool, GlobalPoolIsSharedPerSize) {
    EXPECT_EQ(global_inter_op_thread_pool(2), global_inter_op_thread_pool(2));
    EXPECT_EQ(global_inter_op_thread_pool(2)->num_threads(), 2);
}

}  // namespace
}  // namespace kiln::runtime
