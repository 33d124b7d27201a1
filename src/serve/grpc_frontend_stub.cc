// TEMPORARY (branch serve-http): GrpcFrontend::start until the gRPC frontend (branch serve-grpc)
// is merged; delete this file then.
#include "kiln/error.h"
#include "serve/grpc_frontend.h"

namespace kiln::serve {

std::unique_ptr<GrpcFrontend> GrpcFrontend::start(Server&, const GrpcOptions&) {
    KILN_THROW(kUnsupported) << "gRPC frontend not built (use --allow-grpc=false)";
}

}  // namespace kiln::serve
