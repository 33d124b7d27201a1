// The intra-op thread pool, shared by concurrent callers.
//
// A parallel_for is a Job on the caller's stack: [0, n) cut into min(n, num_threads) contiguous
// chunks of near-equal size, claimed by index with an atomic counter. The caller publishes the
// job in `active_`, claims chunks itself, then withdraws the job (no new helpers) and waits for
// the helpers already inside it (a per-job reference count) before returning. Idle workers scan
// `active_` for a job with unclaimed chunks; with several callers (inter-op threads running
// different kernels) each caller always progresses on its own loop and workers spread over
// the jobs, so the process runs at most (callers + workers) threads — never more than the
// pools were given. Idle workers spin (yielding) for spin_us before sleeping on a condition
// variable, so back-to-back kernels of a sequential run find them awake; they take mu_ (with
// try_lock) only while some job has unclaimed chunks (open_jobs_, decremented by whoever claims
// a job's last chunk), and a caller wakes at most as many sleepers as its loop has chunks for
// helpers; bench/executor_wakeup.cc
// measures the wake-up latency. A thread-local flag makes a nested parallel_for (from inside a
// chunk) run inline and serially. Chunks never depend on which thread runs them, so results
// are independent of scheduling.
//
// A loop with LoopLimits (one run's view, runtime/run_control.h) admits at most max_threads - 1
// helpers (checked when a worker joins, under mu_) and is cut for that many threads. A
// preemptible loop instead hands out iterations dynamically in chunks sized to run about
// kPreemptChunkNs, and stops handing them out once its request flag is set (run_dynamic);
// non-preemptible loops keep the static chunks above and their speed.
#include "runtime/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <exception>
#include <map>
#include <memory>

#include "runtime/cpu_placement.h"

namespace kiln::runtime {

using Clock = std::chrono::steady_clock;

struct ThreadPool::Job {
    const std::function<void(int64_t, int64_t)>* fn = nullptr;
    int64_t n = 0;
    int chunks = 0;                    // static chunking: [0, n) in `chunks` near-equal pieces
    int max_helpers = INT_MAX;         // workers allowed inside at once (LoopLimits::max_threads - 1)
    const std::atomic<int32_t>* request = nullptr;  // set: preemptible, chunked dynamically
    std::atomic<int32_t>* stopped = nullptr;
    std::atomic<int> next{0};          // next chunk to claim (static)
    std::atomic<int64_t> next_iter{0}; // next iteration to claim (dynamic)
    std::atomic<int> refs{0};  // helpers inside the job
    std::atomic<int>* open = nullptr;  // the pool's count of jobs with unclaimed chunks
    int caller_cpu = -1;               // where the caller published it (cpu_placement.h)
    std::mutex mu;             // guards error, and the final wake-up of the caller
    std::condition_variable cv;
    std::exception_ptr error;

    bool has_work() const {
        if (request)
            return next_iter.load(std::memory_order_relaxed) < n && request->load(std::memory_order_relaxed) == 0;
        return next.load(std::memory_order_relaxed) < chunks;
    }
    void run(int64_t b, int64_t e) {
        try {
            (*fn)(b, e);
        } catch (...) {
            std::lock_guard<std::mutex> g(mu);
            if (!error) error = std::current_exception();
        }
    }
};

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

/// A preemptible loop: each thread claims `grain` iterations at a time, starting with one and
/// resizing each chunk from the last one's speed to take about kPreemptChunkNs (growing at most
/// 4x a chunk, so one fast outlier does not make a huge chunk). Before each claim it checks the
/// request; when set it stops, and latches `stopped` if iterations were left unclaimed.
void run_dynamic(ThreadPool::Job& job) {
    int64_t grain = 1;
    for (;;) {
        if (job.request->load(std::memory_order_relaxed) != 0) {
            if (job.next_iter.load(std::memory_order_relaxed) < job.n) job.stopped->store(1, std::memory_order_relaxed);
            return;
        }
        const int64_t b = job.next_iter.fetch_add(grain, std::memory_order_relaxed);
        if (b >= job.n) return;
        const int64_t e = std::min(job.n, b + grain);
        const auto t0 = Clock::now();
        job.run(b, e);
        const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
        const int64_t want = ns > 0 ? kPreemptChunkNs * (e - b) / ns : grain * 4;
        grain = std::clamp<int64_t>(want, 1, grain * 4);
    }
}

/// Claims and runs chunks of `job` until none are left (or, preemptible, until stopped).
void run_chunks(ThreadPool::Job& job) {
    RegionGuard guard;
    if (job.request) {
        run_dynamic(job);
        return;
    }
    for (int c; (c = job.next.fetch_add(1, std::memory_order_relaxed)) < job.chunks;) {
        if (c == job.chunks - 1 && job.open) job.open->fetch_sub(1, std::memory_order_relaxed);  // the last chunk claimed
        int64_t b, e;
        chunk_range(job.n, job.chunks, c, &b, &e);
        job.run(b, e);
    }
}

}  // namespace

ThreadPool::ThreadPool(int num_threads, int spin_us) : spin_us_(std::max(0, spin_us)) {
    if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    num_threads_ = num_threads;
    workers_.reserve(num_threads_ - 1);
    for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    work_cv_.notify_all();
    for (auto& w : workers_) w.join();
}

