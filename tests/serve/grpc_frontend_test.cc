// The KServe v2 gRPC frontend end to end over loopback: a generated client stub against
// GrpcFrontend in front of a fake Server (tests/serve/grpc_fake_server.h).
#include "serve/grpc_frontend.h"

#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <map>
#include <thread>

#include "grpc_fake_server.h"
#include "kiln/error.h"
#include "serve/proto/grpc_service.grpc.pb.h"
#include "serve/proto/health.grpc.pb.h"

namespace kiln::serve {

namespace {

using inference::GRPCInferenceService;
using inference::ModelInferRequest;
using inference::ModelInferResponse;
using grpc_testing::FakeServer;

template <typename T>
void fill(google::protobuf::RepeatedField<T>* field,
          std::initializer_list<std::type_identity_t<T>> values) {
    for (T v : values) field->Add(v);
}

class GrpcFrontendTest : public ::testing::Test {
protected:
    void SetUp() override {
        frontend = GrpcFrontend::start(server, {"127.0.0.1", 0});
        ASSERT_GT(frontend->port(), 0);
        channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(frontend->port()),
                                      grpc::InsecureChannelCredentials());
        stub = GRPCInferenceService::NewStub(channel);
    }

    // A context whose deadline keeps a broken test from hanging.
    static std::unique_ptr<grpc::ClientContext> ctx(int seconds = 20) {
        auto c = std::make_unique<grpc::ClientContext>();
        c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
        return c;
    }

    static ModelInferRequest fp32_request(const std::string& model, std::vector<float> values,
                                          std::vector<int64_t> shape, bool raw = true) {
        ModelInferRequest req;
        req.set_model_name(model);
        req.set_id("req-7");
        auto* in = req.add_inputs();
        in->set_name("INPUT0");
        in->set_datatype("FP32");
        for (int64_t d : shape) in->add_shape(d);
        if (raw) {
            req.add_raw_input_contents(std::string(reinterpret_cast<const char*>(values.data()),
                                                   values.size() * sizeof(float)));
        } else {
            for (float v : values) in->mutable_contents()->add_fp32_contents(v);
        }
        return req;
    }

    static std::vector<float> raw_floats(const ModelInferResponse& resp, int i) {
        const std::string& raw = resp.raw_output_contents(i);
        std::vector<float> out(raw.size() / sizeof(float));
        std::memcpy(out.data(), raw.data(), raw.size());
        return out;
    }

    grpc::Status infer(const ModelInferRequest& req, ModelInferResponse& resp) {
        return stub->ModelInfer(ctx().get(), req, &resp);
    }

