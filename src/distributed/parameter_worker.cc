// The worker side of parameter-server training (parameter_server.h): pull, gradients, push.
#include <algorithm>
#include <chrono>

#include "distributed/parameter_server.h"
#include "kiln/error.h"

namespace kiln::distributed {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

ParameterWorker::ParameterWorker(Communicator& comm, TrainingSession& session, ParameterServerOptions opts)
    : comm_(comm), session_(session), opts_(opts), layout_(parameter_server_layout(comm, session, opts.servers)) {
    KILN_CHECK(!layout_.is_server(comm.rank()), kInternal)
        << "bug in Kiln: rank " << comm.rank() << " is a parameter server, not a worker";
    rendezvous_ = std::make_unique<Rendezvous>(comm);
}

ParameterWorker::~ParameterWorker() = default;

// Every server's weights of `step` and its clock (the slowest worker's applied steps when it
// answered): this step's staleness is step - the smallest clock.
void ParameterWorker::pull(int64_t step) {
    const auto t0 = Clock::now();
    const int me = comm_.rank();
    int64_t slowest = step;
    for (int s = 0; s < layout_.servers; ++s) {
        for (const std::string& name : layout_.owned[static_cast<size_t>(s)])
            session_.set_parameter(name, rendezvous_->recv(parameter_server_key(s, me, "weight/" + name, step)));
        Tensor clock = rendezvous_->recv(parameter_server_key(s, me, "clock", step));
        slowest = std::min(slowest, *clock.data_as<int64_t>());
    }
    stats_.max_staleness = std::max(stats_.max_staleness, step - slowest);
    stats_.pull_s += seconds_since(t0);
}

double ParameterWorker::step(const std::map<std::string, Tensor>& batch) {
    KILN_CHECK(!finished_, kInvalidArgument) << "ParameterWorker::step after finish() on rank " << comm_.rank();
    pull(step_);
    const auto t0 = Clock::now();
    double loss = 0;
    std::map<std::string, Tensor> grads = session_.gradients(batch, &loss);
    stats_.gradients_s += seconds_since(t0);
    const int me = comm_.rank();
    for (const auto& [name, server] : layout_.owner) {
        auto g = grads.find(name);
        KILN_CHECK(g != grads.end(), kInternal) << "bug in Kiln: the session returned no gradient for '" << name << "'";
        rendezvous_->send(parameter_server_key(me, server, "grad/" + name, step_), g->second);
    }
    // The loss last: an asynchronous server takes its arrival as the sign that the step is in.
    Tensor l(DType::kFloat64, {});
    *l.data_as<double>() = loss;
    for (int s = 0; s < layout_.servers; ++s) rendezvous_->send(parameter_server_key(me, s, "loss", step_), l);
    ++step_;
    ++stats_.steps;
    return loss;
}

void ParameterWorker::finish() {
    if (finished_) return;
    pull(step_);
    finished_ = true;
}

}  // namespace kiln::distributed
