// RunControl: what one run's kernel calls may use of the intra-op pool — at most max_threads
// threads (RunOptions::max_threads), and, for a preemptible run, parallel loops that stop
// handing out chunks once the run's Preemption is requested (RunOptions::preempt).
//
// A kernel call gets a kiln_kernel_env whose `pool` is this object: its parallel_for applies the
// limits. A preemptible call's env->stop is the run's `stopped` latch, set by a loop that left
// iterations undone; the generated kernel reads it after each parallel loop and returns
// KILN_KERNEL_STOPPED. The executor reads the latch after every step (take_stopped): a step
// whose loop stopped is cut short whatever it returned (an extern kernel, or a kernel built
// before env->stop existed, may return 0 after a cut loop) and runs again from its start.
#pragma once

#include <atomic>
#include <cstdint>

#include "runtime/kernel_abi.h"
#include "runtime/thread_pool.h"

namespace kiln::runtime {

class RunControl {
public:
    /// pool: the intra-op pool (nullptr: serial loops). max_threads: 0 = the pool's.
    /// request: the preemption flag (nullptr: not preemptible).
    RunControl(ThreadPool* pool, int max_threads, const std::atomic<int32_t>* request = nullptr);
    RunControl(const RunControl&) = delete;
    RunControl& operator=(const RunControl&) = delete;

    /// The env of a kernel call; `preemptible` false (an in-place step, which must not be cut
    /// mid-kernel) gives env->stop == NULL. Without limits this is exactly the pool's env.
    kiln_kernel_env env(bool preemptible);
    /// The threads a kernel call may use (the capped count; extern kernels plan parts by it).
    int threads() const { return threads_; }
    bool requested() const { return request_ && request_->load(std::memory_order_acquire) != 0; }
    /// Whether a preemptible loop left iterations undone since the last call; clears the latch.
    bool take_stopped() { return stopped_.exchange(0, std::memory_order_acq_rel) != 0; }

private:
    struct Bound {
        ThreadPool* pool;
        LoopLimits limits;
        int threads;
    };
    static void c_parallel_for(void* bound, int64_t n, kiln_task_fn fn, void* ctx);
    friend int kernel_env_threads(const kiln_kernel_env& env);

    ThreadPool* pool_;
    int threads_;
    const std::atomic<int32_t>* request_;
    std::atomic<int32_t> stopped_{0};
    Bound plain_, preemptible_;
};

/// The number of threads a kernel call with `env` may use: the pool's, the RunControl's cap,
/// or 1 (a serial env).
int kernel_env_threads(const kiln_kernel_env& env);

}  // namespace kiln::runtime
