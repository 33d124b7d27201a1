// The inter-op thread pool: a FIFO of tasks under one mutex (tasks are whole kernels, so the
// queue is touched a few times per kernel and contention is low). Idle threads spin, yielding
// their core, for spin_us before sleeping on a condition variable; schedule() signals only when
// someone sleeps. The caller of run_until is one of the pool's threads for its duration.
#include "runtime/inter_op_thread_pool.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>

namespace kiln::runtime {
namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

InterOpThreadPool::InterOpThreadPool(int num_threads, int spin_us) : spin_us_(std::max(0, spin_us)) {
    if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    num_threads_ = num_threads;
    for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

InterOpThreadPool::~InterOpThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
}

void InterOpThreadPool::schedule(std::function<void()> task) {
    bool wake;
    {
        std::lock_guard<std::mutex> lock(mu_);
        queue_.push_back(std::move(task));
        queued_.store(static_cast<int>(queue_.size()), std::memory_order_release);
        wake = sleeping_ > 0;
    }
    if (wake) cv_.notify_one();
}

void InterOpThreadPool::notify() {
    { std::lock_guard<std::mutex> lock(mu_); }  // orders with a waiter between check and wait
    cv_.notify_all();
}

bool InterOpThreadPool::pop_locked(std::function<void()>& task) {
    if (queue_.empty()) return false;
    task = std::move(queue_.front());
    queue_.pop_front();
    queued_.store(static_cast<int>(queue_.size()), std::memory_order_release);
    return true;
}

void InterOpThreadPool::worker_loop() {
    std::function<void()> task;
    for (;;) {
        bool got = false;
        auto spin_end = Clock::now() + std::chrono::microseconds(spin_us_);
        while (!got) {
            if (queued_.load(std::memory_order_acquire) > 0) {
                std::lock_guard<std::mutex> lock(mu_);
                if (stop_) return;
                got = pop_locked(task);
            }
            if (got || Clock::now() >= spin_end) break;
            std::this_thread::yield();
        }
        if (!got) {
            std::unique_lock<std::mutex> lock(mu_);
            ++sleeping_;
            cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
            --sleeping_;
            if (stop_) return;
            if (!pop_locked(task)) continue;
        }
        task();
        task = nullptr;
    }
}

void InterOpThreadPool::run_until(const std::atomic<bool>& done) {
    std::function<void()> task;
    while (!done.load(std::memory_order_acquire)) {
        bool got = false;
        auto spin_end = Clock::now() + std::chrono::microseconds(spin_us_);
        while (!got && !done.load(std::memory_order_acquire)) {
            if (queued_.load(std::memory_order_acquire) > 0) {
                std::lock_guard<std::mutex> lock(mu_);
                got = pop_locked(task);
            }
            if (got || Clock::now() >= spin_end) break;
            std::this_thread::yield();
        }
        if (!got) {
            std::unique_lock<std::mutex> lock(mu_);
            ++sleeping_;
            cv_.wait(lock, [&] { return done.load(std::memory_order_acquire) || !queue_.empty(); });
            --sleeping_;
            got = pop_locked(task);
        }
        if (got) {
            task();
            task = nullptr;
        }
    }
}

InterOpThreadPool* global_inter_op_thread_pool(int num_threads) {
    if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    static std::mutex mu;
    // Leaked on purpose: pools must outlive every session, including static ones at exit.
    static auto* pools = new std::map<int, std::unique_ptr<InterOpThreadPool>>();
    std::lock_guard<std::mutex> lock(mu);
    auto& p = (*pools)[num_threads];
    if (!p) p = std::make_unique<InterOpThreadPool>(num_threads);
    return p.get();
}

}  // namespace kiln::runtime
