// The allreduces of one data-parallel step's buckets (data_parallel.h). Tensors come in as the
// backward pass reports them (put, from any thread); a bucket starts as soon as it is complete
// and every earlier bucket has started, so every rank issues the same collectives in the same
// order. With comm_thread, a communication thread of the launcher runs each started bucket's
// mean allreduce as a blocking MPI call, in order, while the backward pass goes on (Horovod's
// background thread); without it, finish() runs them. Open MPI's blocking algorithms are faster
// than its non-blocking ones, and nothing wakes periodically to poll (a 100 us polling thread
// cost a 2-rank step on 2 cores a quarter of its speed: docs/distributed.md). finish() waits
// for all of them.
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
    /// step without communication). comm_thread false: the allreduces run in finish(), on the
    /// caller's thread (as on one rank, where there is no thread either).
    BucketLauncher(Communicator& comm, const std::vector<size_t>& sizes, bool reduce, bool comm_thread);
    /// Stops the communication thread after its current bucket. After a failed step the caller
    /// ends the job (Communicator::abort), as for every error of a rank.
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
    /// Communicator::blocking applies); rethrows an error of an allreduce.
    void finish();
    /// Per bucket, the gradients reported when its allreduce began (-1: not begun).
    std::vector<int> reported_at_start();
    /// How many buckets' allreduces have begun.
    size_t started();

private:
    void start_ready_locked();
    /// Bucket b's allreduce (on the communication thread, or in finish()).
    void reduce_bucket(size_t b);
    void comm_loop();

    Communicator& comm_;
    bool reduce_;
    std::mutex mu_;
    std::condition_variable cv_;  // a bucket started, a bucket done, or stop
    bool stop_ = false;
    std::vector<std::vector<NamedTensor>> tensors_;
    std::vector<std::vector<bool>> filled_;
    std::vector<size_t> missing_;
    size_t ready_ = 0;    // buckets complete, in order
    size_t started_ = 0;  // buckets whose allreduce began
    size_t done_ = 0;     // buckets reduced
    std::vector<int> reported_at_start_;
    int reported_ = 0;
    std::exception_ptr error_;
    std::thread comm_thread_;
};

}  // namespace kiln::distributed
