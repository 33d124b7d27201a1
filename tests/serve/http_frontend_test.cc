// The HTTP/REST frontend against a fake Server (fake_server.h), through httplib::Client: every
// route, JSON and binary bodies byte-exact, error statuses and messages, concurrent clients, a
// client that disconnects mid-request, and stop() with requests in flight.
#include "serve/http_frontend.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "fake_server.h"
#include "kiln/error.h"

namespace kiln::serve {
namespace {

using std::string_literals::operator""s;
using testing::FakeServer;

class HttpFrontendTest : public ::testing::Test {
protected:
    void SetUp() override {
        HttpOptions opts;
        opts.host = "127.0.0.1";
        opts.port = 0;
        opts.threads = 32;
        frontend = HttpFrontend::start(server, opts);
        ASSERT_GT(frontend->port(), 0);
    }
    httplib::Client client() {
        httplib::Client c("127.0.0.1", frontend->port());
        c.set_read_timeout(20, 0);
        return c;
    }
    httplib::Result get(const std::string& path) { return client().Get(path.c_str()); }
    httplib::Result post(const std::string& path, const std::string& body, const httplib::Headers& headers = {}) {
        return client().Post(path.c_str(), headers, body, "application/json");
    }

    FakeServer server;  // declared first: outlives the frontend
    std::unique_ptr<HttpFrontend> frontend;
};

/// status and body, for one-line expectations.
std::pair<int, std::string> sb(const httplib::Result& r) {
    if (!r) return {-1, "no response: " + httplib::to_string(r.error())};
    return {r->status, r->body};
}

TEST_F(HttpFrontendTest, Health) {
    EXPECT_EQ(get("/v2/health/live")->status, 200);
    EXPECT_EQ(get("/v2/health/ready")->status, 200);
    server.ready_flag = false;
    EXPECT_EQ(sb(get("/v2/health/ready")), std::make_pair(400, R"({"error":"server is not ready"})"s));
    EXPECT_EQ(get("/v2/models/add_one/ready")->status, 200);
    EXPECT_EQ(get("/v2/models/add_one/versions/1/ready")->status, 200);
    // An unknown model or version is 404 (Triton); a known model that is not ready, 400.
    EXPECT_EQ(sb(get("/v2/models/add_one/versions/2/ready")),
              std::make_pair(404, R"({"error":"model 'add_one' has no version 2"})"s));
    EXPECT_EQ(get("/v2/models/no_such_model/ready")->status, 404);
    EXPECT_EQ(sb(get("/v2/models/loading/ready")), std::make_pair(400, R"({"error":"model 'loading' is not ready"})"s));
}

TEST_F(HttpFrontendTest, MetadataAndConfig) {
    auto r = get("/v2");
    EXPECT_EQ(
        sb(r),
        std::make_pair(200, R"({"name":"kiln","version":"0.1.0","extensions":["binary_tensor_data","statistics"]})"s));
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
    EXPECT_EQ(sb(get("/v2/models/add_one")),
              std::make_pair(200, R"({"name":"add_one","versions":["1"],"platform":"kiln",)"
                                  R"("inputs":[{"name":"x","datatype":"FP32","shape":[-1,2]}],)"
                                  R"("outputs":[{"name":"y","datatype":"FP32","shape":[-1,2]}]})"s));
    EXPECT_EQ(get("/v2/models/add_one/versions/1")->status, 200);
    EXPECT_EQ(sb(get("/v2/models/nope")), std::make_pair(404, R"({"error":"unknown model 'nope'"})"s));
    EXPECT_EQ(sb(get("/v2/models/add_one/versions/2")),
              std::make_pair(404, R"({"error":"model 'add_one' has no version 2"})"s));
    EXPECT_EQ(sb(get("/v2/models/echo/config")), std::make_pair(200, R"({"name":"echo","max_batch_size":8})"s));
    EXPECT_EQ(sb(get("/v2/models/echo/versions/1/config")),
              std::make_pair(200, R"({"name":"echo","max_batch_size":8})"s));
    EXPECT_EQ(get("/v2/models/nope/config")->status, 404);
    // A model name with a URL-escaped character reaches the server decoded.
    EXPECT_EQ(sb(get("/v2/models/no%20pe")), std::make_pair(404, R"({"error":"unknown model 'no pe'"})"s));
}

TEST_F(HttpFrontendTest, InferJson) {
    auto r = post("/v2/models/add_one/infer",
                  R"({"id":"a1","inputs":[{"name":"x","shape":[1,2],"datatype":"FP32","data":[[1.5,-3]]}]})");
    EXPECT_EQ(sb(r), std::make_pair(200, R"({"model_name":"add_one","model_version":"1","id":"a1","outputs":[)"
                                         R"({"name":"y","datatype":"FP32","shape":[1,2],"data":[2.5,-2.0]}]})"s));
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
    EXPECT_FALSE(r->has_header("Inference-Header-Content-Length"));
    InferRequest seen = server.last();
    EXPECT_EQ(seen.model, "add_one");
    EXPECT_EQ(seen.version, "");
    EXPECT_TRUE(seen.arrival.has_value());
    // Versioned URL, INT64 and the request parameters.
    r = post("/v2/models/add_one/versions/1/infer",
             R"({"parameters":{"priority":1,"timeout":1500},"inputs":[{"name":"x","shape":[2],"datatype":"INT64",)"
             R"("data":[9007199254740993,-1]}]})");
    EXPECT_EQ(sb(r),
              std::make_pair(200, R"({"model_name":"add_one","model_version":"1","outputs":[)"
                                  R"({"name":"y","datatype":"INT64","shape":[2],"data":[9007199254740994,0]}]})"s));
    seen = server.last();
    EXPECT_EQ(seen.version, "1");
    EXPECT_EQ(seen.priority, Priority::kRealTime);
    EXPECT_EQ(seen.timeout, std::chrono::microseconds(1500));
}

TEST_F(HttpFrontendTest, InferBinary) {
    // x: FP32 [1,2] = {1, 2.5} as binary; output y requested binary.
    const std::string header =
        R"({"inputs":[{"name":"x","shape":[1,2],"datatype":"FP32","parameters":{"binary_data_size":8}}],)"
        R"("outputs":[{"name":"y","parameters":{"binary_data":true}}]})";
    const std::string body = header + "\x00\x00\x80\x3f\x00\x00\x20\x40"s;
    auto r =
        client().Post("/v2/models/add_one/infer", {{"Inference-Header-Content-Length", std::to_string(header.size())}},
                      body, "application/octet-stream");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const std::string json = R"({"model_name":"add_one","model_version":"1","outputs":[)"
                             R"({"name":"y","datatype":"FP32","shape":[1,2],"parameters":{"binary_data_size":8}}]})";
    EXPECT_EQ(r->get_header_value("Inference-Header-Content-Length"), std::to_string(json.size()));
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/octet-stream");
    EXPECT_EQ(r->body, json + "\x00\x00\x00\x40\x00\x00\x60\x40"s);  // {2, 3.5}
    EXPECT_EQ(server.last().outputs, std::vector<std::string>{"y"});
}

TEST_F(HttpFrontendTest, InferBinaryOutputsByDefaultAndBytes) {
    // tritonclient's default without requested outputs: binary_data_output true. BYTES and BOOL
    // echo back as binary, one output overridden to JSON.
    const std::string header = R"({"parameters":{"binary_data_output":true},"inputs":[)"
                               R"({"name":"s","shape":[2],"datatype":"BYTES","parameters":{"binary_data_size":9}},)"
                               R"({"name":"b","shape":[2],"datatype":"BOOL","data":[true,false]}],)"
                               R"("outputs":[{"name":"s"},{"name":"b","parameters":{"binary_data":false}}]})";
    const std::string body = header +
                             "\x01\x00\x00\x00"
                             "a"
                             "\x00\x00\x00\x00"s;
    auto r =
        client().Post("/v2/models/echo/infer", {{"Inference-Header-Content-Length", std::to_string(header.size())}},
                      body, "application/octet-stream");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const std::string json = R"({"model_name":"echo","model_version":"1","outputs":[)"
                             R"({"name":"s","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":9}},)"
                             R"({"name":"b","datatype":"BOOL","shape":[2],"data":[true,false]}]})";
    EXPECT_EQ(r->get_header_value("Inference-Header-Content-Length"), std::to_string(json.size()));
    EXPECT_EQ(r->body, json +
                           "\x01\x00\x00\x00"
                           "a"
                           "\x00\x00\x00\x00"s);
}

TEST_F(HttpFrontendTest, InferErrors) {
    const std::string x = R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]})";
    EXPECT_EQ(sb(post("/v2/models/nope/infer", x)), std::make_pair(404, R"({"error":"unknown model 'nope'"})"s));
    EXPECT_EQ(sb(post("/v2/models/add_one/versions/7/infer", x)),
              std::make_pair(404, R"({"error":"model 'add_one' has no version 7"})"s));
    EXPECT_EQ(sb(post("/v2/models/full/infer", x)),
              std::make_pair(503, R"({"error":"model 'full': queue full, 4 requests"})"s));
    EXPECT_EQ(sb(post("/v2/models/late/infer", x)),
              std::make_pair(504, R"({"error":"model 'late': timeout passed in the queue"})"s));
    EXPECT_EQ(sb(post("/v2/models/broken/infer", x)), std::make_pair(500, R"({"error":"model 'broken' failed"})"s));
    EXPECT_EQ(
        sb(post("/v2/models/add_one/infer", R"({"inputs":[{"name":"x","shape":[1],"datatype":"INT8","data":[1]}]})")),
        std::make_pair(400, R"({"error":"model 'add_one' input 'x': expected FP32 or INT64"})"s));
    EXPECT_EQ(
        sb(post("/v2/models/add_one/infer", R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32","data":[1]}]})")),
        std::make_pair(400, R"({"error":"input 'x': shape [2] has 2 elements, but \"data\" has 1"})"s));
    auto r = post("/v2/models/add_one/infer", R"({"inputs":[)");
    EXPECT_EQ(r->status, 400);
    EXPECT_NE(r->body.find("malformed JSON in the request"), std::string::npos) << r->body;
    const std::string header =
        R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}}]})";
    EXPECT_EQ(sb(post("/v2/models/add_one/infer", header + "\x01\x02\x03"s,
                      {{"Inference-Header-Content-Length", std::to_string(header.size())}})),
              std::make_pair(400, R"({"error":"truncated binary body: input 'x' has binary_data_size 8 at offset 0 of )"
                                  R"(the binary data, but only 3 bytes remain"})"s));
    EXPECT_EQ(sb(post("/v2/models/add_one/infer", x, {{"Inference-Header-Content-Length", "x1"}})),
              std::make_pair(400, R"({"error":"Inference-Header-Content-Length must be a byte count, got \"x1\""})"s));
    // The failures disturbed nothing.
    EXPECT_EQ(post("/v2/models/add_one/infer", x)->status, 200);
}

