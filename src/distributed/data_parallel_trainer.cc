// kiln/data_parallel.h over distributed::DataParallel and the process's Communicator.
#include "kiln/data_parallel.h"

#include "distributed/communicator.h"
#include "distributed/data_parallel.h"

namespace kiln {

int mpi_rank() { return distributed::Communicator::get().rank(); }
int mpi_size() { return distributed::Communicator::get().size(); }
void mpi_finalize() {
    if (distributed::Communicator::initialized()) distributed::Communicator::get().finalize();
}

struct DataParallelTrainer::Impl {
    distributed::DataParallel dp;
};

namespace {
distributed::DataParallelOptions options_with(const DataParallelTrainerOptions& opts) {
    distributed::DataParallelOptions o = distributed::DataParallelOptions::from_env();
    if (opts.bucket_bytes > 0) o.bucket_bytes = opts.bucket_bytes;
    o.sync_batch_norm = opts.sync_batch_norm;
    return o;
}
}  // namespace

DataParallelTrainer::DataParallelTrainer(TrainingSession& session, size_t bucket_bytes)
    : DataParallelTrainer(session, DataParallelTrainerOptions{.bucket_bytes = bucket_bytes}) {}

DataParallelTrainer::DataParallelTrainer(TrainingSession& session, const DataParallelTrainerOptions& opts)
    : impl_(new Impl{distributed::DataParallel(distributed::Communicator::get(), session, options_with(opts))}) {}

DataParallelTrainer::~DataParallelTrainer() = default;

void DataParallelTrainer::broadcast_parameters() { impl_->dp.broadcast_parameters(); }
double DataParallelTrainer::step(const std::map<std::string, Tensor>& batch) { return impl_->dp.step(batch); }
int DataParallelTrainer::bucket_count() const { return static_cast<int>(impl_->dp.buckets().size()); }
int DataParallelTrainer::synchronized_batch_norms() const { return impl_->dp.last_step_stats().synchronized_batch_norms; }

}  // namespace kiln
