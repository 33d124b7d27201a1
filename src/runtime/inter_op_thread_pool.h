// The inter-op thread pool: runs whole kernels (dataflow executor nodes) as tasks. The thread
// that waits for a run takes tasks too (run_until), so a pool of N threads has N-1 workers and
// a run uses at most N threads of it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::runtime {

class InterOpThreadPool {
public:
    /// num_threads counts the thread calling run_until (0 = cores); spin_us: how long an idle
    /// worker spins (yielding) before it sleeps.
    explicit InterOpThreadPool(int num_threads = 0, int spin_us = 50);
    ~InterOpThreadPool();
    InterOpThreadPool(const InterOpThreadPool&) = delete;
    InterOpThreadPool& operator=(const InterOpThreadPool&) = delete;

    int num_threads() const { return num_threads_; }

    /// Queues a task (FIFO). Tasks must not throw.
    void schedule(std::function<void()> task);
    /// Runs queued tasks on the calling thread until `done` is true. Whoever sets `done` must
    /// call notify() afterwards.
    void run_until(const std::atomic<bool>& done);
    /// Wakes the threads sleeping in run_until so they re-check their `done`.
    void notify();

private:
    bool pop_locked(std::function<void()>& task);
    void worker_loop();

    int num_threads_;
    int spin_us_;
    std::vector<std::thread> workers_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> queue_;  // guarded by mu_
    std::atomic<int> queued_{0};               // queue_.size(), read while spinning
    int sleeping_ = 0;                         // threads waiting on cv_, guarded by mu_
    bool stop_ = false;
};

/// A process-wide inter-op pool of `num_threads` threads (0 = cores), shared by every session
/// that asks for that size (SessionOptions::use_global_thread_pools).
InterOpThreadPool* global_inter_op_thread_pool(int num_threads);

}  // namespace kiln::runtime
