// The intra-op thread pool.
//
// One job at a time (concurrent callers serialize on submit_mu_). A job over [0, n) is cut into
// min(n, num_threads) contiguous chunks of near-equal size; workers and the calling thread claim
// chunks by index under mu_ until none are left, and the caller waits until every chunk is
// done. A thread-local flag marks threads running inside a job, so a nested parallel_for (a
// kernel's parallel loop called from within another parallel region) runs inline and serially
// instead of deadlocking on submit_mu_.
#include "runtime/thread_pool.h"

#include <algorithm>
#include <exception>

namespace kiln::runtime {
namespace {

thread_local bool t_in_parallel_region = false;

/// Marks the current thread as inside a parallel region for its lifetime.
class RegionGuard {
public:
    RegionGuard() : prev_(t_in_parallel_region) { t_in_parallel_region = true; }
    ~RegionGuard() { t_in_parallel_region = prev_; }

private:
    bool prev_;
};

/// [begin, end) of chunk c when n is cut into `chunks` near-equal contiguous pieces.
inline void chunk_range(int64_t n, int chunks, int c, int64_t* begin, int64_t* end) {
    int64_t base = n / chunks, rem = n % chunks;
    *begin = c * base + std::min<int64_t>(c, rem);
    *end = *begin + base + (c < rem ? 1 : 0);
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
    if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    num_threads_ = num_threads;
    workers_.reserve(num_threads_ - 1);
    for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    work_cv_.notify_all();
    for (auto& w : workers_) w.join();
}

void ThreadPool::worker_loop(int /*index*/) {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        work_cv_.wait(lock, [&] { return stop_ || (generation_ != seen && next_chunk_ < job_chunks_); });
        if (stop_) return;
        seen = generation_;
        while (next_chunk_ < job_chunks_) {
            int c = next_chunk_++;
            const auto* fn = job_;
            int64_t n = job_n_;
            int chunks = job_chunks_;
            lock.unlock();
            int64_t b, e;
            chunk_range(n, chunks, c, &b, &e);
            {
                RegionGuard guard;
                (*fn)(b, e);
            }
            lock.lock();
            if (++chunks_done_ == job_chunks_) done_cv_.notify_all();
        }
    }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
    if (n <= 0) return;
    if (num_threads_ == 1 || n == 1 || t_in_parallel_region) {
        RegionGuard guard;
        fn(0, n);
        return;
    }
    std::lock_guard<std::mutex> submit(submit_mu_);
    int chunks = static_cast<int>(std::min<int64_t>(n, num_threads_));
    // An exception thrown by a chunk is kept and rethrown on the calling thread once every
    // chunk has finished (workers must never unwind through worker_loop).
    std::mutex error_mu;
    std::exception_ptr error;
    const std::function<void(int64_t, int64_t)> guarded = [&](int64_t b, int64_t e) {
        try {
            fn(b, e);
        } catch (...) {
            std::lock_guard<std::mutex> g(error_mu);
            if (!error) error = std::current_exception();
        }
    };
    {
        std::lock_guard<std::mutex> lock(mu_);
        job_ = &guarded;
        job_n_ = n;
        job_chunks_ = chunks;
        next_chunk_ = 0;
        chunks_done_ = 0;
        ++generation_;
    }
    work_cv_.notify_all();
    // The calling thread claims chunks too.
    std::unique_lock<std::mutex> lock(mu_);
    while (next_chunk_ < job_chunks_) {
        int c = next_chunk_++;
        lock.unlock();
        int64_t b, e;
        chunk_range(n, chunks, c, &b, &e);
        {
            RegionGuard guard;
            guarded(b, e);
        }
        lock.lock();
        ++chunks_done_;
    }
    done_cv_.wait(lock, [&] { return chunks_done_ == job_chunks_; });
    job_ = nullptr;
    job_chunks_ = 0;
    lock.unlock();
    if (error) std::rethrow_exception(error);
}

void ThreadPool::c_parallel_for(void* pool, int64_t n, kiln_task_fn fn, void* ctx) {
    auto* self = static_cast<ThreadPool*>(pool);
    if (self == nullptr) {
        if (n > 0) fn(0, n, ctx);
        return;
    }
    self->parallel_for(n, [fn, ctx](int64_t b, int64_t e) { fn(b, e, ctx); });
}

kiln_kernel_env ThreadPool::kernel_env() {
    kiln_kernel_env env;
    env.pool = this;
    env.parallel_for = &ThreadPool::c_parallel_for;
    return env;
}

}  // namespace kiln::runtime
