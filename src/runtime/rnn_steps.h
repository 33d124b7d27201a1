// The step loop of the fused recurrent kernel (rnn_kernel.h) when a step is split into parts:
// items (s, p), s < steps, p < parts, where every part of step s runs after every part of step
// s - 1 has finished (the new state of step s - 1 is the input of each part of step s).
//
// Why not one parallel_for per step: at batch 1 a step of a 256-unit LSTM is about 5 us per
// thread, and a pool fork-join (waking the workers, joining them) cost as much, so two threads
// were hardly faster than one. Here the pool is entered once for the whole loop: each task runs
// work(), which claims items (an atomic per part) and waits for a step's end by spinning on one
// counter. Part p belongs to the p-th task that arrives; a task takes another's part only when
// that one has not arrived (a pool that runs the tasks one after the other, or a descheduled
// thread on a loaded machine), has lost its last item to a stealer, or is late by kPatience. So
// no task ever waits for one that is not running, and one task alone runs every item in order.
#pragma once

#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

namespace kiln::runtime::rnn {

class StepLoop {
public:
    StepLoop(int64_t steps, int64_t parts)
        : steps_(steps), parts_(parts), slots_(new Slot[parts]) {
        for (int64_t p = 0; p < parts; ++p) slots_[p].by.store(p);
    }
    /// The body of one pool task: runs fn(s, p) on items until every one is claimed, the run is
    /// asked to stop (*stop non-zero) or an item threw (rethrown; the other tasks return).
    template <typename F>
    void work(F&& fn, const volatile int32_t* stop) {
        const int64_t me = present_.fetch_add(1, std::memory_order_acq_rel);
        const int64_t own = me % parts_;
        using Clock = std::chrono::steady_clock;
        Clock::time_point idle_since{};
        bool idle = false;
        for (;;) {
            if (quit_.load(std::memory_order_relaxed)) return;
            if (stop && *stop) {
                quit_.store(true);
                stopped_.store(true);
                return;
            }
            const int64_t arrived = present_.load(std::memory_order_acquire);
            const bool patient = !idle || Clock::now() - idle_since < kPatience;
            bool left = false, ran = false;
            for (int64_t i = 0; i < parts_ && !ran; ++i) {
                const int64_t q = (own + i) % parts_;
                int64_t s = slots_[q].claimed.load(std::memory_order_acquire);
                if (s >= steps_) continue;
                left = true;
                if (finished_.load(std::memory_order_acquire) < s * parts_) continue;  // step s - 1 runs
                const bool owner_here = q < arrived && slots_[q].by.load(std::memory_order_relaxed) == q;
                if (q != own && owner_here && patient) continue;
                if (!slots_[q].claimed.compare_exchange_strong(s, s + 1, std::memory_order_acq_rel)) continue;
                slots_[q].by.store(me, std::memory_order_relaxed);
                run(fn, s, q);
                ran = true;
            }
            if (!left) return;
            if (ran) {
                idle = false;
                continue;
            }
            if (!idle) idle_since = Clock::now();
            idle = true;
            pause(Clock::now() - idle_since);
        }
    }
    /// True when a task saw the stop flag (the items are then not all done).
    bool stopped() const { return stopped_.load(); }

private:
    static constexpr std::chrono::microseconds kPatience{20}, kSpin{2};

    template <typename F>
    void run(F& fn, int64_t s, int64_t q) {
        try {
            fn(s, q);
        } catch (...) {
            quit_.store(true);  // the others return; the caller's task wrapper carries this on
            throw;
        }
        finished_.fetch_add(1, std::memory_order_acq_rel);
    }
    /// Spins briefly; after kSpin of waiting yields the core at every check: on a loaded machine
    /// the thread waited for may be queued behind this one on its core (a 50 us spin there cost
    /// 50 us a step), and with nothing else runnable sched_yield returns at once.
    static void pause(std::chrono::steady_clock::duration waited) {
        if (waited > kSpin) {
            sched_yield();
            return;
        }
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }

    const int64_t steps_, parts_;
    /// One cache line per part, and the shared counters on their own: the tasks write them at
    /// every step, and a line shared by two tasks' atomics moves between the cores each time.
    struct alignas(64) Slot {
        std::atomic<int64_t> claimed{0};  // steps of this part claimed so far
        std::atomic<int64_t> by{0};       // the task that claimed it last
    };
    std::unique_ptr<Slot[]> slots_;
    alignas(64) std::atomic<int64_t> present_{0};  // tasks arrived
    alignas(64) std::atomic<int64_t> finished_{0};  // items finished
    alignas(64) std::atomic<bool> quit_{false}, stopped_{false};
};

}  // namespace kiln::runtime::rnn
