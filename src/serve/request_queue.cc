// The per-class request queue and the dynamic batcher's policy (request_queue.h).
#include "serve/request_queue.h"

#include <algorithm>

namespace kiln::serve {

Batch RequestQueue::take_batch(const BatchPolicy& policy, Clock::time_point now, Clock::time_point& wake) {
    Batch batch;
    if (queue_.empty()) return batch;
    if (policy.max_batch_size <= 0) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
        return batch;
    }
    // The candidates: the oldest request and the compatible ones after it that fit.
    const std::string& key = queue_.front()->batch_key;
    std::vector<size_t> picked;
    std::vector<int64_t> rows_after;  // rows of the prefix ending at picked[i]
    int64_t rows = 0;
    for (size_t i = 0; i < queue_.size() && rows < policy.max_batch_size; ++i) {
        if (queue_[i]->batch_key != key) continue;
        if (rows + queue_[i]->rows > policy.max_batch_size) {
            if (picked.empty()) picked.push_back(i), rows_after.push_back(rows += queue_[i]->rows);
            break;  // keep arrival order: do not jump a request that does not fit
        }
        picked.push_back(i);
        rows_after.push_back(rows += queue_[i]->rows);
    }
    const auto& preferred = policy.preferred_batch_sizes;
    bool full = rows >= policy.max_batch_size || (!preferred.empty() && rows >= preferred.back());
    bool waited = now >= queue_.front()->arrival + policy.max_queue_delay;
    if (!full && !waited) {
        wake = queue_.front()->arrival + policy.max_queue_delay;
        return batch;
    }
    size_t take = picked.size();
    if (!preferred.empty()) {
        // The longest prefix whose rows are a preferred size, if there is one.
        for (size_t n = picked.size(); n > 0; --n)
            if (std::binary_search(preferred.begin(), preferred.end(), static_cast<int>(rows_after[n - 1]))) {
                take = n;
                break;
            }
    }
    for (size_t n = 0; n < take; ++n) batch.push_back(std::move(queue_[picked[n]]));
    // Erase the moved-from slots (back to front keeps the indices valid).
    for (size_t n = take; n-- > 0;) queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(picked[n]));
    return batch;
}

RequestQueue::Admission RequestQueue::admit(std::unique_ptr<PendingRequest>& r, const QueuePolicy& policy,
                                            std::optional<std::chrono::microseconds> sla) {
    if (policy.max_queue_size > 0 && queue_.size() >= policy.max_queue_size)
        return {"queue is full (max_queue_size " + std::to_string(policy.max_queue_size) + ")", std::nullopt};
    std::optional<std::chrono::microseconds> timeout = policy.default_timeout;
    if (!timeout) timeout = sla;
    if (r->request.timeout && (policy.allow_timeout_override || !timeout)) timeout = r->request.timeout;
    r->deadline.reset();
    if (timeout && timeout->count() > 0) r->deadline = r->arrival + *timeout;
    Admission queued{"", r->deadline};
    queue_.push_back(std::move(r));
    return queued;
}

Batch RequestQueue::take_expired(Clock::time_point now) {
    Batch expired;
    for (auto it = queue_.begin(); it != queue_.end();) {
        if ((*it)->deadline && *(*it)->deadline <= now) {
            expired.push_back(std::move(*it));
            it = queue_.erase(it);
        } else {
            ++it;
        }
    }
    return expired;
}

std::optional<Clock::time_point> RequestQueue::next_deadline() const {
    std::optional<Clock::time_point> next;
    for (const auto& r : queue_)
        if (r->deadline && (!next || *r->deadline < *next)) next = r->deadline;
    return next;
}

Batch RequestQueue::take_all() {
    Batch all;
    for (auto& r : queue_) all.push_back(std::move(r));
    queue_.clear();
    return all;
}

}  // namespace kiln::serve
