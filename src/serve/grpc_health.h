// HealthService: grpc.health.v1.Health on Kiln's gRPC frontend, answered from the server's live
// state. The status of a service name:
//   "" or "inference.GRPCInferenceService"  SERVING when the server is live and ready (every
//                                           model asked to load is ready or failed), else
//                                           NOT_SERVING;
//   a model's name (a repository folder)    SERVING while its newest version is ready, else
//                                           NOT_SERVING (loading, failed, unloaded);
//   any other name                          unknown.
// Check answers the status at the call (an unknown name fails with NOT_FOUND). Watch sends the
// status at once and again whenever it changes (SERVICE_UNKNOWN for an unknown name, and the
// call stays open), as gRPC's health protocol says; it samples the server's state every
// kWatchPeriod, so a change reaches watchers within that period.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include <grpcpp/grpcpp.h>

#include "serve/proto/health.grpc.pb.h"
#include "serve/server.h"

namespace kiln::serve {

class HealthService final : public grpc::health::v1::Health::CallbackService {
public:
    static constexpr std::chrono::milliseconds kWatchPeriod{200};

    explicit HealthService(Server& server) : server_(server) {}

    grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* ctx, const grpc::health::v1::HealthCheckRequest* req,
                                    grpc::health::v1::HealthCheckResponse* resp) override;
    grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
        grpc::CallbackServerContext* ctx, const grpc::health::v1::HealthCheckRequest* req) override;

    /// The status of `service` now (SERVICE_UNKNOWN for a name that is no service).
    grpc::health::v1::HealthCheckResponse::ServingStatus status_of(const std::string& service) const;
    /// Ends open Watch calls (UNAVAILABLE) within kWatchPeriod; new ones end at once. Call before
    /// the grpc::Server shuts down, which waits for them.
    void stop() { stopping_ = true; }
    bool stopping() const { return stopping_; }

private:
    Server& server_;
    std::atomic<bool> stopping_{false};
};

}  // namespace kiln::serve
