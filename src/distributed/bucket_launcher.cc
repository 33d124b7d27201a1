// Bucket allreduces started as their gradients come in (bucket_launcher.h).
#include "distributed/bucket_launcher.h"

#include <chrono>

#include "kiln/error.h"

namespace kiln::distributed {

BucketLauncher::BucketLauncher(Communicator& comm, const std::vector<size_t>& sizes, bool reduce, int progress_us)
    : comm_(comm), reduce_(reduce), reported_at_start_(sizes.size(), -1) {
    for (size_t n : sizes) {
        tensors_.emplace_back(n);
        filled_.emplace_back(n, false);
        missing_.push_back(n);
    }
    // Started whether or not there is anything to poll (overlap off, allreduce removed), so that
    // the configurations a benchmark compares run the same threads (docs/distributed.md).
    if (progress_us > 0 && comm_.size() > 1) progress_ = std::thread([this, progress_us] { progress_loop(progress_us); });
}

BucketLauncher::~BucketLauncher() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    stop_cv_.notify_all();
    if (progress_.joinable()) progress_.join();
}

void BucketLauncher::put(size_t bucket, size_t pos, NamedTensor t, bool gradient) {
    std::lock_guard<std::mutex> lock(mu_);
    if (filled_.at(bucket).at(pos)) return;
    filled_[bucket][pos] = true;
    tensors_[bucket][pos] = std::move(t);
    --missing_[bucket];
    if (gradient) ++reported_;
    try {
        start_ready_locked();
    } catch (...) {
        if (!error_) error_ = std::current_exception();
    }
}

bool BucketLauncher::has(size_t bucket, size_t pos) {
    std::lock_guard<std::mutex> lock(mu_);
    return filled_.at(bucket).at(pos);
}

// Buckets start in order: the next one only when complete, however many later ones are.
void BucketLauncher::start_ready_locked() {
    while (pending_.size() < tensors_.size() && missing_[pending_.size()] == 0 && !error_) {
        const size_t b = pending_.size();
        reported_at_start_[b] = reported_;
        if (reduce_) {
            pending_.push_back(start_allreduce(comm_, tensors_[b], ReduceOp::kMean));
        } else {
            pending_.push_back(start_allreduce(comm_, {}, ReduceOp::kSum));  // nothing to send
        }
        done_.push_back(false);
    }
}

// Open MPI advances non-blocking collectives only inside MPI calls: poll while the backward
// pass computes, so a bucket's transfer is done (or nearly) when the optimizer needs it.
void BucketLauncher::progress_loop(int progress_us) {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
        for (size_t b = 0; b < pending_.size() && !error_; ++b) {
            if (done_[b]) continue;
            try {
                done_[b] = pending_[b].test();
            } catch (...) {
                error_ = std::current_exception();
            }
        }
        stop_cv_.wait_for(lock, std::chrono::microseconds(progress_us));
    }
}

void BucketLauncher::finish() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (error_) std::rethrow_exception(error_);
        start_ready_locked();
        for (size_t b = 0; b < missing_.size(); ++b)
            KILN_CHECK(missing_[b] == 0, kInternal) << "bug in Kiln: data-parallel bucket " << b << " lacks "
                                                    << missing_[b] << " of its tensors at the end of the step";
        stop_ = true;  // the waits below poll on this thread
    }
    stop_cv_.notify_all();
    if (progress_.joinable()) progress_.join();
    for (PendingAllreduce& p : pending_) p.wait();
}

size_t BucketLauncher::started() {
    std::lock_guard<std::mutex> lock(mu_);
    return pending_.size();
}

std::vector<int> BucketLauncher::reported_at_start() {
    std::lock_guard<std::mutex> lock(mu_);
    return reported_at_start_;
}

}  // namespace kiln::distributed
