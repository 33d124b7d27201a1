#include "serve/grpc_service.h"

#include <cstdio>
#include <utility>

#include <fmt/format.h>
#include <google/protobuf/util/json_util.h>

#include "serve/grpc_infer_convert.h"

namespace kiln::serve {

grpc::Status to_grpc_status(const Failure& failure) {
    grpc::StatusCode code = grpc::StatusCode::INTERNAL;
    switch (failure.code) {
        case Code::kOk: return grpc::Status::OK;
        case Code::kInvalidArgument: code = grpc::StatusCode::INVALID_ARGUMENT; break;
        case Code::kNotFound: code = grpc::StatusCode::NOT_FOUND; break;
        case Code::kUnavailable: code = grpc::StatusCode::UNAVAILABLE; break;
        case Code::kDeadlineExceeded: code = grpc::StatusCode::DEADLINE_EXCEEDED; break;
        case Code::kCancelled: code = grpc::StatusCode::CANCELLED; break;
        case Code::kInternal: code = grpc::StatusCode::INTERNAL; break;
    }
    return {code, failure.message};
}

namespace {

using Reactor = grpc::ServerUnaryReactor;

Reactor* finish(grpc::CallbackServerContext* ctx, const grpc::Status& status) {
    Reactor* r = ctx->DefaultReactor();
    r->Finish(status);
    return r;
}

Reactor* finish(grpc::CallbackServerContext* ctx, const Failure& failure) {
    return finish(ctx, to_grpc_status(failure));
}

Reactor* unimplemented(grpc::CallbackServerContext* ctx, const char* what) {
    return finish(ctx, grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                    fmt::format("{} is not supported by Kiln's server", what)));
}

void fill_tensor_metadata(const TensorMetadata& in,
                          inference::ModelMetadataResponse::TensorMetadata* out) {
    out->set_name(in.name);
    out->set_datatype(in.datatype);
    for (int64_t d : in.shape) out->add_shape(d);
}

void fill_duration(const DurationStat& in, inference::StatisticDuration* out) {
    out->set_count(in.count);
    out->set_ns(in.ns);
}

void fill_statistics(const ModelStatistics& in, inference::ModelStatistics* out) {
    out->set_name(in.name);
    out->set_version(in.version);
    out->set_last_inference(in.last_inference_ms);
    out->set_inference_count(in.inference_count);
    out->set_execution_count(in.execution_count);
    auto* s = out->mutable_inference_stats();
    fill_duration(in.success, s->mutable_success());
    fill_duration(in.fail, s->mutable_fail());
    fill_duration(in.queue, s->mutable_queue());
    fill_duration(in.compute_input, s->mutable_compute_input());
    fill_duration(in.compute_infer, s->mutable_compute_infer());
    fill_duration(in.compute_output, s->mutable_compute_output());
    for (const BatchStat& b : in.batch_stats) {
        auto* o = out->add_batch_stats();
        o->set_batch_size(b.batch_size);
        fill_duration(b.compute_input, o->mutable_compute_input());
        fill_duration(b.compute_infer, o->mutable_compute_infer());
        fill_duration(b.compute_output, o->mutable_compute_output());
    }
}

// Parses the server's Triton config JSON into inference::ModelConfig. Fields the message lacks
// (Kiln's proto is a subset of Triton's) are dropped with a note on stderr rather than failing
// the call: clients such as perf_analyzer need the config to run at all.
Failure parse_config(const std::string& model, const std::string& json,
                     inference::ModelConfig& out) {
    google::protobuf::util::JsonParseOptions strict;
    auto status = google::protobuf::util::JsonStringToMessage(json, &out, strict);
    if (status.ok()) return Failure::none();
    google::protobuf::util::JsonParseOptions lenient;
    lenient.ignore_unknown_fields = true;
    out.Clear();
    auto second = google::protobuf::util::JsonStringToMessage(json, &out, lenient);
    if (!second.ok()) {
        return {Code::kInternal, fmt::format("model '{}': its config does not parse as "
                                             "inference.ModelConfig: {}", model,
                                             std::string(second.message()))};
    }
    std::fprintf(stderr, "kiln serve: model '%s': config fields the gRPC ModelConfig lacks were "
                 "left out: %s\n", model.c_str(), std::string(status.message()).c_str());
    return Failure::none();
}

// Repository load/unload parameters ("config" overrides, "file:" contents) that Kiln cannot honour.
template <typename Request>
Failure check_repository_parameters(const Request& req, const char* action) {
    for (const auto& [name, value] : req.parameters()) {
        if (name == "unload_dependents") continue;  // no ensembles: nothing depends on a model
        return {Code::kInvalidArgument,
                fmt::format("model '{}': {} parameter '{}' is not supported by Kiln (it loads "
                            "models from the repository as they are)", req.model_name(), action,
                            name)};
    }
    return Failure::none();
}

}  // namespace

