// The allreduces of one data-parallel step's buckets (data_parallel.h). Tensors come in as the
// backward pass reports them (put, from any thread); a bucket's non-blocking mean allreduce
// starts on the putting thread as soon as the bucket is complete and every earlier bucket has
// started (so every rank issues the same collectives in the same order); a progress thread
// polls the transfers in flight meanwhile; finish() waits for all of them.
#pragma once

#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "distributed/collectives.h"

namespace kiln::distributed {

class BucketLauncher {
public:
    /// sizes[b]: how many tensors bucket b holds. reduce false: nothing is sent (a benchmark's
    /// step without communication). progress_us: microseconds between polls (0: no thread; none
    /// on one rank either).
    BucketLauncher(Communicator& comm, const std::vector<size_t>& sizes, bool reduce, int progress_us);
    /// Stops the progress thread. After a failed step, transfers may still be in flight: the
    /// caller then ends the job (Communicator::abort), as for every error of a rank.
    ~BucketLauncher();
    BucketLauncher(const BucketLauncher&) = delete;
    BucketLauncher& operator=(const BucketLauncher&) = delete;

    /// Places `t` at position `pos` of bucket `bucket` (once; a second put of a slot is
    /// ignored) and starts the buckets now complete, in order. `gradient`: counts as a reported
    /// gradient (the loss does not). Thread-safe; never throws (an error is kept for finish()).
    void put(size_t bucket, size_t pos, NamedTensor t, bool gradient);
    /// Whether the slot holds a tensor.
    bool has(size_t bucket, size_t pos);
    /// Waits for every bucket, all of them complete by now (the deadline of
    /// Communicator::wait_all applies); rethrows an error a put() kept.
    void finish();
    /// Per bucket, the gradients reported when it started (-1: not started).
    std::vector<int> reported_at_start();
    /// How many buckets have started.
    size_t started();

private:
    void start_ready_locked();
    void progress_loop(int progress_us);

    Communicator& comm_;
    bool reduce_;
    std::mutex mu_;
    std::condition_variable stop_cv_;
    bool stop_ = false;
    std::vector<std::vector<NamedTensor>> tensors_;
    std::vector<std::vector<bool>> filled_;
    std::vector<size_t> missing_;
    std::vector<PendingAllreduce> pending_;  // started buckets, in order
    std::vector<bool> done_;                 // per started bucket: its transfers completed
    std::vector<int> reported_at_start_;
    int reported_ = 0;
    std::exception_ptr error_;
    std::thread progress_;
};

}  // namespace kiln::distributed