TEST_F(HttpFrontendTest, RepositoryAndStatistics) {
    auto r = post("/v2/repository/index", "");
    EXPECT_EQ(sb(r), std::make_pair(200, R"([{"name":"add_one","version":"1","state":"READY"},)"
                                         R"({"name":"loading","state":"UNAVAILABLE","reason":"unloaded"}])"s));
    EXPECT_EQ(sb(post("/v2/repository/index", R"({"ready":true})")),
              std::make_pair(200, R"([{"name":"add_one","version":"1","state":"READY"}])"s));
    EXPECT_EQ(sb(post("/v2/repository/models/echo/load", "")), std::make_pair(200, ""s));
    EXPECT_EQ(sb(post("/v2/repository/models/echo/unload", R"({"parameters":{"unload_dependents":false}})")),
              std::make_pair(200, ""s));
    EXPECT_EQ(server.loads, std::vector<std::string>{"echo"});
    EXPECT_EQ(server.unloads, std::vector<std::string>{"echo"});
    EXPECT_EQ(sb(post("/v2/repository/models/nope/load", "")),
              std::make_pair(404, R"({"error":"unknown model 'nope'"})"s));
    EXPECT_EQ(post("/v2/repository/models/echo/load", R"({"parameters":{"config":"{}"}})")->status, 400);
    EXPECT_EQ(server.loads.size(), 1u);

    const std::string stat =
        R"({"name":"NAME","version":"1","last_inference":1700000000123,"inference_count":6,"execution_count":2,)"
        R"("inference_stats":{"success":{"count":6,"ns":6000},"fail":{"count":0,"ns":0},"queue":{"count":6,"ns":600},)"
        R"("compute_input":{"count":0,"ns":0},"compute_infer":{"count":2,"ns":2000},"compute_output":{"count":0,"ns":0},)"
        R"("cache_hit":{"count":0,"ns":0}},"batch_stats":[{"batch_size":4,"compute_input":{"count":1,"ns":10},)"
        R"("compute_infer":{"count":1,"ns":1000},"compute_output":{"count":1,"ns":20}}]})";
    auto with = [&](const std::string& name) {
        std::string s = stat;
        s.replace(s.find("NAME"), 4, name);
        return R"({"model_stats":[)" + s + "]}";
    };
    EXPECT_EQ(sb(get("/v2/models/stats")), std::make_pair(200, with("add_one")));
    EXPECT_EQ(sb(get("/v2/models/echo/stats")), std::make_pair(200, with("echo")));
    EXPECT_EQ(sb(get("/v2/models/echo/versions/1/stats")), std::make_pair(200, with("echo")));
    EXPECT_EQ(get("/v2/models/nope/stats")->status, 404);
}