GrpcService::~GrpcService() {
    std::lock_guard lock(threads_mu_);
    for (auto& w : threads_) w.thread.join();
}

void GrpcService::run_blocking(std::function<void()> work) {
    std::lock_guard lock(threads_mu_);
    std::erase_if(threads_, [](Worker& w) {
        if (!w.done->load()) return false;
        w.thread.join();
        return true;
    });
    auto done = std::make_shared<std::atomic<bool>>(false);
    threads_.push_back({std::thread([work = std::move(work), done] {
                            work();
                            done->store(true);
                        }),
                        done});
}

Reactor* GrpcService::ServerLive(Ctx* ctx, const inference::ServerLiveRequest*,
                                 inference::ServerLiveResponse* resp) {
    resp->set_live(server_.live());
    return finish(ctx, grpc::Status::OK);
}

Reactor* GrpcService::ServerReady(Ctx* ctx, const inference::ServerReadyRequest*,
                                  inference::ServerReadyResponse* resp) {
    resp->set_ready(server_.ready());
    return finish(ctx, grpc::Status::OK);
}

Reactor* GrpcService::ModelReady(Ctx* ctx, const inference::ModelReadyRequest* req,
                                 inference::ModelReadyResponse* resp) {
    resp->set_ready(server_.model_ready(req->name(), req->version()));
    return finish(ctx, grpc::Status::OK);
}

Reactor* GrpcService::ServerMetadata(Ctx* ctx, const inference::ServerMetadataRequest*,
                                     inference::ServerMetadataResponse* resp) {
    serve::ServerMetadata md = server_.metadata();
    resp->set_name(md.name);
    resp->set_version(md.version);
    for (const auto& e : md.extensions) resp->add_extensions(e);
    return finish(ctx, grpc::Status::OK);
}

Reactor* GrpcService::ModelMetadata(Ctx* ctx, const inference::ModelMetadataRequest* req,
                                    inference::ModelMetadataResponse* resp) {
    serve::ModelMetadata md;
    Failure f = server_.model_metadata(req->name(), req->version(), md);
    if (!f.ok()) return finish(ctx, f);
    resp->set_name(md.name);
    for (const auto& v : md.versions) resp->add_versions(v);
    resp->set_platform(md.platform);
    for (const auto& t : md.inputs) fill_tensor_metadata(t, resp->add_inputs());
    for (const auto& t : md.outputs) fill_tensor_metadata(t, resp->add_outputs());
    return finish(ctx, grpc::Status::OK);
}

Reactor* GrpcService::ModelInfer(Ctx* ctx, const inference::ModelInferRequest* req,
                                 inference::ModelInferResponse* resp) {
    InferRequest request;
    request.arrival = std::chrono::steady_clock::now();
    if (Failure f = infer_request_from_grpc(*req, request); !f.ok()) return finish(ctx, f);
    Reactor* reactor = ctx->DefaultReactor();
    // `resp` lives until the reactor is done, i.e. until after Finish below.
    server_.infer(std::move(request), [reactor, resp](Failure failure, InferResponse result) {
        if (failure.ok()) failure = infer_response_to_grpc(result, *resp);
        reactor->Finish(to_grpc_status(failure));
    });
    return reactor;
}

grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
GrpcService::ModelStreamInfer(Ctx*) {
    return streams_.open(server_);
}

Reactor* GrpcService::ModelConfig(Ctx* ctx, const inference::ModelConfigRequest* req,
                                  inference::ModelConfigResponse* resp) {
    std::string json;
    Failure f = server_.model_config_json(req->name(), req->version(), json);
    if (f.ok()) f = parse_config(req->name(), json, *resp->mutable_config());
    return finish(ctx, f);
}

