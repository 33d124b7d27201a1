#include "distributed/master_dispatch.h"

#include <chrono>
#include <exception>
#include <thread>

#include "distributed/rank_graph_shipping.h"
#include "kiln/error.h"

namespace kiln::distributed {
namespace {

TransferKey order_key(int worker, int64_t order) { return TransferKey{0, 1, worker, "order", 0, 0, order}; }
TransferKey input_key(int worker, const std::string& name, int64_t order) {
    return TransferKey{0, 1, worker, "input:" + name, 0, 0, order};
}
TransferKey error_key(int worker) { return TransferKey{worker, 1, 0, "error", 0, 0, 0}; }

Tensor order_tensor(int64_t microbatches) {
    Tensor t(DType::kInt64, {1});
    t.set_i64(0, microbatches);
    return t;
}

}  // namespace

MasterDispatch::MasterDispatch(PartitionedModel& model, Rendezvous& rv) : model_(model), rv_(rv) {
    rv_.set_wait_check([this] { check_workers(); });
}

MasterDispatch::~MasterDispatch() {
    rv_.set_wait_check({});
    if (!stopped_ && std::uncaught_exceptions() == 0) {
        try {
            stop();
        } catch (...) {  // a destructor must not throw; the job is ending anyway
        }
    }
}

void MasterDispatch::check_workers() {
    for (int w = 1; w < model_.num_ranks(); ++w)
        if (std::optional<Tensor> e = rv_.try_recv(error_key(w)))
            KILN_THROW(kIOError) << "worker rank " << w << " failed: " << tensor_as_text(*e);
}

void MasterDispatch::enqueue(const std::map<std::string, Tensor>& feeds, int microbatches) {
    KILN_CHECK(!stopped_, kInvalidArgument) << "enqueue after the workers were stopped";
    KILN_CHECK(microbatches >= 1, kInvalidArgument) << "microbatches must be >= 1, got " << microbatches;
    const int64_t order = next_order_++;
    for (int w = 1; w < model_.num_ranks(); ++w) {
        rv_.send(order_key(w, order), order_tensor(microbatches));
        for (const std::string& name : model_.model_inputs_of(w)) {
            auto feed = feeds.find(name);
            KILN_CHECK(feed != feeds.end(), kInvalidArgument) << "missing input '" << name << "'";
            rv_.send(input_key(w, name, order), feed->second);
        }
    }
    queued_.push_back(Run{feeds, microbatches});
}

std::vector<Tensor> MasterDispatch::collect() {
    KILN_CHECK(!queued_.empty(), kInvalidArgument) << "collect without an enqueued run";
    Run run = std::move(queued_.front());
    queued_.pop_front();
    check_workers();
    return model_.run_mpi(run.feeds, rv_, 0, run.microbatches);
}

void MasterDispatch::stop() {
    if (stopped_) return;
    stopped_ = true;
    for (int w = 1; w < model_.num_ranks(); ++w) rv_.send(order_key(w, next_order_), order_tensor(0));
    ++next_order_;
}

void run_worker(Rendezvous& rv, int rank, int num_ranks, const SessionOptions& opts, double grace_s) {
    try {
        PartitionedModel model(receive_rank_graph(rv, rank), num_ranks, opts);
        for (int64_t order = 0;; ++order) {
            // No deadline: the master may pause between runs; a lost master is the heartbeat's.
            const int64_t microbatches = rv.recv(order_key(rank, order), 0).get_i64(0);
            if (microbatches == 0) return;
            std::map<std::string, Tensor> feeds;
            for (const std::string& name : model.model_inputs_of(rank)) feeds[name] = rv.recv(input_key(rank, name, order), 0);
            model.run_mpi(feeds, rv, rank, static_cast<int>(microbatches));
        }
    } catch (const std::exception& e) {
        rv.send(error_key(rank), text_as_tensor(e.what()));
        // The master ends the job when it next waits; should it not be waiting on this rank,
        // the caller's abort ends it after the grace period.
        const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
        while (std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        throw;
    }
}

}  // namespace kiln::distributed
