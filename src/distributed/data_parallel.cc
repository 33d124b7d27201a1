// Data-parallel steps (data_parallel.h).
#include "distributed/data_parallel.h"

#include <cstdlib>
#include <cstring>

#include "distributed/collectives.h"
#include "kiln/error.h"

namespace kiln::distributed {

DataParallelOptions DataParallelOptions::from_env() {
    DataParallelOptions o;
    const char* skip = std::getenv("KILN_DIST_BENCH_NO_ALLREDUCE");
    o.skip_allreduce = skip && std::strcmp(skip, "1") == 0;
    return o;
}

DataParallel::DataParallel(Communicator& comm, TrainingSession& session, DataParallelOptions opts)
    : comm_(comm), session_(session), opts_(opts) {}

void DataParallel::broadcast_parameters() {
    std::vector<NamedTensor> params;
    for (const std::string& name : session_.parameter_names()) params.push_back({name, session_.parameter(name).clone()});
    broadcast(comm_, params, 0);
    if (comm_.rank() != 0)
        for (const NamedTensor& p : params) session_.set_parameter(p.name, p.tensor);
}

double DataParallel::step(const std::map<std::string, Tensor>& batch) {
    double loss = 0;
    std::map<std::string, Tensor> grads = session_.gradients(batch, &loss);
    std::vector<std::string> names = session_.parameter_names();
    // Buckets in reverse parameter order; the loss (f64) joins the first.
    buckets_.clear();
    std::vector<std::vector<NamedTensor>> buckets(1);
    Tensor loss_t(DType::kFloat64, {});
    *loss_t.data_as<double>() = loss;
    buckets[0].push_back({"loss", loss_t});
    size_t bytes = 0;
    for (auto it = names.rbegin(); it != names.rend(); ++it) {
        auto g = grads.find(*it);
        KILN_CHECK(g != grads.end(), kInternal) << "bug in Kiln: the session returned no gradient for '" << *it << "'";
        if (bytes > 0 && bytes + g->second.nbytes() > opts_.bucket_bytes) buckets.emplace_back(), bytes = 0;
        buckets.back().push_back({"grad/" + *it, g->second});
        bytes += g->second.nbytes();
    }
    for (std::vector<NamedTensor>& b : buckets) {
        if (!opts_.skip_allreduce) allreduce(comm_, b, ReduceOp::kMean);  // in place: the tensors share `grads`' storage
        buckets_.emplace_back();
        for (const NamedTensor& t : b) buckets_.back().push_back(t.name);
    }
    session_.apply_gradients(grads);
    return *loss_t.data_as<double>();
}

}  // namespace kiln::distributed