Reactor* GrpcService::ModelStatistics(Ctx* ctx, const inference::ModelStatisticsRequest* req,
                                      inference::ModelStatisticsResponse* resp) {
    std::vector<serve::ModelStatistics> stats;
    Failure f = server_.statistics(req->name(), req->version(), stats);
    if (!f.ok()) return finish(ctx, f);
    for (const auto& s : stats) fill_statistics(s, resp->add_model_stats());
    return finish(ctx, grpc::Status::OK);
}

Reactor* GrpcService::RepositoryIndex(Ctx* ctx, const inference::RepositoryIndexRequest* req,
                                      inference::RepositoryIndexResponse* resp) {
    for (const RepositoryEntry& e : server_.repository_index(req->ready())) {
        auto* m = resp->add_models();
        m->set_name(e.name);
        m->set_version(e.version);
        m->set_state(e.state);
        m->set_reason(e.reason);
    }
    return finish(ctx, grpc::Status::OK);
}

Reactor* GrpcService::RepositoryModelLoad(Ctx* ctx,
                                          const inference::RepositoryModelLoadRequest* req,
                                          inference::RepositoryModelLoadResponse*) {
    if (Failure f = check_repository_parameters(*req, "load"); !f.ok()) return finish(ctx, f);
    Reactor* reactor = ctx->DefaultReactor();
    run_blocking([this, reactor, name = req->model_name()] {
        reactor->Finish(to_grpc_status(server_.load_model(name)));
    });
    return reactor;
}

Reactor* GrpcService::RepositoryModelUnload(Ctx* ctx,
                                            const inference::RepositoryModelUnloadRequest* req,
                                            inference::RepositoryModelUnloadResponse*) {
    if (Failure f = check_repository_parameters(*req, "unload"); !f.ok()) return finish(ctx, f);
    Reactor* reactor = ctx->DefaultReactor();
    run_blocking([this, reactor, name = req->model_name()] {
        reactor->Finish(to_grpc_status(server_.unload_model(name)));
    });
    return reactor;
}

Reactor* GrpcService::SystemSharedMemoryStatus(Ctx* ctx,
                                               const inference::SystemSharedMemoryStatusRequest*,
                                               inference::SystemSharedMemoryStatusResponse*) {
    return unimplemented(ctx, "the system shared-memory extension (SystemSharedMemoryStatus)");
}
Reactor* GrpcService::SystemSharedMemoryRegister(
    Ctx* ctx, const inference::SystemSharedMemoryRegisterRequest*,
    inference::SystemSharedMemoryRegisterResponse*) {
    return unimplemented(ctx, "the system shared-memory extension (SystemSharedMemoryRegister)");
}
Reactor* GrpcService::SystemSharedMemoryUnregister(
    Ctx* ctx, const inference::SystemSharedMemoryUnregisterRequest*,
    inference::SystemSharedMemoryUnregisterResponse*) {
    return unimplemented(ctx, "the system shared-memory extension (SystemSharedMemoryUnregister)");
}
Reactor* GrpcService::CudaSharedMemoryStatus(Ctx* ctx,
                                             const inference::CudaSharedMemoryStatusRequest*,
                                             inference::CudaSharedMemoryStatusResponse*) {
    return unimplemented(ctx, "the CUDA shared-memory extension (CudaSharedMemoryStatus)");
}
Reactor* GrpcService::CudaSharedMemoryRegister(Ctx* ctx,
                                               const inference::CudaSharedMemoryRegisterRequest*,
                                               inference::CudaSharedMemoryRegisterResponse*) {
    return unimplemented(ctx, "the CUDA shared-memory extension (CudaSharedMemoryRegister)");
}
Reactor* GrpcService::CudaSharedMemoryUnregister(
    Ctx* ctx, const inference::CudaSharedMemoryUnregisterRequest*,
    inference::CudaSharedMemoryUnregisterResponse*) {
    return unimplemented(ctx, "the CUDA shared-memory extension (CudaSharedMemoryUnregister)");
}
Reactor* GrpcService::TraceSetting(Ctx* ctx, const inference::TraceSettingRequest*,
                                   inference::TraceSettingResponse*) {
    return unimplemented(ctx, "the trace extension (TraceSetting)");
}
Reactor* GrpcService::LogSettings(Ctx* ctx, const inference::LogSettingsRequest*,
                                  inference::LogSettingsResponse*) {
    return unimplemented(ctx, "the logging extension (LogSettings)");
}

}  // namespace kiln::serve