TEST_F(HttpFrontendTest, UnknownRoute) {
    EXPECT_EQ(sb(get("/v3/health")), std::make_pair(404, R"({"error":"no route for GET /v3/health"})"s));
    EXPECT_EQ(get("/v2/models/add_one/infer")->status, 404);  // infer is POST only
}

TEST(HttpMetricsFrontend, ServesMetricsOnly) {
    FakeServer server;
    auto metrics = HttpFrontend::start_metrics(server, {"127.0.0.1", 0, 2});
    httplib::Client c("127.0.0.1", metrics->port());
    auto r = c.Get("/metrics");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "# TYPE kiln_requests counter\nkiln_requests 3\n");
    EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain; version=0.0.4");
    EXPECT_EQ(c.Get("/v2/health/live")->status, 404);
    metrics->stop();
    metrics->stop();  // idempotent
}

TEST(HttpFrontendBind, PortInUseIsAnIOError) {
    FakeServer server;
    auto first = HttpFrontend::start(server, {"127.0.0.1", 0, 2});
    try {
        HttpFrontend::start(server, {"127.0.0.1", first->port(), 2});
        FAIL() << "expected kiln::Error";
    } catch (const kiln::Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kIOError);
        EXPECT_NE(e.message().find("cannot listen on 127.0.0.1:" + std::to_string(first->port())), std::string::npos);
    }
}

