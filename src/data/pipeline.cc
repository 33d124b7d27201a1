// The pipeline's producer side: worker threads claim records one at a time in epoch order, run
// source.get and the map stages on them, and the worker that finishes a batch's last record
// stacks it. The consumer (next()) takes batches strictly in order.
//
// Back-pressure: a record may be claimed only while its batch is within `prefetch` batches of
// the consumer (batch < consumed + prefetch), so at most `prefetch` batches are being prepared
// or waiting at any time, and workers sleep on a condition variable when they are that far
// ahead. Claiming records rather than batches keeps every worker busy even with prefetch = 1.
//
// Determinism: the epoch order depends on (seed, epoch) and each record's Rng on (seed, epoch,
// record), so batches do not depend on map_threads or scheduling. An error is kept on its
// batch (the failing record with the earliest position wins) and raised when the consumer
// reaches that batch, so the batches before it are still delivered, in order.
//
// Threads: dedicated std::threads, not the runtime's ThreadPool. The runtime pools are
// fork-join (parallel_for) or task queues whose idle workers spin, built for compute kernels;
// pipeline workers instead block for long stretches (back-pressure, file reads) and must not
// take the intra-op threads the compiled training step runs on. Idle workers here cost nothing.
//
// start_epoch bumps a generation counter: results of records claimed for an earlier epoch are
// dropped when they come back, so an epoch can be restarted (or the pipeline destroyed) while
// workers are mid-record; the destructor waits only for the record each worker is running.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "data/batching.h"
#include "data/epoch_order.h"
#include "data/pipeline.h"
#include "support/error.h"

namespace kiln::data {

struct Pipeline::State {
    struct Slot {
        std::vector<Example> examples;
        std::vector<int64_t> records;
        int64_t remaining = 0;
        std::optional<Batch> batch;
        std::exception_ptr error;
        int64_t error_pos = INT64_MAX;
        bool done = false;
    };

    std::mutex mu;
    std::condition_variable work_cv, ready_cv;
    std::vector<std::thread> workers;
    bool stop = false;
    bool started = false;
    uint64_t generation = 0;
    int64_t epoch = 0;
    std::vector<int64_t> order;
    int64_t end_pos = 0;        // records the epoch uses (a dropped remainder excluded)
    int64_t total_batches = 0;
    int64_t next_pos = 0;       // the next position of `order` to claim
    int64_t consumed = 0;       // the batch next() returns next
    std::map<int64_t, Slot> slots;
    std::exception_ptr failed;  // raised again by every next() until start_epoch
    double wait_seconds = 0;
};

namespace {

// The error of record `record` (position `pos`, batch `batch`), naming it.
std::exception_ptr record_error(const std::exception_ptr& e, int64_t record, int64_t epoch, int64_t batch,
                                const Source& source) {
    std::string where = "record " + std::to_string(record) + " (epoch " + std::to_string(epoch) + ", batch " +
                        std::to_string(batch) + ") of " + source.describe() + ": ";
    try {
        std::rethrow_exception(e);
    } catch (const Error& err) {
        Error out(err.kind(), where + err.message());
        for (const std::string& c : err.context()) out.add_context(c);
        return std::make_exception_ptr(out);
    } catch (const std::exception& err) {
        return std::make_exception_ptr(Error(ErrorKind::kInvalidArgument, where + "map stage threw: " + err.what()));
    } catch (...) {
        return std::make_exception_ptr(Error(ErrorKind::kInvalidArgument, where + "map stage threw a non-std exception"));
    }
}

}  // namespace

Pipeline::Pipeline(std::shared_ptr<Source> source, PipelineOptions opts)
    : source_(std::move(source)), opts_(opts), state_(std::make_unique<State>()) {
    KILN_CHECK(source_ != nullptr, kInvalidArgument) << "Pipeline: null source";
    KILN_CHECK(opts_.batch_size >= 1, kInvalidArgument) << "Pipeline: batch_size must be >= 1, got " << opts_.batch_size;
    KILN_CHECK(opts_.prefetch >= 1, kInvalidArgument) << "Pipeline: prefetch must be >= 1, got " << opts_.prefetch;
    KILN_CHECK(opts_.map_threads >= 0, kInvalidArgument)
        << "Pipeline: map_threads must be >= 0 (0 = one per core), got " << opts_.map_threads;
    KILN_CHECK(opts_.shard_count >= 1 && opts_.shard_index >= 0 && opts_.shard_index < opts_.shard_count &&
                   (opts_.shard_count == 1 || opts_.drop_remainder),
               kInvalidArgument)
        << "Pipeline: shard " << opts_.shard_index << " of " << opts_.shard_count
        << ": expected 0 <= shard_index < shard_count, and drop_remainder when sharded";
    if (opts_.map_threads == 0)
        opts_.map_threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) - 1);
}

Pipeline::~Pipeline() {
    {
        std::lock_guard<std::mutex> lk(state_->mu);
        state_->stop = true;
        ++state_->generation;
    }
    state_->work_cv.notify_all();
    state_->ready_cv.notify_all();
    for (std::thread& t : state_->workers) t.join();
}

void Pipeline::map(MapFn fn) {
    KILN_CHECK(fn != nullptr, kInvalidArgument) << "Pipeline::map: empty function";
    std::lock_guard<std::mutex> lk(state_->mu);
    // Workers read maps_ without the lock once they run.
    KILN_CHECK(!state_->started, kInvalidArgument) << "Pipeline::map must be called before the first start_epoch";
    maps_.push_back(std::move(fn));
}

