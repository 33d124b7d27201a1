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
distributed::DataParallelOptions options_with(size_t bucket_bytes) {
    distributed::DataParallelOptions o = distributed::DataParallelOptions::from_env();
    if (bucket_bytes > 0) o.bucket_bytes = bucket_bytes;
    return o;
}
}  // namespace

DataParallelTrainer::DataParallelTrainer(TrainingSession& session, size_t bucket_bytes)
    : impl_(new Impl{distributed::DataParallel(distributed::Communicator::get(), session, options_with(bucket_bytes))}) {}

DataParallelTrainer::~DataParallelTrainer() = default;

void DataParallelTrainer::broadcast_parameters() { impl_->dp.broadcast_parameters(); }
double DataParallelTrainer::step(const std::map<std::string, Tensor>& batch) { return impl_->dp.step(batch); }
int DataParallelTrainer::bucket_count() const { return static_cast<int>(impl_->dp.buckets().size()); }

}  // namespace kiln