TEST_F(HttpFrontendTest, ConcurrentClientsEachGetTheirOwnAnswer) {
    constexpr int kClients = 16, kRequests = 25;
    std::vector<std::future<int>> wrong;
    for (int c = 0; c < kClients; ++c)
        wrong.push_back(std::async(std::launch::async, [this, c] {
            httplib::Client cli("127.0.0.1", frontend->port());
            cli.set_keep_alive(true);
            cli.set_tcp_nodelay(true);
            int bad = 0;
            for (int i = 0; i < kRequests; ++i) {
                const int v = c * 1000 + i;
                const std::string id = std::to_string(v);
                auto r =
                    cli.Post("/v2/models/add_one/infer",
                             R"({"id":")" + id + R"(","inputs":[{"name":"x","shape":[1],"datatype":"INT64","data":[)" +
                                 id + "]}]}",
                             "application/json");
                const std::string want = R"({"model_name":"add_one","model_version":"1","id":")" + id +
                                         R"(","outputs":[{"name":"y","datatype":"INT64","shape":[1],"data":[)" +
                                         std::to_string(v + 1) + "]}]}";
                if (!r || r->status != 200 || r->body != want) {
                    if (bad++ == 0) ADD_FAILURE() << "request " << i << ": " << sb(r).first << " " << sb(r).second;
                }
            }
            return bad;
        }));
    for (auto& w : wrong) EXPECT_EQ(w.get(), 0);
}

/// Sends `request` on a raw socket and closes it without reading the answer.
void send_and_hang_up(int port, const std::string& request) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
    close(fd);
}

