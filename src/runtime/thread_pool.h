// The intra-op thread pool. Generated kernels reach it through kiln_kernel_env::parallel_for,
// so the number of threads a model uses is exactly what the user configured. Several threads
// (the dataflow executor's inter-op threads) may call parallel_for at the same time: each caller
// works on its own loop and idle workers help, so the pool never starts more threads than it
// was given.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/kernel_abi.h"

namespace kiln::runtime {

/// Per-call limits of a parallel loop: a thread cap (RunOptions::max_threads) and preemption.
struct LoopLimits {
    /// At most this many threads work on the loop, the caller's included (0 = the pool's).
    int max_threads = 0;
    /// A preemption request (nullptr: not preemptible). A preemptible loop is cut into short
    /// chunks claimed dynamically (sized to about kPreemptChunkNs each) and stops handing them
    /// out once *request != 0; it then sets *stopped (the latch a kernel reads as env->stop).
    const std::atomic<int32_t>* request = nullptr;
    std::atomic<int32_t>* stopped = nullptr;
};

/// The running time a preemptible loop aims for per chunk: a stop request waits at most about
/// this long inside a parallel loop (more when one iteration takes longer).
constexpr int64_t kPreemptChunkNs = 20000;

class ThreadPool {
public:
    /// num_threads counts the calling thread: 1 means no worker threads. 0 = hardware concurrency.
    /// spin_us: how long an idle worker (or a caller waiting for helpers) spins before sleeping.
    explicit ThreadPool(int num_threads = 0, int spin_us = 50);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int num_threads() const { return num_threads_; }

    /// Runs fn(begin, end) over [0, n) in at most num_threads() contiguous chunks; the calling
    /// thread takes part and idle workers help. Blocks until all chunks are done. Safe to call
    /// from several threads at once; nested calls (from inside a chunk) run serially inline.
    void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);
    /// As above, within `limits`: at most limits.max_threads threads (chunks as for a pool of
    /// that many); a preemptible loop is chunked dynamically and may stop early (*stopped set).
    void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, const LoopLimits& limits);

    /// The env to pass to generated kernels.
    kiln_kernel_env kernel_env();

    struct Job;

    /// The parallel_for of kernel_env() (env.pool is the ThreadPool).
    static void c_parallel_for(void* pool, int64_t n, kiln_task_fn fn, void* ctx);

private:
    void worker_loop();
    /// Publishes `job` to the workers, works on it, and waits for the helpers inside it.
    void run_job(Job& job);
    /// A job with unclaimed chunks (and a reference on it), or nullptr. Caller holds mu_.
    Job* claimable_locked();

    int num_threads_;
    int spin_us_;
    std::vector<std::thread> workers_;
    std::mutex mu_;
    std::condition_variable work_cv_;
    std::vector<Job*> active_;             // jobs accepting helpers, guarded by mu_
    std::atomic<int> open_jobs_{0};        // jobs in active_ that may have unclaimed chunks, read while spinning
    int sleeping_ = 0;                     // workers waiting on work_cv_, guarded by mu_
    bool stop_ = false;
};

/// A process-wide pool of `num_threads` threads (0 = cores), created on first use and shared
/// by every session that asks for that size (SessionOptions::use_global_thread_pools).
ThreadPool* global_thread_pool(int num_threads);

}  // namespace kiln::runtime
