#include "serve/grpc_health.h"

#include <fmt/format.h>

namespace kiln::serve {

using grpc::health::v1::HealthCheckResponse;

grpc::ServerUnaryReactor* HealthService::Check(grpc::CallbackServerContext* ctx,
                                               const grpc::health::v1::HealthCheckRequest* req,
                                               HealthCheckResponse* resp) {
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
    const std::string& service = req->service();
    auto status = [](bool ok) { return ok ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING; };
    if (service.empty() || service == "inference.GRPCInferenceService") {
        resp->set_status(status(server_.live() && server_.ready()));
        r->Finish(grpc::Status::OK);
        return r;
    }
    bool known = false;
    for (const RepositoryEntry& e : server_.repository_index(/*ready_only=*/false)) known |= e.name == service;
    if (!known) {
        r->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND,
                               fmt::format("unknown service '{}': the server's health is service \"\", a "
                                           "model's is its name",
                                           service)));
        return r;
    }
    resp->set_status(status(server_.model_ready(service, "")));
    r->Finish(grpc::Status::OK);
    return r;
}

}  // namespace kiln::serve
