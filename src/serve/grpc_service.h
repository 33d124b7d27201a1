// GrpcService: inference.GRPCInferenceService over a serve::Server, on gRPC's callback API (no
// thread waits on a model: ModelInfer finishes from Server::infer's callback). Repository load and
// unload block until the model is ready, so they run on their own threads, never on gRPC's.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "serve/grpc_stream_infer.h"
#include "serve/proto/grpc_service.grpc.pb.h"
#include "serve/server.h"

namespace kiln::serve {

/// The gRPC status of a server Failure (kInvalidArgument -> INVALID_ARGUMENT, ...), message kept.
grpc::Status to_grpc_status(const Failure& failure);

class GrpcService final : public inference::GRPCInferenceService::CallbackService {
public:
    explicit GrpcService(Server& server) : server_(server) {}
    /// Joins the load/unload threads (call after the grpc::Server has shut down).
    ~GrpcService() override;
    /// Ends idle streams and makes new ones UNAVAILABLE (before the grpc::Server shuts down:
    /// an open stream would hold its shutdown).
    void stop_streams() { streams_.stop_all(); }
    GrpcService(const GrpcService&) = delete;
    GrpcService& operator=(const GrpcService&) = delete;

    using Ctx = grpc::CallbackServerContext;
    using Reactor = grpc::ServerUnaryReactor;

    Reactor* ServerLive(Ctx*, const inference::ServerLiveRequest*,
                        inference::ServerLiveResponse*) override;
    Reactor* ServerReady(Ctx*, const inference::ServerReadyRequest*,
                         inference::ServerReadyResponse*) override;
    Reactor* ModelReady(Ctx*, const inference::ModelReadyRequest*,
                        inference::ModelReadyResponse*) override;
    Reactor* ServerMetadata(Ctx*, const inference::ServerMetadataRequest*,
                            inference::ServerMetadataResponse*) override;
    Reactor* ModelMetadata(Ctx*, const inference::ModelMetadataRequest*,
                           inference::ModelMetadataResponse*) override;
    Reactor* ModelInfer(Ctx*, const inference::ModelInferRequest*,
                        inference::ModelInferResponse*) override;
    grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
    ModelStreamInfer(Ctx*) override;
    Reactor* ModelConfig(Ctx*, const inference::ModelConfigRequest*,
                         inference::ModelConfigResponse*) override;
    Reactor* ModelStatistics(Ctx*, const inference::ModelStatisticsRequest*,
                             inference::ModelStatisticsResponse*) override;
    Reactor* RepositoryIndex(Ctx*, const inference::RepositoryIndexRequest*,
                             inference::RepositoryIndexResponse*) override;
    Reactor* RepositoryModelLoad(Ctx*, const inference::RepositoryModelLoadRequest*,
                                 inference::RepositoryModelLoadResponse*) override;
    Reactor* RepositoryModelUnload(Ctx*, const inference::RepositoryModelUnloadRequest*,
                                   inference::RepositoryModelUnloadResponse*) override;

    // Extensions Kiln does not implement: UNIMPLEMENTED saying so.
    Reactor* SystemSharedMemoryStatus(Ctx*, const inference::SystemSharedMemoryStatusRequest*,
                                      inference::SystemSharedMemoryStatusResponse*) override;
    Reactor* SystemSharedMemoryRegister(Ctx*, const inference::SystemSharedMemoryRegisterRequest*,
                                        inference::SystemSharedMemoryRegisterResponse*) override;
    Reactor* SystemSharedMemoryUnregister(Ctx*,
                                          const inference::SystemSharedMemoryUnregisterRequest*,
                                          inference::SystemSharedMemoryUnregisterResponse*) override;
    Reactor* CudaSharedMemoryStatus(Ctx*, const inference::CudaSharedMemoryStatusRequest*,
                                    inference::CudaSharedMemoryStatusResponse*) override;
    Reactor* CudaSharedMemoryRegister(Ctx*, const inference::CudaSharedMemoryRegisterRequest*,
                                      inference::CudaSharedMemoryRegisterResponse*) override;
    Reactor* CudaSharedMemoryUnregister(Ctx*, const inference::CudaSharedMemoryUnregisterRequest*,
                                        inference::CudaSharedMemoryUnregisterResponse*) override;
    Reactor* TraceSetting(Ctx*, const inference::TraceSettingRequest*,
                          inference::TraceSettingResponse*) override;
    Reactor* LogSettings(Ctx*, const inference::LogSettingsRequest*,
                         inference::LogSettingsResponse*) override;

private:
    /// Runs `work` (which finishes its call) on a thread of its own.
    void run_blocking(std::function<void()> work);

    Server& server_;
    StreamRegistry streams_;
    struct Worker {
        std::thread thread;
        std::shared_ptr<std::atomic<bool>> done;
    };
    std::mutex threads_mu_;
    std::vector<Worker> threads_;  // joined when done (at the next run_blocking) or at exit
};

}  // namespace kiln::serve
