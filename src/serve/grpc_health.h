// HealthService: grpc.health.v1.Health on Kiln's gRPC frontend, answered from the server's live
// state at each call. Check(service):
//   "" or "inference.GRPCInferenceService"  SERVING when the server is ready (every model asked to
//                                           load is ready or failed, not shutting down), else
//                                           NOT_SERVING;
//   a model's name                          SERVING when its newest version is ready, else
//                                           NOT_SERVING (loading, failed, unloaded);
//   any other name                          the call fails with NOT_FOUND, as gRPC's spec says.
// Watch is not served (UNIMPLEMENTED): clients poll Check.
#pragma once

#include <grpcpp/grpcpp.h>

#include "serve/proto/health.grpc.pb.h"
#include "serve/server.h"

namespace kiln::serve {

class HealthService final : public grpc::health::v1::Health::CallbackService {
public:
    explicit HealthService(Server& server) : server_(server) {}

    grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* ctx, const grpc::health::v1::HealthCheckRequest* req,
                                    grpc::health::v1::HealthCheckResponse* resp) override;

private:
    Server& server_;
};

}  // namespace kiln::serve
