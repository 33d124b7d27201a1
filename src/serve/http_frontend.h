// HttpFrontend: KServe v2 over HTTP/REST (cpp-httplib) in front of a serve::Server: health,
// metadata, model config, infer (JSON tensors and the binary tensor data extension), the model
// repository and statistics extensions; and, on its own port, Prometheus /metrics.
#pragma once

#include <memory>
#include <string>

#include "serve/server.h"

namespace kiln::serve {

struct HttpOptions {
    std::string host = "0.0.0.0";
    int port = 8000;   // 0 = any free port (port() says which)
    int threads = 0;   // connection-handling threads (0 = a default sized for concurrent clients)
};

class HttpFrontend {
public:
    /// Binds and starts serving on background threads; throws kiln::Error (kIOError) when the
    /// address cannot be bound.
    static std::unique_ptr<HttpFrontend> start(Server& server, const HttpOptions& opts);
    /// The same, serving only GET /metrics (Triton's --metrics-port).
    static std::unique_ptr<HttpFrontend> start_metrics(Server& server, const HttpOptions& opts);
    virtual ~HttpFrontend() = default;
    virtual int port() const = 0;
    /// Stops accepting connections; requests being handled finish first. Idempotent.
    virtual void stop() = 0;
};

}  // namespace kiln::serve
