// Wake-up latency of Kiln's thread pools: the time from a caller handing out work to a pool
// worker starting it, for a sleeping pool (idle longer than its spin time) and a spinning one
// (work arrives back to back). Built and run by bench/executor_bench.py --wakeup.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "runtime/inter_op_thread_pool.h"
#include "runtime/thread_pool.h"

using Clock = std::chrono::steady_clock;
using kiln::runtime::InterOpThreadPool;
using kiln::runtime::ThreadPool;

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

/// µs from parallel_for's call to the worker's chunk starting (2 chunks: caller + 1 worker).
double intra_latency_us(int spin_us, int idle_us, int reps) {
    ThreadPool pool(2, spin_us);
    std::vector<double> lat;
    std::thread::id caller = std::this_thread::get_id();
    for (int r = 0; r < reps; ++r) {
        if (idle_us) std::this_thread::sleep_for(std::chrono::microseconds(idle_us));
        std::atomic<int64_t> started{0};
        auto t0 = Clock::now();
        pool.parallel_for(2, [&](int64_t, int64_t) {
            if (std::this_thread::get_id() != caller)
                started = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
            else
                while (started.load() == 0 && Clock::now() - t0 < std::chrono::milliseconds(5)) {}
        });
        if (started.load() > 0) lat.push_back(started.load() / 1e3);
    }
    return lat.empty() ? -1 : median(lat);
}

/// µs from schedule() to the task starting on a worker of a 2-thread inter-op pool.
double inter_latency_us(int spin_us, int idle_us, int reps) {
    InterOpThreadPool pool(2, spin_us);
    std::vector<double> lat;
    for (int r = 0; r < reps; ++r) {
        if (idle_us) std::this_thread::sleep_for(std::chrono::microseconds(idle_us));
        std::atomic<int64_t> started{0};
        auto t0 = Clock::now();
        pool.schedule([&] { started = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count(); });
        while (started.load() == 0) std::this_thread::yield();
        lat.push_back(started.load() / 1e3);
    }
    return median(lat);
}

int main() {
    const int reps = 2000;
    std::printf("| pool | state | median wake-up µs |\n|---|---|---|\n");
    std::printf("| intra-op | spinning (work back to back) | %.2f |\n", intra_latency_us(50, 0, reps));
    std::printf("| intra-op | sleeping (idle 1 ms, spin 50 µs) | %.2f |\n", intra_latency_us(50, 1000, reps / 4));
    std::printf("| intra-op | no spinning (spin 0) | %.2f |\n", intra_latency_us(0, 0, reps));
    std::printf("| inter-op | spinning (work back to back) | %.2f |\n", inter_latency_us(50, 0, reps));
    std::printf("| inter-op | sleeping (idle 1 ms, spin 50 µs) | %.2f |\n", inter_latency_us(50, 1000, reps / 4));
    std::printf("| inter-op | no spinning (spin 0) | %.2f |\n", inter_latency_us(0, 0, reps));
    return 0;
}