ThreadPool::Job* ThreadPool::claimable_locked() {
    for (Job* j : active_) {
        // refs only grows here, under mu_, so the cap on helpers holds.
        if (j->refs.load(std::memory_order_relaxed) < j->max_helpers && j->has_work()) {
            j->refs.fetch_add(1, std::memory_order_relaxed);
            return j;
        }
    }
    return nullptr;
}

void ThreadPool::worker_loop() {
    for (;;) {
        Job* job = nullptr;
        bool alone = false;  // the only caller in the pool (not inter-op threads sharing it)
        // Spin (yielding the core) for a while before sleeping.
        auto spin_end = Clock::now() + std::chrono::microseconds(spin_us_);
        for (;;) {
            // Only while some job has unclaimed chunks: idle workers polling mu_ while the
            // callers finish their last chunks slowed every loop, more so with more threads.
            // try_lock: a spinning worker that finds mu_ taken (others joining) spins on rather
            // than sleeping in the kernel and waking microseconds later.
            if (open_jobs_.load(std::memory_order_acquire) > 0) {
                std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
                if (lock.owns_lock()) {
                    if (stop_) return;
                    job = claimable_locked();
                    alone = active_.size() == 1;
                    if (job) break;
                }
            }
            if (Clock::now() >= spin_end) break;
            std::this_thread::yield();
        }
        if (!job) {
            std::unique_lock<std::mutex> lock(mu_);
            ++sleeping_;
            work_cv_.wait(lock, [&] { return stop_ || (job = claimable_locked()) != nullptr; });
            --sleeping_;
            if (stop_ && !job) return;
            alone = active_.size() == 1;
        }
        // Woken on its caller's CPU, the two would share it. Only for a lone caller: with
        // several (the dataflow executor's inter-op threads) some caller sits on every CPU.
        if (alone) move_off_cpu(job->caller_cpu);
        run_chunks(*job);
        {
            // Drop the reference under the job's mutex: the caller takes it before returning, so
            // the job outlives this block.
            std::lock_guard<std::mutex> g(job->mu);
            if (job->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) job->cv.notify_all();
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
    Job job;
    job.fn = &fn;
    job.n = n;
    job.chunks = static_cast<int>(std::min<int64_t>(n, num_threads_));
    run_job(job);
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, const LoopLimits& limits) {
    if (n <= 0) return;
    const int threads = limits.max_threads > 0 ? std::min(limits.max_threads, num_threads_) : num_threads_;
    const bool preemptible = limits.request && limits.stopped;
    // Nested loops run inline; a preemptible outer loop checks the request between its chunks.
    if (t_in_parallel_region || (!preemptible && (threads == 1 || n == 1))) {
        RegionGuard guard;
        fn(0, n);
        return;
    }
    Job job;
    job.fn = &fn;
    job.n = n;
    job.max_helpers = threads - 1;
    if (preemptible) {
        job.request = limits.request;
        job.stopped = limits.stopped;
    } else {
        job.chunks = static_cast<int>(std::min<int64_t>(n, threads));
    }
    if (threads == 1 || n == 1) {  // preemptible, alone: dynamic chunks on this thread
        run_chunks(job);
        if (job.error) std::rethrow_exception(job.error);
        return;
    }
    run_job(job);
}

void ThreadPool::run_job(Job& job) {
    int sleeping;
    job.open = &open_jobs_;
    job.caller_cpu = current_cpu();
    {
        std::lock_guard<std::mutex> lock(mu_);
        active_.push_back(&job);
        open_jobs_.fetch_add(1, std::memory_order_release);
        sleeping = sleeping_;
    }
    // Wake only as many sleepers as the loop has chunks for its helpers (a 4-chunk loop on 16
    // threads wakes 3, not 15); a dynamically chunked loop may use them all.
    if (job.request) {
        if (sleeping > 0) work_cv_.notify_all();
    } else {
        for (int i = 0; i < std::min(sleeping, job.chunks - 1); ++i) work_cv_.notify_one();
    }
    run_chunks(job);
    {
        std::lock_guard<std::mutex> lock(mu_);
        active_.erase(std::find(active_.begin(), active_.end(), &job));
        if (job.request) open_jobs_.fetch_sub(1, std::memory_order_relaxed);  // static jobs: at their last claim
    }
    // Helpers still inside finish their last chunk: spin briefly, then sleep.
    auto spin_end = Clock::now() + std::chrono::microseconds(spin_us_);
    while (job.refs.load(std::memory_order_acquire) != 0 && Clock::now() < spin_end) std::this_thread::yield();
    {
        std::unique_lock<std::mutex> g(job.mu);
        job.cv.wait(g, [&] { return job.refs.load(std::memory_order_acquire) == 0; });
    }
    if (job.error) std::rethrow_exception(job.error);
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
    kiln_kernel_env env{};
    env.pool = this;
    env.parallel_for = &ThreadPool::c_parallel_for;
    return env;
}

ThreadPool* global_thread_pool(int num_threads) {
    if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    static std::mutex mu;
    // Leaked on purpose: pools must outlive every session, including static ones at exit.
    static auto* pools = new std::map<int, std::unique_ptr<ThreadPool>>();
    std::lock_guard<std::mutex> lock(mu);
    auto& p = (*pools)[num_threads];
    if (!p) p = std::make_unique<ThreadPool>(num_threads);
    return p.get();
}

}  // namespace kiln::runtime
