// move_off_cpu (runtime/cpu_placement.h): a pool helper found on its caller's CPU moves off it,
// keeps every other CPU it was allowed at start, and stays put when it is elsewhere.
#include <gtest/gtest.h>

#include <thread>

#include "runtime/cpu_placement.h"

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

namespace kiln::runtime {
namespace {

#if defined(__linux__)
TEST(CpuPlacement, AHelperOnItsCallersCpuMovesOffItAndKeepsTheOthers) {
    cpu_set_t start;
    ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(start), &start), 0);
    if (CPU_COUNT(&start) < 2) GTEST_SKIP() << "one CPU allowed";
    int c0 = 0;
    while (!CPU_ISSET(c0, &start)) ++c0;
    std::thread t([&] {
        // The first call records the CPUs this thread may use (all of `start`): asked about a CPU
        // it does not run on, it stays. Then pinned to c0 and asked about c0, it moves.
        const int elsewhere = current_cpu() == c0 ? (c0 + 1 < CPU_SETSIZE ? c0 + 1 : 0) : c0;
        EXPECT_FALSE(move_off_cpu(elsewhere == current_cpu() ? -1 : elsewhere));
        cpu_set_t only;
        CPU_ZERO(&only);
        CPU_SET(c0, &only);
        ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(only), &only), 0);
        ASSERT_EQ(current_cpu(), c0);
        EXPECT_TRUE(move_off_cpu(c0));
        EXPECT_NE(current_cpu(), c0);
        cpu_set_t now;
        ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(now), &now), 0);
        EXPECT_FALSE(CPU_ISSET(c0, &now));
        EXPECT_EQ(CPU_COUNT(&now), CPU_COUNT(&start) - 1) << "every other CPU it was allowed at start";
        EXPECT_FALSE(move_off_cpu(c0)) << "already elsewhere";
        const int here = current_cpu();
        EXPECT_TRUE(move_off_cpu(here)) << "a later caller on its new CPU moves it again";
        EXPECT_NE(current_cpu(), here);
        EXPECT_FALSE(move_off_cpu(-1));
    });
    t.join();
}
#endif

}  // namespace
}  // namespace kiln::runtime
