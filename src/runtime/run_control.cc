// RunControl (run_control.h): the per-run view of the intra-op pool that kernels call through.
#include "runtime/run_control.h"

#include <algorithm>

#include "runtime/buffer_table.h"

namespace kiln::runtime {

RunControl::RunControl(ThreadPool* pool, int max_threads, const std::atomic<int32_t>* request)
    : pool_(pool), request_(request) {
    const int all = pool ? pool->num_threads() : 1;
    threads_ = max_threads > 0 ? std::min(max_threads, all) : all;
    plain_ = {pool, LoopLimits{threads_, nullptr, nullptr}, threads_};
    preemptible_ = {pool, LoopLimits{threads_, request, &stopped_}, threads_};
}

kiln_kernel_env RunControl::env(bool preemptible) {
    const bool limited = pool_ && threads_ < pool_->num_threads();
    if (!(preemptible && request_) && !limited) return make_kernel_env(pool_);  // today's env, unchanged
    kiln_kernel_env e{};
    e.pool = preemptible && request_ ? &preemptible_ : &plain_;
    e.parallel_for = &RunControl::c_parallel_for;
    // The latch, read by generated kernels as a volatile int32 (std::atomic<int32_t> is a plain,
    // lock-free int32 in memory).
    static_assert(sizeof(std::atomic<int32_t>) == sizeof(int32_t) && std::atomic<int32_t>::is_always_lock_free);
    e.stop = preemptible && request_ ? reinterpret_cast<const volatile int32_t*>(&stopped_) : nullptr;
    return e;
}

void RunControl::c_parallel_for(void* bound, int64_t n, kiln_task_fn fn, void* ctx) {
    auto* b = static_cast<Bound*>(bound);
    const bool preemptible = b->limits.request != nullptr;
    if (!b->pool) {  // serial: one chunk, unless preemptible (then the request is checked first)
        if (n <= 0) return;
        if (preemptible && b->limits.request->load(std::memory_order_relaxed) != 0) {
            b->limits.stopped->store(1, std::memory_order_relaxed);
            return;
        }
        fn(0, n, ctx);
        return;
    }
    b->pool->parallel_for(n, [fn, ctx](int64_t lo, int64_t hi) { fn(lo, hi, ctx); }, b->limits);
}

int kernel_env_threads(const kiln_kernel_env& env) {
    if (env.parallel_for == &ThreadPool::c_parallel_for && env.pool)
        return static_cast<ThreadPool*>(env.pool)->num_threads();
    if (env.parallel_for == &RunControl::c_parallel_for && env.pool)
        return static_cast<const RunControl::Bound*>(env.pool)->threads;
    return 1;
}

}  // namespace kiln::runtime