int64_t Pipeline::batches_per_epoch() const {
    int64_t n = source_->size(), b = opts_.batch_size;
    if (opts_.shard_count > 1) return n / (b * opts_.shard_count);
    return opts_.drop_remainder ? n / b : (n + b - 1) / b;
}

int Pipeline::map_threads() const { return opts_.map_threads; }

void Pipeline::start_epoch(int64_t epoch, int64_t skip_batches) {
    int64_t total = batches_per_epoch();
    KILN_CHECK(skip_batches >= 0 && skip_batches <= total, kInvalidArgument)
        << "Pipeline::start_epoch(" << epoch << ", skip_batches=" << skip_batches << "): expected 0 <= skip_batches <= "
        << total << " (batches per epoch)";
    std::vector<int64_t> order = epoch_order(source_->size(), opts_.shuffle, opts_.seed, epoch);
    if (opts_.shard_count > 1) order = shard_order(order, opts_.batch_size, opts_.shard_count, opts_.shard_index);
    State& s = *state_;
    {
        std::lock_guard<std::mutex> lk(s.mu);
        ++s.generation;
        s.started = true;
        s.epoch = epoch;
        s.order = std::move(order);
        s.total_batches = total;
        s.end_pos = std::min<int64_t>(static_cast<int64_t>(s.order.size()), total * opts_.batch_size);
        s.consumed = skip_batches;
        s.next_pos = skip_batches * opts_.batch_size;
        s.slots.clear();
        s.failed = nullptr;
        s.wait_seconds = 0;
        while (static_cast<int>(s.workers.size()) < opts_.map_threads)
            s.workers.emplace_back([this] { worker_loop(); });
    }
    s.work_cv.notify_all();
}

void Pipeline::worker_loop() {
    State& s = *state_;
    const int64_t bs = opts_.batch_size;
    std::unique_lock<std::mutex> lk(s.mu);
    for (;;) {
        s.work_cv.wait(lk, [&] {
            return s.stop || (s.started && !s.failed && s.next_pos < s.end_pos &&
                              s.next_pos / bs < s.consumed + opts_.prefetch);
        });
        if (s.stop) return;
        const uint64_t gen = s.generation;
        const int64_t pos = s.next_pos++, batch = pos / bs, record = s.order[pos], epoch = s.epoch;
        lk.unlock();

        Example ex;
        std::exception_ptr err;
        try {
            ex = source_->get(record);
            Rng rng(record_seed(opts_.seed, epoch, record));
            for (const MapFn& fn : maps_) fn(ex, rng);
        } catch (...) {
            err = record_error(std::current_exception(), record, epoch, batch, *source_);
        }

        lk.lock();
        if (gen != s.generation) continue;  // a newer epoch started meanwhile: drop the result
        State::Slot& slot = s.slots[batch];
        if (slot.records.empty()) {
            int64_t n = std::min(bs, s.end_pos - batch * bs);
            slot.examples.resize(n);
            slot.records.assign(n, -1);
            slot.remaining = n;
        }
        const int64_t k = pos - batch * bs;
        slot.records[k] = record;
        if (err) {
            if (pos < slot.error_pos) {
                slot.error = err;
                slot.error_pos = pos;
            }
        } else {
            slot.examples[k] = std::move(ex);
        }
        if (--slot.remaining > 0) continue;
        if (!slot.error) {
            // The last record of the batch: stack it outside the lock.
            std::vector<Example> examples = std::move(slot.examples);
            std::vector<int64_t> records = slot.records;
            lk.unlock();
            std::optional<Batch> b;
            std::exception_ptr stack_err;
            try {
                b = stack_examples(examples, records,
                                   "epoch " + std::to_string(epoch) + ", batch " + std::to_string(batch));
            } catch (...) {
                stack_err = std::current_exception();
            }
            examples.clear();
            lk.lock();
            if (gen != s.generation) continue;
            State::Slot& again = s.slots[batch];
            again.batch = std::move(b);
            again.error = stack_err;
        }
        s.slots[batch].done = true;
        s.ready_cv.notify_all();
    }
}

std::optional<Batch> Pipeline::next() {
    State& s = *state_;
    std::unique_lock<std::mutex> lk(s.mu);
    KILN_CHECK(s.started, kInvalidArgument) << "Pipeline::next before start_epoch";
    if (s.failed) std::rethrow_exception(s.failed);
    if (s.consumed >= s.total_batches) return std::nullopt;
    auto ready = [&] {
        auto it = s.slots.find(s.consumed);
        return it != s.slots.end() && it->second.done;
    };
    if (!ready()) {
        auto t0 = std::chrono::steady_clock::now();
        s.ready_cv.wait(lk, ready);
        s.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    auto it = s.slots.find(s.consumed);
    State::Slot slot = std::move(it->second);
    s.slots.erase(it);
    ++s.consumed;
    if (slot.error) s.failed = slot.error;  // the epoch ends here; workers stop claiming
    lk.unlock();
    s.work_cv.notify_all();
    if (slot.error) std::rethrow_exception(slot.error);
    return std::move(slot.batch);
}

double Pipeline::wait_seconds() const {
    std::lock_guard<std::mutex> lk(state_->mu);
    return state_->wait_seconds;
}

}  // namespace kiln::data
