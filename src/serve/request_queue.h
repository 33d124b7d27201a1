// RequestQueue: one priority class's waiting requests of one model version, in arrival order,
// and the dynamic batcher's choice of the next batch. Not thread-safe: its ModelVersion's lock
// guards it.
//
// The batcher (Triton's dynamic batcher, simplified): a batch starts with the oldest request and
// takes the following requests with the same non-batch dims, in order, while the rows fit
// max_batch_size. It goes at once when it reaches max_batch_size or the largest preferred batch
// size; otherwise it waits until the oldest request has waited max_queue_delay, and then takes
// the longest prefix whose rows are a preferred size (if one is), else everything that fits.
//
// Admission (Triton's PolicyQueue): a request enters its class's queue under that class's
// QueuePolicy, which bounds the queue's length and gives the request its deadline.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "serve/pending_request.h"

namespace kiln::serve {

struct BatchPolicy {
    int max_batch_size = 0;                  // 0: every request runs alone
    std::vector<int> preferred_batch_sizes;  // ascending
    std::chrono::microseconds max_queue_delay{0};
};

/// The queue policy of one priority class (Triton's ModelQueuePolicy, read).
struct QueuePolicy {
    uint32_t max_queue_size = 0;  // 0 = unbounded
    std::optional<std::chrono::microseconds> default_timeout;
    bool allow_timeout_override = true;
};

using Batch = std::vector<std::unique_ptr<PendingRequest>>;

class RequestQueue {
public:
    bool empty() const { return queue_.empty(); }
    size_t size() const { return queue_.size(); }
    void push(std::unique_ptr<PendingRequest> r) { queue_.push_back(std::move(r)); }

    struct Admission {
        std::string refused;                       // why not ("" when queued)
        std::optional<Clock::time_point> deadline;  // of the queued request
    };
    /// Admits `r` under `policy`: its deadline is its arrival plus the request's own timeout
    /// where the policy allows an override (or sets no timeout), else the policy's default
    /// timeout, else `sla`; none when that is zero or absent. Queues it, or, when the queue
    /// already holds max_queue_size requests, leaves `r` with the caller and says why.
    Admission admit(std::unique_ptr<PendingRequest>& r, const QueuePolicy& policy,
                    std::optional<std::chrono::microseconds> sla);

    /// The next batch if one should go now; otherwise empty, with `wake` set to when it will
    /// (the oldest request's delay expiring). `now` decides the delay.
    Batch take_batch(const BatchPolicy& policy, Clock::time_point now, Clock::time_point& wake);
    /// Removes and returns the requests whose deadline has passed.
    Batch take_expired(Clock::time_point now);
    /// The earliest deadline of a queued request.
    std::optional<Clock::time_point> next_deadline() const;
    Batch take_all();

private:
    std::deque<std::unique_ptr<PendingRequest>> queue_;
};

}  // namespace kiln::serve
