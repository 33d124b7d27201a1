// The intra-op thread pool. Generated kernels reach it through kiln_kernel_env::parallel_for,
// so the number of threads a model uses is exactly what the user configured.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/kernel_abi.h"

namespace kiln::runtime {

class ThreadPool {
public:
    /// num_threads counts the calling thread: 1 means no worker threads. 0 = hardware concurrency.
    explicit ThreadPool(int num_threads = 0);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int num_threads() const { return num_threads_; }

    /// Runs fn(begin, end) over [0, n) in at most num_threads() contiguous chunks; the calling
    /// thread takes part. Blocks until all chunks are done. Nested calls run serially.
    void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

    /// The env to pass to generated kernels.
    kiln_kernel_env kernel_env();

private:
    static void c_parallel_for(void* pool, int64_t n, kiln_task_fn fn, void* ctx);
    void worker_loop(int index);

    int num_threads_;
    std::vector<std::thread> workers_;
    std::mutex mu_;
    std::condition_variable work_cv_, done_cv_;
    // The current job (one at a time).
    const std::function<void(int64_t, int64_t)>* job_ = nullptr;
    int64_t job_n_ = 0;
    int job_chunks_ = 0;
    int next_chunk_ = 0;
    int chunks_done_ = 0;
    uint64_t generation_ = 0;
    bool stop_ = false;
    std::mutex submit_mu_;  // serializes concurrent parallel_for callers
};

}  // namespace kiln::runtime
