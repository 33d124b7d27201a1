// The RT/BE core scheduler's policy, with Preemption objects standing in for runs. (Suite names
// start with "serve_" so that `ctest -R serve` selects the serve layer's tests.)
#include <gtest/gtest.h>

#include <future>
#include <thread>
#include <utility>
#include <vector>

#include "serve/core_scheduler.h"

namespace kiln::serve {
namespace {

using namespace std::chrono_literals;

TEST(serve_CoreScheduler, RealTimePreemptsBestEffortWhichResumes) {
    CoreScheduler cs({4, /*be_padding=*/true, /*preemption=*/true});
    std::atomic<int> preempted{0};
    cs.on_preempted = [&](std::chrono::nanoseconds d) { preempted += d.count() >= 0; };
    Preemption be;
    auto g = cs.acquire(Priority::kBestEffort, 0, &be);
    EXPECT_EQ(g.cores, 4);
    auto rt = std::async(std::launch::async, [&] { return cs.acquire(Priority::kRealTime, 2, nullptr); });
    // The RT arrival asks the BE run to stop; it has not got cores yet.
    for (int i = 0; i < 200 && !be.requested(); ++i) std::this_thread::sleep_for(1ms);
    EXPECT_TRUE(be.requested());
    EXPECT_EQ(rt.wait_for(20ms), std::future_status::timeout);
    cs.release(g, /*suspended=*/true);  // the BE run stopped
    auto rg = rt.get();
    EXPECT_EQ(rg.cores, 2);
    // The BE run resumes on the cores RT leaves free (padding), its request cleared.
    auto g2 = cs.acquire(Priority::kBestEffort, 0, &be);
    EXPECT_EQ(g2.cores, 2);
    EXPECT_FALSE(be.requested());
    cs.release(g2, false);
    cs.release(rg, false);
    EXPECT_EQ(cs.preemptions(), 1u);
    EXPECT_EQ(preempted.load(), 1);
}

// on_cores_in_use reports each class's cores held after every grant and release (the server's
// kiln_cores_in_use gauge), including a BE run's cores returning when it is preempted.
TEST(serve_CoreScheduler, ReportsCoresInUsePerClass) {
    CoreScheduler cs({4, /*be_padding=*/true, /*preemption=*/true});
    std::vector<std::pair<Priority, int>> seen;  // written under the scheduler's lock
    cs.on_cores_in_use = [&](Priority p, int cores) { seen.emplace_back(p, cores); };
    Preemption be;
    auto g = cs.acquire(Priority::kBestEffort, 0, &be);
    auto rt = std::async(std::launch::async, [&] { return cs.acquire(Priority::kRealTime, 3, nullptr); });
    for (int i = 0; i < 200 && !be.requested(); ++i) std::this_thread::sleep_for(1ms);
    ASSERT_TRUE(be.requested());
    cs.release(g, /*suspended=*/true);
    auto rg = rt.get();
    auto g2 = cs.acquire(Priority::kBestEffort, 0, &be);  // resumes on the one core RT leaves
    cs.release(rg, false);
    cs.release(g2, false);
    const std::vector<std::pair<Priority, int>> expected = {
        {Priority::kBestEffort, 4}, {Priority::kBestEffort, 0}, {Priority::kRealTime, 3},
        {Priority::kBestEffort, 1}, {Priority::kRealTime, 0},   {Priority::kBestEffort, 0}};
    EXPECT_EQ(seen, expected);
}

// An RT request claims its cores when it is queued, before its worker thread acquires: the
// running BE run is asked to stop at once, and its resume is not given the claimed cores; the
// RT run's acquire takes the claim over and finds them free.
TEST(serve_CoreScheduler, ClaimedCoresStopBestEffortBeforeTheRealTimeRunAcquires) {
    CoreScheduler cs({4, /*be_padding=*/true, /*preemption=*/true});
    Preemption be;
    auto g = cs.acquire(Priority::kBestEffort, 0, &be);
    ASSERT_EQ(g.cores, 4);
    cs.claim_for_real_time(3);
    EXPECT_TRUE(be.requested());  // asked under the claim's call, no RT thread involved
    EXPECT_EQ(cs.claimed_for_real_time(), 3);
    cs.release(g, /*suspended=*/true);
    // The BE run resumes on the one core the claim leaves.
    auto g2 = cs.acquire(Priority::kBestEffort, 0, &be);
    EXPECT_EQ(g2.cores, 1);
    // The RT run takes its claimed cores without waiting for anyone.
    auto rg = cs.acquire(Priority::kRealTime, 3, nullptr, /*claimed=*/true);
    EXPECT_EQ(rg.cores, 3);
    EXPECT_EQ(cs.claimed_for_real_time(), 0);
    cs.release(rg, false);
    cs.release(g2, false);
    EXPECT_EQ(cs.preemptions(), 1u);
}

// A claim blocks every BE grant it covers until it is taken over or dropped; dropping it lets
// the waiting BE run start.
TEST(serve_CoreScheduler, UnclaimedCoresGoBackToBestEffort) {
    CoreScheduler cs({2, /*be_padding=*/true, /*preemption=*/true});
    cs.claim_for_real_time(0);  // all cores
    EXPECT_EQ(cs.claimed_for_real_time(), 2);
    Preemption be;
    auto pending = std::async(std::launch::async, [&] { return cs.acquire(Priority::kBestEffort, 0, &be); });
    EXPECT_EQ(pending.wait_for(30ms), std::future_status::timeout);
    cs.unclaim_for_real_time(0);
    EXPECT_EQ(pending.get().cores, 2);
    EXPECT_EQ(cs.claimed_for_real_time(), 0);
}

TEST(serve_CoreScheduler, WithoutPaddingBestEffortWaitsForRealTime) {
    CoreScheduler cs({4, /*be_padding=*/false, /*preemption=*/true});
    auto rg = cs.acquire(Priority::kRealTime, 1, nullptr);
    Preemption be;
    auto pending = std::async(std::launch::async, [&] { return cs.acquire(Priority::kBestEffort, 0, &be); });
    EXPECT_EQ(pending.wait_for(30ms), std::future_status::timeout);
    cs.release(rg, false);
    EXPECT_EQ(pending.get().cores, 4);
}

TEST(serve_CoreScheduler, WithoutPreemptionRealTimeWaitsButGoesFirst) {
    CoreScheduler cs({2, true, /*preemption=*/false});
    Preemption be1, be2;
    auto g = cs.acquire(Priority::kBestEffort, 0, &be1);
    auto be_wait = std::async(std::launch::async, [&] { return cs.acquire(Priority::kBestEffort, 0, &be2); });
    std::this_thread::sleep_for(10ms);
    auto rt_wait = std::async(std::launch::async, [&] { return cs.acquire(Priority::kRealTime, 0, nullptr); });
    std::this_thread::sleep_for(10ms);
    EXPECT_FALSE(be1.requested());
    cs.release(g, false);
    auto rg = rt_wait.get();  // RT is served before the BE run that waited longer
    EXPECT_EQ(be_wait.wait_for(10ms), std::future_status::timeout);
    cs.release(rg, false);
    cs.release(be_wait.get(), false);
}

}  // namespace
}  // namespace kiln::serve
