// GrpcFrontend: KServe v2 over gRPC (inference.GRPCInferenceService, the protocol tritonclient
// speaks) in front of a serve::Server.
#pragma once

#include <memory>
#include <string>

#include "serve/server.h"

namespace kiln::serve {

struct GrpcOptions {
    std::string host = "0.0.0.0";
    int port = 8001;  // 0 = any free port (port() says which)
};

class GrpcFrontend {
public:
    /// Binds and starts serving on background threads; throws kiln::Error (kIOError) when the
    /// address cannot be bound.
    static std::unique_ptr<GrpcFrontend> start(Server& server, const GrpcOptions& opts);
    virtual ~GrpcFrontend() = default;
    virtual int port() const = 0;
    /// Stops accepting calls; calls in flight finish first. Idempotent.
    virtual void stop() = 0;
};

}  // namespace kiln::serve
