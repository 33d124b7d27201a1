// The RT/BE core scheduler (see core_scheduler.h for the policy).
#include "serve/core_scheduler.h"

#include <algorithm>

namespace kiln::serve {

CoreScheduler::CoreScheduler(const Options& opts) : opts_(opts), free_(std::max(1, opts.cores)) {
    opts_.cores = free_;
}

CoreScheduler::Grant CoreScheduler::acquire(Priority priority, int want, Preemption* preempt, bool claimed) {
    Waiter w{priority, want_of(want), preempt, {}};
    std::unique_lock<std::mutex> lock(mu_);
    if (claimed && priority == Priority::kRealTime) rt_claimed_ = std::max(0, rt_claimed_ - w.want);
    (priority == Priority::kRealTime ? rt_waiting_ : be_waiting_).push_back(&w);
    dispatch_locked();
    granted_cv_.wait(lock, [&] { return w.grant.cores > 0; });
    return w.grant;
}

void CoreScheduler::release(const Grant& grant, bool suspended) {
    std::chrono::nanoseconds latency{-1};
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = running_.find(grant.id);
        if (it == running_.end()) return;
        free_ += it->second.cores;
        if (it->second.priority == Priority::kRealTime) --rt_running_;
        count_in_use_locked(it->second.priority, -it->second.cores);
        if (suspended) {
            ++preemptions_;
            if (it->second.asked_to_stop) latency = std::chrono::steady_clock::now() - it->second.asked_at;
        }
        running_.erase(it);
        dispatch_locked();
    }
    if (latency.count() >= 0 && on_preempted) on_preempted(latency);
}

void CoreScheduler::claim_for_real_time(int want) {
    std::lock_guard<std::mutex> lock(mu_);
    rt_claimed_ += want_of(want);
    dispatch_locked();
}

void CoreScheduler::unclaim_for_real_time(int want) {
    std::lock_guard<std::mutex> lock(mu_);
    rt_claimed_ = std::max(0, rt_claimed_ - want_of(want));
    dispatch_locked();
}

int CoreScheduler::claimed_for_real_time() const {
    std::lock_guard<std::mutex> lock(mu_);
    return std::min(rt_claimed_, opts_.cores);
}

uint64_t CoreScheduler::preemptions() const {
    std::lock_guard<std::mutex> lock(mu_);
    return preemptions_;
}

void CoreScheduler::dispatch_locked() {
    while (!rt_waiting_.empty()) {
        Waiter* w = rt_waiting_.front();
        if (free_ < w->want) {
            if (opts_.preemption) preempt_locked(w->want - free_, !opts_.be_padding);
            return;  // BE never overtakes a waiting RT run
        }
        rt_waiting_.pop_front();
        grant_locked(w, w->want);
        // Without padding no BE run may share the machine with an RT run.
        if (opts_.preemption && !opts_.be_padding) preempt_locked(0, true);
    }
    // Claimed cores are held for the RT runs on their way: BE is asked off them and not given them.
    const int claimed = std::min(rt_claimed_, opts_.cores);
    if (claimed > 0 && opts_.preemption) preempt_locked(claimed - free_, !opts_.be_padding);
    if (!opts_.be_padding && (rt_running_ > 0 || claimed > 0)) return;
    while (!be_waiting_.empty() && free_ - claimed > 0) {
        Waiter* w = be_waiting_.front();
        be_waiting_.pop_front();
        grant_locked(w, std::min(w->want, free_ - claimed));
    }
}

void CoreScheduler::grant_locked(Waiter* w, int cores) {
    // Cleared under the lock: a request made from now on is about this grant's run.
    if (w->preempt) w->preempt->clear_request();
    free_ -= cores;
    if (w->priority == Priority::kRealTime) ++rt_running_;
    count_in_use_locked(w->priority, cores);
    w->grant = Grant{next_id_++, cores};
    running_.emplace(w->grant.id, Running{w->priority, cores, w->preempt});
    granted_cv_.notify_all();
}

void CoreScheduler::count_in_use_locked(Priority priority, int delta) {
    int& n = in_use_[static_cast<int>(priority)];
    n += delta;
    if (on_cores_in_use) on_cores_in_use(priority, n);
}

void CoreScheduler::preempt_locked(int deficit, bool every) {
    for (const auto& [id, r] : running_)
        if (r.asked_to_stop) deficit -= r.cores;
    auto now = std::chrono::steady_clock::now();
    // Newest first: the run that has done the least work gives way.
    for (auto it = running_.rbegin(); it != running_.rend() && (every || deficit > 0); ++it) {
        Running& r = it->second;
        if (r.priority != Priority::kBestEffort || !r.preempt || r.asked_to_stop) continue;
        r.preempt->request();
        r.asked_to_stop = true;
        r.asked_at = now;
        deficit -= r.cores;
    }
}

}  // namespace kiln::serve