    FakeServer server;  // declared first: outlives the frontend
    std::unique_ptr<GrpcFrontend> frontend;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<GRPCInferenceService::Stub> stub;
};

TEST_F(GrpcFrontendTest, Health) {
    inference::ServerLiveResponse live;
    ASSERT_TRUE(stub->ServerLive(ctx().get(), {}, &live).ok());
    EXPECT_TRUE(live.live());
    server.is_live = false;
    ASSERT_TRUE(stub->ServerLive(ctx().get(), {}, &live).ok());
    EXPECT_FALSE(live.live());

    inference::ServerReadyResponse ready;
    server.is_ready = false;
    ASSERT_TRUE(stub->ServerReady(ctx().get(), {}, &ready).ok());
    EXPECT_FALSE(ready.ready());
    server.is_ready = true;
    ASSERT_TRUE(stub->ServerReady(ctx().get(), {}, &ready).ok());
    EXPECT_TRUE(ready.ready());

    inference::ModelReadyRequest mreq;
    inference::ModelReadyResponse mresp;
    mreq.set_name("add_one");
    ASSERT_TRUE(stub->ModelReady(ctx().get(), mreq, &mresp).ok());
    EXPECT_TRUE(mresp.ready());
    mreq.set_version("2");
    ASSERT_TRUE(stub->ModelReady(ctx().get(), mreq, &mresp).ok());
    EXPECT_FALSE(mresp.ready());
    mreq.set_name("nope");
    mreq.set_version("");
    ASSERT_TRUE(stub->ModelReady(ctx().get(), mreq, &mresp).ok());
    EXPECT_FALSE(mresp.ready());
}

// grpc.health.v1.Health (serve/grpc_health.h): the server's readiness for "" and the KServe
// service's name, a model's readiness for its name, NOT_FOUND for any other name.
TEST_F(GrpcFrontendTest, GrpcHealthCheck) {
    using grpc::health::v1::HealthCheckRequest;
    using grpc::health::v1::HealthCheckResponse;
    auto health = grpc::health::v1::Health::NewStub(channel);
    auto check = [&](const std::string& service, HealthCheckResponse::ServingStatus want) {
        HealthCheckRequest req;
        req.set_service(service);
        HealthCheckResponse resp;
        grpc::Status st = health->Check(ctx().get(), req, &resp);
        ASSERT_TRUE(st.ok()) << service << ": " << st.error_message();
        EXPECT_EQ(resp.status(), want) << "service '" << service << "'";
    };
    check("", HealthCheckResponse::SERVING);
    check("inference.GRPCInferenceService", HealthCheckResponse::SERVING);
    check("add_one", HealthCheckResponse::SERVING);
    check("broken", HealthCheckResponse::NOT_SERVING);  // in the repository, failed to load
    server.is_ready = false;
    check("", HealthCheckResponse::NOT_SERVING);
    check("inference.GRPCInferenceService", HealthCheckResponse::NOT_SERVING);
    server.is_ready = true;
    server.is_live = false;
    check("", HealthCheckResponse::NOT_SERVING);
    server.is_live = true;

    HealthCheckRequest req;
    req.set_service("nope");
    HealthCheckResponse resp;
    grpc::Status st = health->Check(ctx().get(), req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_NE(st.error_message().find("'nope'"), std::string::npos) << st.error_message();

}

// Watch: the status at once, then each change; an unknown name is SERVICE_UNKNOWN on an open
// call; the client's cancel ends it; stopping the frontend ends open watches promptly.
TEST_F(GrpcFrontendTest, GrpcHealthWatch) {
    using grpc::health::v1::HealthCheckRequest;
    using grpc::health::v1::HealthCheckResponse;
    auto health = grpc::health::v1::Health::NewStub(channel);
    HealthCheckRequest req;
    HealthCheckResponse resp;
    auto c = ctx();
    auto server_watch = health->Watch(c.get(), req);
    ASSERT_TRUE(server_watch->Read(&resp));
    EXPECT_EQ(resp.status(), HealthCheckResponse::SERVING);
    server.is_ready = false;
    ASSERT_TRUE(server_watch->Read(&resp));
    EXPECT_EQ(resp.status(), HealthCheckResponse::NOT_SERVING);
    server.is_ready = true;
    ASSERT_TRUE(server_watch->Read(&resp));
    EXPECT_EQ(resp.status(), HealthCheckResponse::SERVING);
    c->TryCancel();
    while (server_watch->Read(&resp)) {
    }
    EXPECT_EQ(server_watch->Finish().error_code(), grpc::StatusCode::CANCELLED);

    req.set_service("nope");
    auto c2 = ctx();
    auto unknown_watch = health->Watch(c2.get(), req);
    ASSERT_TRUE(unknown_watch->Read(&resp));
    EXPECT_EQ(resp.status(), HealthCheckResponse::SERVICE_UNKNOWN);

    req.set_service("add_one");
    auto c3 = ctx();
    auto model_watch = health->Watch(c3.get(), req);
    ASSERT_TRUE(model_watch->Read(&resp));
    EXPECT_EQ(resp.status(), HealthCheckResponse::SERVING);
    // Stop with two watches open: they end with UNAVAILABLE well before the shutdown grace (60 s).
    const auto t0 = std::chrono::steady_clock::now();
    frontend->stop();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
    for (auto* w : {unknown_watch.get(), model_watch.get()}) {
        while (w->Read(&resp)) {
        }
        EXPECT_EQ(w->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
    }
}

TEST_F(GrpcFrontendTest, ServerAndModelMetadata) {
    inference::ServerMetadataResponse smd;
    ASSERT_TRUE(stub->ServerMetadata(ctx().get(), {}, &smd).ok());
    EXPECT_EQ(smd.name(), "kiln");
    EXPECT_EQ(smd.version(), "0.1.0");
    ASSERT_EQ(smd.extensions_size(), 3);
    EXPECT_EQ(smd.extensions(1), "statistics");

    inference::ModelMetadataRequest req;
    inference::ModelMetadataResponse md;
    req.set_name("add_one");
    ASSERT_TRUE(stub->ModelMetadata(ctx().get(), req, &md).ok());
    EXPECT_EQ(md.name(), "add_one");
    EXPECT_EQ(md.platform(), "onnxruntime_onnx");
    ASSERT_EQ(md.versions_size(), 1);
    ASSERT_EQ(md.inputs_size(), 1);
    EXPECT_EQ(md.inputs(0).name(), "INPUT0");
    EXPECT_EQ(md.inputs(0).datatype(), "FP32");
    ASSERT_EQ(md.inputs(0).shape_size(), 2);
    EXPECT_EQ(md.inputs(0).shape(0), -1);
    EXPECT_EQ(md.outputs_size(), 2);

    req.set_name("nope");
    grpc::Status s = stub->ModelMetadata(ctx().get(), req, &md);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_EQ(s.error_message(), "unknown model 'nope'");
}

TEST_F(GrpcFrontendTest, ModelConfigFromServerJson) {
    inference::ModelConfigRequest req;
    inference::ModelConfigResponse resp;
    req.set_name("add_one");
    ASSERT_TRUE(stub->ModelConfig(ctx().get(), req, &resp).ok());
    const inference::ModelConfig& c = resp.config();
    EXPECT_EQ(c.name(), "add_one");
    EXPECT_EQ(c.platform(), "onnxruntime_onnx");
    EXPECT_EQ(c.max_batch_size(), 8);
    ASSERT_EQ(c.input_size(), 1);
    EXPECT_EQ(c.input(0).data_type(), inference::TYPE_FP32);
    ASSERT_EQ(c.input(0).dims_size(), 2);
    EXPECT_EQ(c.input(0).dims(0), -1);
    ASSERT_TRUE(c.has_dynamic_batching());
    ASSERT_EQ(c.dynamic_batching().preferred_batch_size_size(), 2);
    EXPECT_EQ(c.dynamic_batching().preferred_batch_size(1), 8);
    EXPECT_EQ(c.dynamic_batching().max_queue_delay_microseconds(), 100u);
    ASSERT_EQ(c.instance_group_size(), 1);
    EXPECT_EQ(c.instance_group(0).count(), 2);
    EXPECT_EQ(c.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_CPU);
    EXPECT_EQ(c.parameters().at("sla_ms").string_value(), "50");

    // A field the message lacks is dropped; the rest still comes through.
    req.set_name("echo");
    ASSERT_TRUE(stub->ModelConfig(ctx().get(), req, &resp).ok());
    EXPECT_EQ(resp.config().name(), "echo");
    EXPECT_EQ(resp.config().max_batch_size(), 8);

    req.set_name("bad_config");
    grpc::Status s = stub->ModelConfig(ctx().get(), req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
    EXPECT_NE(s.error_message().find("model 'bad_config'"), std::string::npos) << s.error_message();

    req.set_name("nope");
    EXPECT_EQ(stub->ModelConfig(ctx().get(), req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(GrpcFrontendTest, InferRawContents) {
    ModelInferRequest req = fp32_request("add_one", {1, 2, 3, 4, 5, 6}, {2, 3});
    req.set_model_version("1");
    ModelInferResponse resp;
    grpc::Status s = infer(req, resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.model_name(), "add_one");
    EXPECT_EQ(resp.model_version(), "1");
    EXPECT_EQ(resp.id(), "req-7");
    ASSERT_EQ(resp.outputs_size(), 2);
    ASSERT_EQ(resp.raw_output_contents_size(), 2);
    EXPECT_EQ(resp.outputs(0).name(), "OUTPUT0");
    EXPECT_EQ(resp.outputs(0).datatype(), "FP32");
    EXPECT_EQ(std::vector<int64_t>(resp.outputs(0).shape().begin(), resp.outputs(0).shape().end()),
              (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(raw_floats(resp, 0), (std::vector<float>{2, 3, 4, 5, 6, 7}));
    EXPECT_EQ(raw_floats(resp, 1), (std::vector<float>{2, 4, 6, 8, 10, 12}));
    // Outputs travel raw only, as Triton sends them.
    EXPECT_FALSE(resp.outputs(0).has_contents());
    EXPECT_EQ(server.last_request().version, "1");
}

TEST_F(GrpcFrontendTest, InferTypedContentsAndRequestedOutputs) {
    ModelInferRequest req = fp32_request("add_one", {0.5f, -1.5f, 10}, {1, 3}, /*raw=*/false);
    req.add_outputs()->set_name("OUTPUT1");
    ModelInferResponse resp;
    grpc::Status s = infer(req, resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(resp.outputs_size(), 1);
    EXPECT_EQ(resp.outputs(0).name(), "OUTPUT1");
    EXPECT_EQ(raw_floats(resp, 0), (std::vector<float>{1, -3, 20}));
    EXPECT_EQ(server.last_request().outputs, std::vector<std::string>{"OUTPUT1"});
}

// Every typed contents field, read by the frontend and echoed back raw by the fake model.
TEST_F(GrpcFrontendTest, InferTypedContentsOfEveryDatatype) {
    ModelInferRequest req;
    req.set_model_name("echo");
    auto add = [&](const char* name, const char* dt) {
        auto* in = req.add_inputs();
        in->set_name(name);
        in->set_datatype(dt);
        in->add_shape(2);
        return in->mutable_contents();
    };
    fill(add("b", "BOOL")->mutable_bool_contents(), {true, false});
    fill(add("i8", "INT8")->mutable_int_contents(), {-128, 127});
    fill(add("i16", "INT16")->mutable_int_contents(), {-300, 300});
    fill(add("i32", "INT32")->mutable_int_contents(), {-70000, 70000});
    fill(add("i64", "INT64")->mutable_int64_contents(), {-(int64_t{1} << 40), 5});
    fill(add("u8", "UINT8")->mutable_uint_contents(), {0, 255});
    fill(add("u16", "UINT16")->mutable_uint_contents(), {1, 65535});
    fill(add("u32", "UINT32")->mutable_uint_contents(), {7, 4000000000u});
    fill(add("u64", "UINT64")->mutable_uint64_contents(), {uint64_t{1} << 63, 9});
    fill(add("f32", "FP32")->mutable_fp32_contents(), {1.25f, -2});
    fill(add("f64", "FP64")->mutable_fp64_contents(), {1e300, -0.5});
    auto* s = add("s", "BYTES")->mutable_bytes_contents();
    *s->Add() = "hello";
    *s->Add() = std::string("\0x\xff", 3);

    ModelInferResponse resp;
    grpc::Status st = infer(req, resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    ASSERT_EQ(resp.outputs_size(), 12);
    std::map<std::string, std::string> raw;
    for (int i = 0; i < resp.outputs_size(); ++i) {
        raw[resp.outputs(i).name()] = resp.raw_output_contents(i);
        EXPECT_EQ(resp.outputs(i).datatype(), req.inputs(i).datatype());
    }
    auto bytes_of = [](auto... v) {
        std::string out;
        for (auto x : {v...}) out.append(reinterpret_cast<const char*>(&x), sizeof(x));
        return out;
    };
    EXPECT_EQ(raw["b"], std::string("\1\0", 2));
    EXPECT_EQ(raw["i8"], bytes_of(int8_t{-128}, int8_t{127}));
    EXPECT_EQ(raw["i16"], bytes_of(int16_t{-300}, int16_t{300}));
    EXPECT_EQ(raw["i32"], bytes_of(int32_t{-70000}, int32_t{70000}));
    EXPECT_EQ(raw["i64"], bytes_of(-(int64_t{1} << 40), int64_t{5}));
    EXPECT_EQ(raw["u8"], bytes_of(uint8_t{0}, uint8_t{255}));
    EXPECT_EQ(raw["u16"], bytes_of(uint16_t{1}, uint16_t{65535}));
    EXPECT_EQ(raw["u32"], bytes_of(uint32_t{7}, uint32_t{4000000000u}));
    EXPECT_EQ(raw["u64"], bytes_of(uint64_t{1} << 63, uint64_t{9}));
    EXPECT_EQ(raw["f32"], bytes_of(1.25f, -2.0f));
    EXPECT_EQ(raw["f64"], bytes_of(1e300, -0.5));
    // BYTES: each element a 4-byte little-endian length, then its bytes.
    EXPECT_EQ(raw["s"], std::string("\5\0\0\0hello\3\0\0\0\0x\xff", 16));
}

TEST_F(GrpcFrontendTest, InferRawBytesAndFp16) {
    ModelInferRequest req;
    req.set_model_name("echo");
    auto* s = req.add_inputs();
    s->set_name("s");
    s->set_datatype("BYTES");
    s->add_shape(1);
    s->add_shape(3);
    req.add_raw_input_contents(std::string("\2\0\0\0ab\0\0\0\0\1\0\0\0z", 15));
    auto* h = req.add_inputs();
    h->set_name("h");
    h->set_datatype("FP16");
    h->add_shape(2);
    req.add_raw_input_contents(std::string("\x00\x3c\x00\xc0", 4));  // 1.0, -2.0

    ModelInferResponse resp;
    grpc::Status st = infer(req, resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    InferRequest seen = server.last_request();
    ASSERT_EQ(seen.inputs.size(), 2u);
    const Tensor& t = seen.inputs[0].tensor;
    ASSERT_EQ(t.dtype(), DType::kString);
    EXPECT_EQ(t.shape(), (Shape{1, 3}));
    EXPECT_EQ(t.data_as<std::string>()[0], "ab");
    EXPECT_EQ(t.data_as<std::string>()[1], "");
    EXPECT_EQ(t.data_as<std::string>()[2], "z");
    EXPECT_EQ(seen.inputs[1].tensor.dtype(), DType::kFloat16);
    EXPECT_EQ(resp.raw_output_contents(0), req.raw_input_contents(0));
    EXPECT_EQ(resp.raw_output_contents(1), req.raw_input_contents(1));
    EXPECT_EQ(resp.outputs(1).datatype(), "FP16");
}

TEST_F(GrpcFrontendTest, InferParameters) {
    ModelInferRequest req = fp32_request("add_one", {1, 2, 3}, {1, 3});
    ModelInferResponse resp;
    ASSERT_TRUE(infer(req, resp).ok());
    EXPECT_FALSE(server.last_request().priority.has_value());
    EXPECT_FALSE(server.last_request().timeout.has_value());
    EXPECT_TRUE(server.last_request().arrival.has_value());
    EXPECT_EQ(server.last_request().id, "req-7");

    (*req.mutable_parameters())["priority"].set_uint64_param(1);  // tritonclient's form
    (*req.mutable_parameters())["timeout"].set_int64_param(1500);
    (*req.mutable_parameters())["custom"].set_string_param("left to the model");
    ASSERT_TRUE(infer(req, resp).ok());
    EXPECT_EQ(server.last_request().priority, Priority::kRealTime);
    EXPECT_EQ(server.last_request().timeout, std::chrono::microseconds(1500));

    (*req.mutable_parameters())["priority"].set_int64_param(2);
    ASSERT_TRUE(infer(req, resp).ok());
    EXPECT_EQ(server.last_request().priority, Priority::kBestEffort);

    (*req.mutable_parameters())["priority"].set_uint64_param(0);
    (*req.mutable_parameters())["timeout"].set_uint64_param(0);
    ASSERT_TRUE(infer(req, resp).ok());
    EXPECT_FALSE(server.last_request().priority.has_value());
    EXPECT_FALSE(server.last_request().timeout.has_value());
}

// Gives the request's one input a new datatype and shape, with no data.
void retype(ModelInferRequest& r, const char* datatype, std::vector<int64_t> shape) {
    r.clear_raw_input_contents();
    auto* in = r.mutable_inputs(0);
    in->set_datatype(datatype);
    in->clear_shape();
    for (int64_t d : shape) in->add_shape(d);
}

// The frontend's own checks: answered INVALID_ARGUMENT without reaching the server.
TEST_F(GrpcFrontendTest, MalformedRequestsAreInvalidArgument) {
    struct Case {
        std::string name;
        std::function<void(ModelInferRequest&)> edit;
        std::vector<std::string> message_parts;
    };
    std::vector<Case> cases = {
        {"short raw", [](ModelInferRequest& r) { r.mutable_raw_input_contents(0)->resize(20); },
         {"model 'add_one': input 'INPUT0' (FP32 [2,3])", "expected 24 bytes", "got 20"}},
        {"raw count", [](ModelInferRequest& r) { r.add_raw_input_contents("xx"); },
         {"raw_input_contents has 2 entries for 1 inputs"}},
        {"datatype", [](ModelInferRequest& r) { r.mutable_inputs(0)->set_datatype("FP33"); },
         {"input 'INPUT0'", "unknown datatype 'FP33'"}},
        {"negative dim", [](ModelInferRequest& r) { r.mutable_inputs(0)->set_shape(0, -2); },
         {"negative dimension -2"}},
        {"typed count",
         [](ModelInferRequest& r) {
             r.clear_raw_input_contents();
             fill(r.mutable_inputs(0)->mutable_contents()->mutable_fp32_contents(), {1, 2, 3});
         },
         {"input 'INPUT0'", "expected 6 values in fp32_contents, got 3"}},
        {"wrong field",
         [](ModelInferRequest& r) {
             r.clear_raw_input_contents();
             fill(r.mutable_inputs(0)->mutable_contents()->mutable_int64_contents(), {1, 2});
         },
         {"FP32 values belong in fp32_contents, got 2 values in int64_contents"}},
        {"no data", [](ModelInferRequest& r) { r.clear_raw_input_contents(); },
         {"expected 6 values in fp32_contents, got 0"}},
        {"mixed",
         [](ModelInferRequest& r) {
             r.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1);
         },
         {"typed contents while the request carries raw_input_contents"}},
        {"negative priority",
         [](ModelInferRequest& r) { (*r.mutable_parameters())["priority"].set_int64_param(-1); },
         {"parameter 'priority' must not be negative, got -1"}},
        {"string timeout",
         [](ModelInferRequest& r) { (*r.mutable_parameters())["timeout"].set_string_param("1s"); },
         {"parameter 'timeout' must be an integer"}},
        {"sequence",
         [](ModelInferRequest& r) { (*r.mutable_parameters())["sequence_id"].set_int64_param(4); },
         {"parameter 'sequence_id'", "no sequence batching"}},
        {"duplicate input", [](ModelInferRequest& r) {
             *r.add_inputs() = r.inputs(0);
             r.add_raw_input_contents(r.raw_input_contents(0));
         },
         {"input 'INPUT0' is given twice"}},
        {"no model", [](ModelInferRequest& r) { r.clear_model_name(); }, {"no model_name"}},
        {"int8 range",
         [](ModelInferRequest& r) {
             retype(r, "INT8", {2});
             fill(r.mutable_inputs(0)->mutable_contents()->mutable_int_contents(), {1, 300});
         },
         {"input 'INPUT0' (INT8 [2])", "value 300 at index 1 of int_contents is out of range"}},
        {"fp16 typed",
         [](ModelInferRequest& r) {
             retype(r, "FP16", {1});
             fill(r.mutable_inputs(0)->mutable_contents()->mutable_fp32_contents(), {1});
         },
         {"FP16 has no typed contents field; send it in raw_input_contents"}},
        {"bytes cut in a length",
         [](ModelInferRequest& r) {
             retype(r, "BYTES", {2});
             r.add_raw_input_contents(std::string("\1\0\0\0a\1\0", 7));
         },
         {"raw contents end inside the 4-byte length of element 1"}},
        {"bytes cut in an element",
         [](ModelInferRequest& r) {
             retype(r, "BYTES", {1});
             r.add_raw_input_contents(std::string("\5\0\0\0ab", 6));
         },
         {"element 0 claims 5 bytes but only 2 remain"}},
        {"bytes count",
         [](ModelInferRequest& r) {
             retype(r, "BYTES", {3});
             r.add_raw_input_contents(std::string("\1\0\0\0a", 5));
         },
         {"expected 3 length-prefixed elements in raw_input_contents, got 1"}},
        {"classification",
         [](ModelInferRequest& r) {
             auto* o = r.add_outputs();
             o->set_name("OUTPUT0");
             (*o->mutable_parameters())["classification"].set_int64_param(3);
         },
         {"output 'OUTPUT0': classification outputs are not supported"}},
    };
    int before = server.received;
    for (const Case& c : cases) {
        ModelInferRequest req = fp32_request("add_one", {1, 2, 3, 4, 5, 6}, {2, 3});
        c.edit(req);
        ModelInferResponse resp;
        grpc::Status s = infer(req, resp);
        EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.name;
        for (const auto& part : c.message_parts) {
            EXPECT_NE(s.error_message().find(part), std::string::npos)
                << c.name << ": '" << s.error_message() << "' lacks '" << part << "'";
        }
    }
    EXPECT_EQ(server.received, before);
}

// The server's failures keep their class and message.
TEST_F(GrpcFrontendTest, ServerFailuresMapToStatusCodes) {
    struct Case {
        std::string model;
        grpc::StatusCode code;
        std::string message;
    };
    for (const Case& c : std::vector<Case>{
             {"nope", grpc::StatusCode::NOT_FOUND, "unknown model 'nope'"},
             {"failing", grpc::StatusCode::INTERNAL, "model 'failing': the kernel failed"},
             {"full", grpc::StatusCode::UNAVAILABLE, "model 'full': the queue is full (4)"},
             {"expired", grpc::StatusCode::DEADLINE_EXCEEDED, "model 'expired': timed out in the queue"},
         }) {
        ModelInferResponse resp;
        grpc::Status s = infer(fp32_request(c.model, {1, 2, 3}, {3}), resp);
        EXPECT_EQ(s.error_code(), c.code) << c.model;
        EXPECT_EQ(s.error_message(), c.message);
    }
    ModelInferRequest req;
    req.set_model_name("add_one");
    auto* in = req.add_inputs();
    in->set_name("INPUT0");
    in->set_datatype("INT64");
    in->add_shape(1);
    in->mutable_contents()->add_int64_contents(3);
    ModelInferResponse resp;
    grpc::Status s = infer(req, resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(s.error_message(), "model 'add_one': input 'INPUT0': expected FP32, got i64");
}

TEST_F(GrpcFrontendTest, Statistics) {
    inference::ModelStatisticsRequest req;
    inference::ModelStatisticsResponse resp;
    ASSERT_TRUE(stub->ModelStatistics(ctx().get(), req, &resp).ok());
    ASSERT_EQ(resp.model_stats_size(), 2);
    req.set_name("add_one");
    resp.Clear();
    ASSERT_TRUE(stub->ModelStatistics(ctx().get(), req, &resp).ok());
    ASSERT_EQ(resp.model_stats_size(), 1);
    const inference::ModelStatistics& m = resp.model_stats(0);
    EXPECT_EQ(m.name(), "add_one");
    EXPECT_EQ(m.version(), "1");
    EXPECT_EQ(m.last_inference(), 1700000000000u);
    EXPECT_EQ(m.inference_count(), 12u);
    EXPECT_EQ(m.execution_count(), 3u);
    EXPECT_EQ(m.inference_stats().success().count(), 12u);
    EXPECT_EQ(m.inference_stats().queue().ns(), 3400u);
    EXPECT_EQ(m.inference_stats().compute_infer().ns(), 9000u);
    ASSERT_EQ(m.batch_stats_size(), 1);
    EXPECT_EQ(m.batch_stats(0).batch_size(), 4u);
    EXPECT_EQ(m.batch_stats(0).compute_infer().count(), 3u);
    req.set_name("nope");
    EXPECT_EQ(stub->ModelStatistics(ctx().get(), req, &resp).error_code(),
              grpc::StatusCode::NOT_FOUND);
}

TEST_F(GrpcFrontendTest, Repository) {
    inference::RepositoryIndexRequest ireq;
    inference::RepositoryIndexResponse index;
    ASSERT_TRUE(stub->RepositoryIndex(ctx().get(), ireq, &index).ok());
    ASSERT_EQ(index.models_size(), 2);
    EXPECT_EQ(index.models(1).name(), "broken");
    EXPECT_EQ(index.models(1).state(), "UNAVAILABLE");
    EXPECT_EQ(index.models(1).reason(), "compile error: x");
    ireq.set_ready(true);
    ASSERT_TRUE(stub->RepositoryIndex(ctx().get(), ireq, &index).ok());
    EXPECT_EQ(index.models_size(), 1);

    inference::RepositoryModelLoadRequest load;
    inference::RepositoryModelLoadResponse loaded;
    load.set_model_name("add_one");
    grpc::Status s = stub->RepositoryModelLoad(ctx().get(), load, &loaded);
    ASSERT_TRUE(s.ok()) << s.error_message();
    load.set_model_name("nope");
    s = stub->RepositoryModelLoad(ctx().get(), load, &loaded);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_EQ(s.error_message(), "unknown model 'nope'");
    load.set_model_name("echo");
    (*load.mutable_parameters())["config"].set_string_param("{}");
    s = stub->RepositoryModelLoad(ctx().get(), load, &loaded);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("parameter 'config' is not supported"), std::string::npos);

    inference::RepositoryModelUnloadRequest unload;
    inference::RepositoryModelUnloadResponse unloaded;
    unload.set_model_name("add_one");
    (*unload.mutable_parameters())["unload_dependents"].set_bool_param(true);
    ASSERT_TRUE(stub->RepositoryModelUnload(ctx().get(), unload, &unloaded).ok());
    EXPECT_EQ(server.loads(), (std::vector<std::string>{"add_one", "-add_one"}));
}

TEST_F(GrpcFrontendTest, UnsupportedExtensionsAreUnimplemented) {
    std::vector<std::pair<grpc::Status, std::string>> calls;
    {
        inference::SystemSharedMemoryStatusResponse r;
        calls.emplace_back(stub->SystemSharedMemoryStatus(ctx().get(), {}, &r), "shared-memory");
    }
    {
        inference::SystemSharedMemoryRegisterResponse r;
        calls.emplace_back(stub->SystemSharedMemoryRegister(ctx().get(), {}, &r), "shared-memory");
    }
    {
        inference::SystemSharedMemoryUnregisterResponse r;
        calls.emplace_back(stub->SystemSharedMemoryUnregister(ctx().get(), {}, &r), "shared-memory");
    }
    {
        inference::CudaSharedMemoryStatusResponse r;
        calls.emplace_back(stub->CudaSharedMemoryStatus(ctx().get(), {}, &r), "CUDA shared-memory");
    }
    {
        inference::CudaSharedMemoryRegisterResponse r;
        calls.emplace_back(stub->CudaSharedMemoryRegister(ctx().get(), {}, &r), "CUDA shared-memory");
    }
    {
        inference::CudaSharedMemoryUnregisterResponse r;
        calls.emplace_back(stub->CudaSharedMemoryUnregister(ctx().get(), {}, &r),
                           "CUDA shared-memory");
    }
    {
        inference::TraceSettingResponse r;
        calls.emplace_back(stub->TraceSetting(ctx().get(), {}, &r), "trace");
    }
    {
        inference::LogSettingsResponse r;
        calls.emplace_back(stub->LogSettings(ctx().get(), {}, &r), "logging");
    }
    for (const auto& [s, what] : calls) {
        EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << what;
        EXPECT_NE(s.error_message().find(what), std::string::npos) << s.error_message();
        EXPECT_NE(s.error_message().find("not supported by Kiln"), std::string::npos);
    }
}

// Sends `n` slow requests at once through the stub's callback API; returns their statuses.
std::vector<grpc::Status> infer_many(GRPCInferenceService::Stub& stub, int n) {
    struct Call {
        grpc::ClientContext ctx;
        ModelInferRequest req;
        ModelInferResponse resp;
        std::promise<grpc::Status> done;
    };
    std::vector<std::unique_ptr<Call>> calls;
    for (int i = 0; i < n; ++i) {
        auto c = std::make_unique<Call>();
        c->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
        c->req.set_model_name("slow");
        c->req.set_id(std::to_string(i));
        auto* in = c->req.add_inputs();
        in->set_name("INPUT0");
        in->set_datatype("FP32");
        in->add_shape(1);
        in->mutable_contents()->add_fp32_contents(static_cast<float>(i));
        stub.async()->ModelInfer(&c->ctx, &c->req, &c->resp,
                                 [c = c.get()](grpc::Status s) { c->done.set_value(s); });
        calls.push_back(std::move(c));
    }
    std::vector<grpc::Status> out;
    for (int i = 0; i < n; ++i) {
        grpc::Status s = calls[i]->done.get_future().get();
        if (s.ok()) {
            // Each call gets its own answer: OUTPUT0 = i + 1, id echoed.
            float y;
            std::memcpy(&y, calls[i]->resp.raw_output_contents(0).data(), 4);
            if (y != i + 1 || calls[i]->resp.id() != std::to_string(i)) {
                s = grpc::Status(grpc::StatusCode::DATA_LOSS, "wrong answer for call " + std::to_string(i));
            }
        }
        out.push_back(s);
    }
    return out;
}

// ModelInfer holds no thread while the model runs: 64 calls of 200 ms each are all in the server
// at once and finish together.
TEST_F(GrpcFrontendTest, ConcurrentCallsRunTogether) {
    server.slow_ms = 300;
    auto t0 = std::chrono::steady_clock::now();
    std::vector<grpc::Status> statuses = infer_many(*stub, 64);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const auto& s : statuses) EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(server.max_in_flight, 64);
    EXPECT_LT(seconds, 5.0);  // serialized: 19 s
}

// stop() lets calls in flight finish with their results, then refuses new ones.
TEST_F(GrpcFrontendTest, StopFinishesCallsInFlight) {
    server.slow_ms = 500;
    auto pending = std::async(std::launch::async, [&] { return infer_many(*stub, 8); });
    while (server.received < 8) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    frontend->stop();
    EXPECT_EQ(server.in_flight, 0);  // stop() returned only after every call was answered
    for (const auto& s : pending.get()) EXPECT_TRUE(s.ok()) << s.error_message();
    frontend->stop();  // idempotent

    ModelInferResponse resp;
    auto c = ctx(2);
    grpc::Status s = stub->ModelInfer(c.get(), fp32_request("add_one", {1}, {1}), &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

// A client that gives up mid-request: its call ends at its deadline; the server's late answer
// is dropped without harm, and the frontend goes on serving and stops cleanly.
TEST_F(GrpcFrontendTest, ClientGoneMidRequest) {
    server.slow_ms = 300;
    grpc::ClientContext c;
    c.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(50));
    ModelInferResponse resp;
    grpc::Status s = stub->ModelInfer(&c, fp32_request("slow", {1}, {1}), &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
    while (server.in_flight > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_TRUE(infer(fp32_request("add_one", {1}, {1}), resp).ok());
    EXPECT_EQ(raw_floats(resp, 0), std::vector<float>{2});
    frontend->stop();
}

TEST_F(GrpcFrontendTest, StreamInfer) {
    auto c = ctx();
    auto stream = stub->ModelStreamInfer(c.get());
    for (const char* id : {"a", "b", "c"}) {
        ModelInferRequest req = fp32_request("add_one", {1, 2, 3}, {3});
        req.set_id(id);
        ASSERT_TRUE(stream->Write(req));
    }
    ModelInferRequest bad = fp32_request("add_one", {1, 2, 3}, {3});
    bad.set_id("bad");
    bad.mutable_inputs(0)->set_datatype("INT32");
    ASSERT_TRUE(stream->Write(bad));
    ModelInferRequest failing = fp32_request("failing", {1}, {1});
    failing.set_id("failing");
    ASSERT_TRUE(stream->Write(failing));
    stream->WritesDone();

    std::map<std::string, inference::ModelStreamInferResponse> got;
    inference::ModelStreamInferResponse r;
    while (stream->Read(&r)) got[r.infer_response().id()] = r;
    grpc::Status s = stream->Finish();
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(got.size(), 5u);
    for (const char* id : {"a", "b", "c"}) {
        EXPECT_EQ(got[id].error_message(), "");
        EXPECT_EQ(raw_floats(got[id].infer_response(), 0), (std::vector<float>{2, 3, 4}));
    }
    EXPECT_EQ(got["bad"].error_message(), "model 'add_one': input 'INPUT0': expected FP32, got i32");
    EXPECT_EQ(got["failing"].error_message(), "model 'failing': the kernel failed");
}

// An idle open stream does not hold stop(); a stream with a request in flight gets its answer.
TEST_F(GrpcFrontendTest, StopEndsStreams) {
    server.slow_ms = 300;
    auto idle_ctx = ctx();
    auto idle = stub->ModelStreamInfer(idle_ctx.get());
    auto busy_ctx = ctx();
    auto busy = stub->ModelStreamInfer(busy_ctx.get());
    ModelInferRequest req = fp32_request("slow", {4}, {1});
    ASSERT_TRUE(busy->Write(req));
    while (server.received < 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));

    auto t0 = std::chrono::steady_clock::now();
    frontend->stop();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));

    inference::ModelStreamInferResponse r;
    ASSERT_TRUE(busy->Read(&r));
    EXPECT_EQ(r.error_message(), "");
    EXPECT_EQ(raw_floats(r.infer_response(), 0), std::vector<float>{5});
    EXPECT_FALSE(busy->Read(&r));
    EXPECT_FALSE(idle->Read(&r));
    EXPECT_EQ(idle->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST(GrpcFrontendStart, PortInUseIsAnIOError) {
    FakeServer server;
    auto first = GrpcFrontend::start(server, {"127.0.0.1", 0});
    try {
        auto second = GrpcFrontend::start(server, {"127.0.0.1", first->port()});
        FAIL() << "bound a port that is in use";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kIOError);
        EXPECT_NE(e.message().find("127.0.0.1:" + std::to_string(first->port())), std::string::npos);
    }
}

}  // namespace
}  // namespace kiln::serve
