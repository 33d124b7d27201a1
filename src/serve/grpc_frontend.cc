#include "serve/grpc_frontend.h"

#include <chrono>
#include <climits>
#include <mutex>

#include <grpcpp/grpcpp.h>

#include "kiln/error.h"
#include "serve/grpc_health.h"
#include "serve/grpc_service.h"

namespace kiln::serve {
namespace {

// How long stop() lets calls in flight finish before gRPC cancels them.
constexpr auto kShutdownGrace = std::chrono::seconds(60);

class GrpcFrontendImpl final : public GrpcFrontend {
public:
    GrpcFrontendImpl(Server& server, const GrpcOptions& opts) : service_(server), health_(server) {
        std::string address = opts.host + ":" + std::to_string(opts.port);
        grpc::ServerBuilder builder;
        builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port_);
        // No SO_REUSEPORT: a port another server holds is an error, not a silent share.
        builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
        builder.RegisterService(&service_);
        builder.RegisterService(&health_);  // grpc.health.v1.Health
        // Tensors are large: no gRPC size limit (Triton does the same).
        builder.SetMaxReceiveMessageSize(INT_MAX);
        builder.SetMaxSendMessageSize(INT_MAX);
        server_ = builder.BuildAndStart();
        if (server_ == nullptr || port_ == 0) {
            server_.reset();
            KILN_THROW(kIOError) << "gRPC frontend: cannot listen on " << address
                                 << " (address in use or not valid?)";
        }
    }

    ~GrpcFrontendImpl() override { stop(); }

    int port() const override { return port_; }

    void stop() override {
        std::call_once(stopped_, [this] {
            service_.stop_streams();
            health_.stop();  // open Watch calls end within HealthService::kWatchPeriod
            server_->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
            server_->Wait();
        });
    }

private:
    GrpcService service_;  // the services outlive server_ (declared first, destroyed last)
    HealthService health_;
    std::unique_ptr<grpc::Server> server_;
    int port_ = 0;
    std::once_flag stopped_;
};

}  // namespace

std::unique_ptr<GrpcFrontend> GrpcFrontend::start(Server& server, const GrpcOptions& opts) {
    return std::make_unique<GrpcFrontendImpl>(server, opts);
}

}  // namespace kiln::serve
