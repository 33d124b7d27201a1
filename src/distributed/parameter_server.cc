// The server side of parameter-server training (parameter_server.h); the worker side is
// parameter_worker.cc.
#include "distributed/parameter_server.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "distributed/agreement.h"
#include "distributed/collectives.h"
#include "distributed/reduce_op.h"
#include "kiln/error.h"

namespace kiln::distributed {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

template <typename T>
void add(T* acc, const T* g, int64_t n) {
    for (int64_t i = 0; i < n; ++i) acc[i] += g[i];
}

/// acc += g elementwise: the sync mean's sum, in worker order.
void add_in_place(Tensor& acc, const Tensor& g, const std::string& name) {
    KILN_CHECK(g.dtype() == acc.dtype() && g.shape() == acc.shape(), kInvalidArgument)
        << "parameter server: gradient of '" << name << "': expected " << dtype_name(acc.dtype()) << shape_str(acc.shape())
        << " (the first worker's), got " << dtype_name(g.dtype()) << shape_str(g.shape());
    if (acc.dtype() == DType::kFloat32) return add(acc.data_as<float>(), g.data_as<float>(), acc.numel());
    if (acc.dtype() == DType::kFloat64) return add(acc.data_as<double>(), g.data_as<double>(), acc.numel());
    KILN_THROW(kUnsupported) << "parameter server: parameter '" << name << "' is " << dtype_name(acc.dtype())
                             << "; synchronous averaging takes f32 and f64";
}

}  // namespace

ParameterServerLayout parameter_server_layout(Communicator& comm, const TrainingSession& session, int servers) {
    std::vector<std::pair<std::string, size_t>> params;
    std::vector<std::string> described;
    for (const std::string& name : session.parameter_names()) {
        const Tensor p = session.parameter(name);
        params.emplace_back(name, p.nbytes());
        described.push_back(describe({name, Tensor(p.dtype(), p.shape())}));
    }
    // The same arguments on every rank, so a refused layout is refused everywhere before the
    // collective below.
    ParameterServerLayout layout = ParameterServerLayout::make(comm.size(), servers, params);
    if (comm.options().check_agreement) check_agreement(comm, "parameter-server layout", described);
    return layout;
}

ParameterServer::ParameterServer(Communicator& comm, TrainingSession& session, ParameterServerOptions opts)
    : comm_(comm), session_(session), opts_(opts), layout_(parameter_server_layout(comm, session, opts.servers)) {
    KILN_CHECK(layout_.is_server(comm.rank()), kInternal)
        << "bug in Kiln: rank " << comm.rank() << " is a worker, not one of the " << opts.servers << " parameter servers";
    KILN_CHECK(opts.staleness >= 0, kInvalidArgument) << "--staleness must be non-negative, got " << opts.staleness;
    rendezvous_ = std::make_unique<Rendezvous>(comm);
    for (const std::string& name : session.parameter_names()) {
        if (layout_.owner.at(name) == comm.rank()) continue;
        const Tensor p = session.parameter(name);
        zeros_[name] = Tensor(p.dtype(), p.shape());
    }
}

ParameterServer::~ParameterServer() = default;

std::map<std::string, Tensor> ParameterServer::receive_gradients(int w, int64_t step) {
    const int src = layout_.worker_rank(w), me = comm_.rank();
    std::map<std::string, Tensor> grads;
    for (const std::string& name : layout_.owned[static_cast<size_t>(me)])
        grads[name] = rendezvous_->recv(parameter_server_key(src, me, "grad/" + name, step));
    return grads;
}

double ParameterServer::receive_loss(int w, int64_t step) {
    Tensor loss = rendezvous_->recv(parameter_server_key(layout_.worker_rank(w), comm_.rank(), "loss", step));
    return *loss.data_as<double>();
}

void ParameterServer::apply(const std::map<std::string, Tensor>& grads) {
    const auto t0 = Clock::now();
    std::map<std::string, Tensor> all = zeros_;  // shares the zeros' storage; the apply graph only reads it
    all.insert(grads.begin(), grads.end());
    session_.apply_gradients(all);
    stats_.apply_s += seconds_since(t0);
    ++stats_.updates;
}

void ParameterServer::send_weights(int w, int64_t step, int64_t clock) {
    const int dst = layout_.worker_rank(w), me = comm_.rank();
    for (const std::string& name : layout_.owned[static_cast<size_t>(me)])
        rendezvous_->send(parameter_server_key(me, dst, "weight/" + name, step), session_.parameter(name));
    Tensor c(DType::kInt64, {});
    *c.data_as<int64_t>() = clock;
    rendezvous_->send(parameter_server_key(me, dst, "clock", step), c);
}

