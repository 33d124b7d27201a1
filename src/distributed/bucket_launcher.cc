// Bucket allreduces started as their gradients come in (bucket_launcher.h).
#include "distributed/bucket_launcher.h"

#include <chrono>

#include "kiln/error.h"

namespace kiln::distributed {

BucketLauncher::BucketLauncher(Communicator& comm, const std::vector<size_t>& sizes, bool reduce, bool comm_thread)
    : comm_(comm), reduce_(reduce), reported_at_start_(sizes.size(), -1) {
    for (size_t n : sizes) {
        tensors_.emplace_back(n);
        filled_.emplace_back(n, false);
        missing_.push_back(n);
    }
    if (comm_thread && comm_.size() > 1) comm_thread_ = std::thread([this] { comm_loop(); });
}

BucketLauncher::~BucketLauncher() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    if (comm_thread_.joinable()) comm_thread_.join();
}

void BucketLauncher::put(size_t bucket, size_t pos, NamedTensor t, bool gradient) {
    std::lock_guard<std::mutex> lock(mu_);
    if (filled_.at(bucket).at(pos)) return;
    filled_[bucket][pos] = true;
    tensors_[bucket][pos] = std::move(t);
    --missing_[bucket];
    if (gradient) ++reported_;
    start_ready_locked();
}

bool BucketLauncher::has(size_t bucket, size_t pos) {
    std::lock_guard<std::mutex> lock(mu_);
    return filled_.at(bucket).at(pos);
}

// Buckets are ready in order: the next one only when complete, however many later ones are.
void BucketLauncher::start_ready_locked() {
    const size_t before = ready_;
    while (ready_ < tensors_.size() && missing_[ready_] == 0) {
        // Handed to the communication thread, it is under way as far as the step is concerned.
        if (comm_thread_.joinable()) reported_at_start_[ready_] = reported_, started_ = ready_ + 1;
        ++ready_;
    }
    if (ready_ != before) cv_.notify_all();
}

// A bucket's large gradients are reduced in place, one call each (at ~3 GB/s a call's few
// microseconds are nothing next to a 256 KiB transfer); only the small ones (biases, norms)
// are packed, which spares most bytes the copies into and out of a fusion buffer.
void BucketLauncher::reduce_bucket(size_t b) {
    constexpr size_t kPackedBytes = size_t{256} << 10;
    if (reduce_) allreduce_prechecked(comm_, tensors_[b], ReduceOp::kMean, kPackedBytes);
}

// Takes the ready buckets in order. A bucket's tensors are complete and no longer written once
// it is ready, so the allreduce runs outside the lock.
void BucketLauncher::comm_loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        cv_.wait(lock, [&] { return stop_ || error_ || done_ < ready_; });
        if (stop_ || error_) return;
        const size_t b = done_;
        lock.unlock();
        std::exception_ptr error;
        try {
            reduce_bucket(b);
        } catch (...) {
            error = std::current_exception();
        }
        lock.lock();
        if (error) error_ = error;
        else ++done_;
        cv_.notify_all();
    }
}

void BucketLauncher::finish() {
    std::unique_lock<std::mutex> lock(mu_);
    start_ready_locked();
    for (size_t b = 0; b < missing_.size(); ++b)
        KILN_CHECK(missing_[b] == 0, kInternal) << "bug in Kiln: data-parallel bucket " << b << " lacks "
                                                << missing_[b] << " of its tensors at the end of the step";
    if (comm_thread_.joinable()) {
        cv_.wait(lock, [&] { return error_ || done_ == tensors_.size(); });
        if (error_) std::rethrow_exception(error_);
        return;
    }
    for (size_t b = done_; b < tensors_.size(); ++b) {
        reported_at_start_[b] = reported_;
        started_ = b + 1;
        lock.unlock();
        reduce_bucket(b);
        lock.lock();
        done_ = b + 1;
    }
}

size_t BucketLauncher::started() {
    std::lock_guard<std::mutex> lock(mu_);
    return started_;
}

std::vector<int> BucketLauncher::reported_at_start() {
    std::lock_guard<std::mutex> lock(mu_);
    return reported_at_start_;
}

}  // namespace kiln::distributed