std::string http_post(const std::string& path, const std::string& body) {
    return "POST " + path +
           " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\n\r\n" + body;
}

TEST_F(HttpFrontendTest, ClientThatDisconnectsMidRequest) {
    const std::string x = R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]})";
    // Gone while the server works on its request: the answer is dropped.
    send_and_hang_up(frontend->port(), http_post("/v2/models/slow/infer", x));
    // Gone in the middle of its body: never reaches the server.
    send_and_hang_up(frontend->port(), http_post("/v2/models/add_one/infer", x).substr(0, 100));
    for (int i = 0; i < 2000 && server.arrived < 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(server.arrived, 1);
    server.release();
    for (int i = 0; i < 2000 && server.answered < 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(server.answered, 1);
    // Others are served as before.
    EXPECT_EQ(sb(post("/v2/models/add_one/infer", x)),
              std::make_pair(200, R"({"model_name":"add_one","model_version":"1","outputs":[)"
                                  R"({"name":"y","datatype":"FP32","shape":[1],"data":[2.0]}]})"s));
}

TEST_F(HttpFrontendTest, StopFinishesRequestsInFlight) {
    const std::string x = R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]})";
    constexpr int kInFlight = 4;
    std::vector<std::future<std::pair<int, std::string>>> answers;
    for (int i = 0; i < kInFlight; ++i)  // half of them on kept-alive connections
        answers.push_back(std::async(std::launch::async, [&, i] {
            httplib::Client c("127.0.0.1", frontend->port());
            c.set_keep_alive(i % 2 == 1);
            return sb(c.Post("/v2/models/slow/infer", x, "application/json"));
        }));
    for (int i = 0; i < 5000 && server.arrived < kInFlight; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_EQ(server.arrived, kInFlight);
    std::thread releaser([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        server.release();
    });
    const auto t0 = std::chrono::steady_clock::now();
    frontend->stop();  // returns once the slow requests are answered
    EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(150));
    releaser.join();
    for (auto& a : answers)
        EXPECT_EQ(a.get(), std::make_pair(200, R"({"model_name":"slow","model_version":"1","outputs":[)"
                                               R"({"name":"y","datatype":"FP32","shape":[1],"data":[2.0]}]})"s));
    EXPECT_FALSE(get("/v2/health/live"));  // no longer accepting
}

}  // namespace
}  // namespace kiln::serve

namespace kiln::serve {
namespace {

TEST(HttpFrontendStop, IdleKeepAliveConnectionDoesNotDelayStop) {
    testing::FakeServer server;
    auto frontend = HttpFrontend::start(server, {"127.0.0.1", 0, 4});
    httplib::Client c("127.0.0.1", frontend->port());
    c.set_keep_alive(true);
    ASSERT_EQ(c.Get("/v2/health/live")->status, 200);
    const auto t0 = std::chrono::steady_clock::now();
    frontend->stop();
    const auto waited = std::chrono::steady_clock::now() - t0;
    EXPECT_LT(waited, std::chrono::seconds(1));
    std::printf("stop() with an idle keep-alive connection: %lld ms\n",
                static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()));
}

}  // namespace
}  // namespace kiln::serve
