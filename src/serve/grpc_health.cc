#include "serve/grpc_health.h"

#include <mutex>

#include <fmt/format.h>
#include <grpcpp/alarm.h>

namespace kiln::serve {

using grpc::health::v1::HealthCheckResponse;

namespace {

// One Watch call: writes the status, then samples it every kWatchPeriod (an alarm) and writes
// it again when it changed. At most one of {a write, an alarm} is pending at a time, and Finish
// is called only when neither is, so OnDone (which deletes the reactor) comes last. mu_ guards
// the flags only: no gRPC call is made while holding it (a reaction may run inline).
class WatchReactor final : public grpc::ServerWriteReactor<HealthCheckResponse> {
public:
    WatchReactor(const HealthService& health, std::string service) : health_(health), service_(std::move(service)) {
        sample();  // operations started before gRPC binds the reactor wait for it
    }

    void OnWriteDone(bool ok) override {
        if (!ok) return finish(grpc::Status::CANCELLED);
        sample();
    }

    void OnCancel() override {
        bool armed;
        {
            std::lock_guard lock(mu_);
            cancelled_ = true;
            armed = armed_;
        }
        if (armed) alarm_.Cancel();  // its callback runs with ok = false and finishes the call
    }

    void OnDone() override { delete this; }

private:
    // With nothing pending: finish, write the status if it changed, or wait kWatchPeriod.
    void sample() {
        const HealthCheckResponse::ServingStatus now = health_.status_of(service_);
        bool write = false;
        {
            std::lock_guard lock(mu_);
            if (!cancelled_ && !health_.stopping()) {
                write = !sent_ || now != resp_.status();
                sent_ = true;
                resp_.set_status(now);
                armed_ = !write;
            }
        }
        if (cancelled()) return finish(grpc::Status::CANCELLED);
        if (health_.stopping()) return finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
        if (write) return StartWrite(&resp_);
        alarm_.Set(std::chrono::system_clock::now() + HealthService::kWatchPeriod, [this](bool ok) {
            {
                std::lock_guard lock(mu_);
                armed_ = false;
            }
            if (!ok) return finish(grpc::Status::CANCELLED);
            sample();
        });
    }

    bool cancelled() {
        std::lock_guard lock(mu_);
        return cancelled_;
    }

    void finish(const grpc::Status& status) {
        {
            std::lock_guard lock(mu_);
            if (finished_) return;
            finished_ = true;
        }
        Finish(status);
    }

    const HealthService& health_;
    const std::string service_;
    std::mutex mu_;
    grpc::Alarm alarm_;
    HealthCheckResponse resp_;
    bool sent_ = false, armed_ = false, cancelled_ = false, finished_ = false;
};

}  // namespace

HealthCheckResponse::ServingStatus HealthService::status_of(const std::string& service) const {
    auto status = [](bool ok) { return ok ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING; };
    if (service.empty() || service == "inference.GRPCInferenceService")
        return status(server_.live() && server_.ready());
    for (const RepositoryEntry& e : server_.repository_index(/*ready_only=*/false))
        if (e.name == service) return status(server_.model_ready(service, ""));
    return HealthCheckResponse::SERVICE_UNKNOWN;
}

grpc::ServerUnaryReactor* HealthService::Check(grpc::CallbackServerContext* ctx,
                                               const grpc::health::v1::HealthCheckRequest* req,
                                               HealthCheckResponse* resp) {
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
    const HealthCheckResponse::ServingStatus status = status_of(req->service());
    if (status == HealthCheckResponse::SERVICE_UNKNOWN) {
        r->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND,
                               fmt::format("unknown service '{}': the server's health is service \"\", a "
                                           "model's is its name",
                                           req->service())));
        return r;
    }
    resp->set_status(status);
    r->Finish(grpc::Status::OK);
    return r;
}

grpc::ServerWriteReactor<HealthCheckResponse>* HealthService::Watch(grpc::CallbackServerContext*,
                                                                   const grpc::health::v1::HealthCheckRequest* req) {
    return new WatchReactor(*this, req->service());
}

}  // namespace kiln::serve
