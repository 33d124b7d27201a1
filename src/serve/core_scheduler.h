// CoreScheduler: the server's CPU cores, handed to model runs by priority class (REEF on CPU).
//
// The server owns `cores` cores; every run first acquires some (its model's "threads", default
// all) and runs with RunOptions::max_threads = what it got, on the one shared intra-op pool, so
// concurrent runs never oversubscribe. Waiting runs are served real-time (RT) first, then best
// effort (BE), each in arrival order:
//   - an RT run gets exactly what it asks for (capped at `cores`); with preemption on, when the
//     free cores do not cover it, running BE runs are asked to stop (Preemption::request(),
//     newest first, just enough to cover the deficit; all of them when be_padding is off);
//     with preemption off it waits like anyone else (still ahead of every BE run);
//   - a BE run never starts while an RT run waits; it gets min(asked, free) cores, so it fills
//     what RT leaves free (REEF's dynamic kernel padding) -- unless be_padding is off, then it
//     waits while any RT run is active.
// A preempted BE run releases its cores and acquires again with the same Preemption object: it
// resumes (possibly with fewer cores), it is not restarted. The preemption latency (request()
// to the run returning suspended) is reported through on_preempted.
//
// An RT request claims its cores when it is queued (claim_for_real_time, on the thread that
// received it), before its model's worker thread runs: a claim counts like a waiting RT run
// (BE runs are asked to stop for it and no BE run is granted what it covers), so the BE threads
// give the cores up while the RT worker is still waking, and the worker -- which would
// otherwise wait for the OS to schedule it on cores that BE threads hold -- finds them free.
// The RT run's acquire takes the claim over (acquire's `claimed`); unclaim drops one unused.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <mutex>

#include "kiln/session.h"
#include "serve/types.h"

namespace kiln::serve {

class CoreScheduler {
public:
    struct Options {
        int cores = 1;
        bool be_padding = true;
        bool preemption = true;
    };
    /// Cores granted to one run.
    struct Grant {
        uint64_t id = 0;
        int cores = 0;
    };

    explicit CoreScheduler(const Options& opts);
    CoreScheduler(const CoreScheduler&) = delete;
    CoreScheduler& operator=(const CoreScheduler&) = delete;

    /// Blocks until the run may start and returns its cores (at least 1). `want` <= 0 means all.
    /// `preempt`: the run's Preemption (BE runs; nullptr = cannot be preempted). Its request flag
    /// is cleared when the grant is made.
    /// `claimed`: an RT run whose cores were claimed (claim_for_real_time with the same `want`);
    /// the claim ends when the run waits in its place.
    Grant acquire(Priority priority, int want, Preemption* preempt, bool claimed = false);
    /// An RT run asking for `want` cores (<= 0: all) is on its way: counts as a waiting RT run
    /// until acquire(kRealTime, want, nullptr, true) or unclaim_for_real_time(want).
    void claim_for_real_time(int want);
    void unclaim_for_real_time(int want);
    /// Cores claimed by RT runs that have not acquired yet (at most cores()).
    int claimed_for_real_time() const;
    /// The run returned; `suspended`: it was preempted and will acquire again.
    void release(const Grant& grant, bool suspended);

    int cores() const { return opts_.cores; }
    uint64_t preemptions() const;
    /// Called (outside the lock) with the latency of each preemption: request() to release().
    std::function<void(std::chrono::nanoseconds)> on_preempted;
    /// Called under the lock, after each grant and release, with a class's cores now in use (the
    /// server's kiln_cores_in_use gauge: a test sees a run hold its cores). Must not call back.
    std::function<void(Priority, int)> on_cores_in_use;

private:
    struct Waiter {
        Priority priority;
        int want;
        Preemption* preempt;
        Grant grant;
    };
    struct Running {
        Priority priority;
        int cores;
        Preemption* preempt;
        bool asked_to_stop = false;
        std::chrono::steady_clock::time_point asked_at;
    };

    void dispatch_locked();
    int want_of(int want) const { return want <= 0 ? opts_.cores : std::min(want, opts_.cores); }
    void grant_locked(Waiter* w, int cores);
    void count_in_use_locked(Priority priority, int delta);
    /// Asks running BE runs to stop until `deficit` cores are on their way back (all when
    /// every = true).
    void preempt_locked(int deficit, bool every);

    Options opts_;
    mutable std::mutex mu_;
    std::condition_variable granted_cv_;
    int free_;
    int rt_running_ = 0;
    int rt_claimed_ = 0;  // the sum of open claims' wants (each capped at opts_.cores)
    int in_use_[2] = {0, 0};  // cores held, by Priority
    uint64_t next_id_ = 1;
    uint64_t preemptions_ = 0;
    std::list<Waiter*> rt_waiting_, be_waiting_;
    std::map<uint64_t, Running> running_;
};

}  // namespace kiln::serve