void ParameterServer::serve(int64_t steps, const UpdateFn& on_update) {
    if (opts_.async)
        serve_async(steps, on_update);
    else
        serve_sync(steps, on_update);
}

// Every worker's gradients of step t, summed in worker order and divided by the worker count
// (as the mean allreduce of data-parallel training divides its sum), one optimizer step, and
// the new weights to every worker.
void ParameterServer::serve_sync(int64_t steps, const UpdateFn& on_update) {
    const int workers = layout_.workers;
    for (int w = 0; w < workers; ++w) send_weights(w, 0, 0);
    for (int64_t t = 0; t < steps; ++t) {
        const auto t0 = Clock::now();
        std::map<std::string, Tensor> mean;
        double loss = 0;
        for (int w = 0; w < workers; ++w) {
            std::map<std::string, Tensor> g = receive_gradients(w, t);
            loss += receive_loss(w, t);
            if (w == 0) {
                mean = std::move(g);
                continue;
            }
            for (auto& [name, sum] : mean) add_in_place(sum, g.at(name), name);
        }
        stats_.wait_s += seconds_since(t0);
        for (auto& [name, sum] : mean) divide_in_place(sum.data(), sum.dtype(), static_cast<size_t>(sum.numel()), workers);
        apply(mean);
        for (int w = 0; w < workers; ++w) send_weights(w, t + 1, t + 1);
        if (on_update) on_update(t + 1, loss / workers);
    }
}

// Each worker's gradients applied as they arrive. A worker owed the weights of its step
// applied[w] gets them once it is at most `staleness` steps ahead of the slowest worker
// (applied[w] - min(applied) <= K); until then its pull waits, which is the bound.
void ParameterServer::serve_async(int64_t steps, const UpdateFn& on_update) {
    const int workers = layout_.workers, me = comm_.rank();
    std::vector<int64_t> applied(static_cast<size_t>(workers), 0);
    std::vector<char> owed(static_cast<size_t>(workers), 1), held(static_cast<size_t>(workers), 0);
    auto idle_since = Clock::now();
    for (;;) {
        bool progress = false;
        const int64_t slowest = *std::min_element(applied.begin(), applied.end());
        for (int w = 0; w < workers; ++w) {
            if (!owed[w]) continue;
            const int64_t lead = applied[w] - slowest;
            if (lead > opts_.staleness) {
                stats_.held_back += !held[w];
                held[w] = 1;
                continue;
            }
            send_weights(w, applied[w], slowest);
            stats_.max_lead = std::max(stats_.max_lead, lead);
            owed[w] = held[w] = 0;
            progress = true;
        }
        if (slowest == steps && std::none_of(owed.begin(), owed.end(), [](char o) { return o != 0; })) return;
        for (int w = 0; w < workers; ++w) {
            if (owed[w] || applied[w] == steps) continue;
            // The loss goes last from the worker; its gradients are sent by then.
            std::optional<Tensor> loss =
                rendezvous_->try_recv(parameter_server_key(layout_.worker_rank(w), me, "loss", applied[w]));
            if (!loss) continue;
            apply(receive_gradients(w, applied[w]));
            ++applied[w];
            owed[w] = 1;
            progress = true;
            if (on_update) on_update(stats_.updates, *loss->data_as<double>());
        }
        if (progress) {
            idle_since = Clock::now();
            continue;
        }
        const double idle = seconds_since(idle_since);
        const double limit = comm_.options().collective_timeout_s;
        if (limit > 0 && idle > limit) {
            std::string waiting;
            for (int w = 0; w < workers; ++w)
                if (!owed[w] && applied[w] < steps)
                    waiting += " rank " + std::to_string(layout_.worker_rank(w)) + " (step " + std::to_string(applied[w]) + ")";
            KILN_THROW(kIOError) << "rank " << me << " (parameter server): no gradients for " << limit
                                 << " s while every rank's heartbeat is alive; waiting for" << waiting
                                 << "; KILN_DIST_TIMEOUT sets the limit";
        }
        stats_.wait_s += 100e-6;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
}

void ParameterServer::gather_parameters() {
    const int me = comm_.rank();
    if (me != 0) {
        for (const std::string& name : layout_.owned[static_cast<size_t>(me)])
            rendezvous_->send(parameter_server_key(me, 0, "final/" + name, 0), session_.parameter(name));
        return;
    }
    for (int s = 1; s < layout_.servers; ++s)
        for (const std::string& name : layout_.owned[static_cast<size_t>(s)])
            session_.set_parameter(name, rendezvous_->recv(parameter_server_key(s, 0, "final/" + name, 0)));
}

}  // namespace kiln::distributed
