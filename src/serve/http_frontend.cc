// HttpFrontend over cpp-httplib: the KServe v2 HTTP/REST routes in front of a serve::Server.
//
// httplib serves each connection on one thread of its pool for as long as the connection is
// kept alive, so the pool is sized for many concurrent clients rather than for cores. An infer
// handler queues the request with Server::infer and waits for its callback on that thread;
// the server's own threads do the work. A client that goes away mid-request costs nothing but
// the wait: the answer is written to a closed socket (MSG_NOSIGNAL) and dropped.
#include "serve/http_frontend.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

#include "kiln/error.h"
#include "serve/connection_shutdown.h"
#include "serve/kserve_infer_request.h"
#include "serve/kserve_infer_response.h"
#include "serve/kserve_json.h"

namespace kiln::serve {
namespace {

constexpr const char* kJson = "application/json";

// Model name and optional version, as a regex prefix: matches[1] the name, matches[2] the
// version ("" when the URL has no /versions/ part).
#define KILN_MODEL_URL R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)"

int default_threads() {
    const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    return static_cast<int>(std::max(128u, 8 * hw));
}

constexpr const char* kRepositoryActionUrl = R"(/v2/repository/models/([^/]+)/(load|unload))";

void reply_error(httplib::Response& res, const Failure& f) {
    res.status = kserve::http_status(f.code);
    res.set_content(kserve::error_json(f.message), kJson);
}

void reply_json(httplib::Response& res, std::string body) {
    res.status = 200;
    res.set_content(std::move(body), kJson);
}

/// 200 when `ok`, else 400 with `why` (Triton answers "not ready" with 400).
void reply_health(httplib::Response& res, bool ok, const std::string& why) {
    if (ok)
        res.status = 200;
    else
        reply_error(res, {Code::kInvalidArgument, why});
}

/// The answer of one Server::infer call, waited for by the handler thread.
struct PendingInfer {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
    Failure failure;
    InferResponse response;
};

/// httplib::Server with a listen backlog for many clients: libcpp-httplib is built with a
/// backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG), so clients connecting at once beyond it got
/// their connections dropped. Calling listen() again on the bound socket raises it (Linux).
class HttplibServer : public httplib::Server {
public:
    void raise_backlog(int backlog) { ::listen(svr_sock_, backlog); }
};

class HttpFrontendImpl final : public HttpFrontend {
public:
    explicit HttpFrontendImpl(Server& server) : server_(server) {}
    ~HttpFrontendImpl() override { stop(); }

    void add_api_routes();
    void add_metrics_route();
    void listen(const HttpOptions& opts, const char* what);

    int port() const override { return port_; }
    void stop() override {
        std::lock_guard<std::mutex> lock(stop_mutex_);
        http_.stop();
        if (port_ > 0)  // idle kept-alive connections end now, not after the keep-alive timeout
            shut_down_idle_connections(port_, [this](const std::string& host, int port) {
                std::lock_guard<std::mutex> lock(busy_mutex_);
                return busy_.count({host, port}) > 0;
            });
        if (thread_.joinable()) thread_.join();
    }

private:
    void infer(const httplib::Request& req, httplib::Response& res);
    void repository_action(const std::string& name, bool load, const std::string& body, httplib::Response& res);
    bool bodyless_post(const httplib::Request& req, httplib::Response& res);

    Server& server_;
    HttplibServer http_;
    std::thread thread_;
    std::mutex stop_mutex_;
    // The peers (host, port) with a request being handled: from routing to the logger, which
    // httplib calls once the response is written.
    std::mutex busy_mutex_;
    std::multiset<std::pair<std::string, int>> busy_;
    int port_ = 0;
};

void HttpFrontendImpl::infer(const httplib::Request& req, httplib::Response& res) {
    const auto arrival = std::chrono::steady_clock::now();
    std::optional<size_t> header_length;
    if (req.has_header("Inference-Header-Content-Length")) {
        size_t n = 0;
        if (Failure f = kserve::parse_header_length(req.get_header_value("Inference-Header-Content-Length"), n);
            !f.ok())
            return reply_error(res, f);
        header_length = n;
    }
    kserve::ParsedInferRequest parsed;
    if (Failure f = kserve::parse_infer_request(req.body, header_length, parsed); !f.ok()) return reply_error(res, f);
    parsed.request.model = req.matches[1];
    parsed.request.version = req.matches[2];
    parsed.request.arrival = arrival;
    parsed.request.caller_waits = true;  // this thread waits for the answer below

    auto pending = std::make_shared<PendingInfer>();
    server_.infer(std::move(parsed.request), [pending](Failure failure, InferResponse response) {
        std::lock_guard<std::mutex> lock(pending->mutex);
        pending->failure = std::move(failure);
        pending->response = std::move(response);
        pending->done = true;
        pending->cv.notify_one();
    });
    std::unique_lock<std::mutex> lock(pending->mutex);
    pending->cv.wait(lock, [&] { return pending->done; });
    if (!pending->failure.ok()) return reply_error(res, pending->failure);

    kserve::EncodedResponse encoded;
    if (Failure f = kserve::write_infer_response(pending->response, parsed.encoding, encoded); !f.ok())
        return reply_error(res, f);
    res.status = 200;
    if (encoded.header_length) {
        res.set_header("Inference-Header-Content-Length", std::to_string(*encoded.header_length));
        res.set_content(std::move(encoded.body), "application/octet-stream");
    } else {
        res.set_content(std::move(encoded.body), kJson);
    }
}

void HttpFrontendImpl::add_api_routes() {
    using httplib::Request;
    using httplib::Response;
    Server& s = server_;
    http_.Get("/v2/health/live",
              [&s](const Request&, Response& res) { reply_health(res, s.live(), "server is not live"); });
    http_.Get("/v2/health/ready",
              [&s](const Request&, Response& res) { reply_health(res, s.ready(), "server is not ready"); });
    http_.Get("/v2",
              [&s](const Request&, Response& res) { reply_json(res, kserve::server_metadata_json(s.metadata())); });

    // Statistics first: "/v2/models/stats" would also match the model metadata route.
    auto stats = [&s](const std::string& name, const std::string& version, Response& res) {
        std::vector<ModelStatistics> out;
        if (Failure f = s.statistics(name, version, out); !f.ok()) return reply_error(res, f);
        reply_json(res, kserve::statistics_json(out));
    };
    http_.Get("/v2/models/stats", [stats](const Request&, Response& res) { stats("", "", res); });
    http_.Get(KILN_MODEL_URL "/stats",
              [stats](const Request& req, Response& res) { stats(req.matches[1], req.matches[2], res); });

    http_.Get(KILN_MODEL_URL "/ready", [&s](const Request& req, Response& res) {
        const std::string name = req.matches[1], version = req.matches[2];
        if (s.model_ready(name, version)) return reply_health(res, true, "");
        // Unknown model or version: 404 (Triton); known but not ready: 400.
        ModelMetadata unused;
        if (Failure f = s.model_metadata(name, version, unused); f.code == Code::kNotFound) return reply_error(res, f);
        reply_health(res, false, "model '" + name + "'" + (version.empty() ? "" : " version " + version) + " is not ready");
    });
    http_.Get(KILN_MODEL_URL "/config", [&s](const Request& req, Response& res) {
        std::string out;
        if (Failure f = s.model_config_json(req.matches[1], req.matches[2], out); !f.ok()) return reply_error(res, f);
        reply_json(res, std::move(out));
    });
    http_.Get(KILN_MODEL_URL, [&s](const Request& req, Response& res) {
        ModelMetadata out;
        if (Failure f = s.model_metadata(req.matches[1], req.matches[2], out); !f.ok()) return reply_error(res, f);
        reply_json(res, kserve::model_metadata_json(out));
    });
    http_.Post(KILN_MODEL_URL "/infer", [this](const Request& req, Response& res) { infer(req, res); });

    http_.Post("/v2/repository/index", [&s](const Request& req, Response& res) {
        bool ready_only = false;
        if (Failure f = kserve::parse_repository_index_request(req.body, ready_only); !f.ok())
            return reply_error(res, f);
        reply_json(res, kserve::repository_index_json(s.repository_index(ready_only)));
    });
    http_.Post(kRepositoryActionUrl, [this](const Request& req, Response& res) {
        repository_action(req.matches[1], req.matches[2] == "load", req.body, res);
    });
}

void HttpFrontendImpl::repository_action(const std::string& name, bool load, const std::string& body,
                                         httplib::Response& res) {
    if (Failure f = kserve::parse_repository_load_request(body, name, load); !f.ok()) return reply_error(res, f);
    if (Failure f = load ? server_.load_model(name) : server_.unload_model(name); !f.ok()) return reply_error(res, f);
    res.status = 200;
    res.body.clear();
}

/// httplib answers a POST without Content-Length with a bare 400 before routing it. Triton's
/// clients send a model load or unload without a body: it is carried out as with an empty one.
/// Other such POSTs get an error that says what was missing.
bool HttpFrontendImpl::bodyless_post(const httplib::Request& req, httplib::Response& res) {
    if (res.status != 400 || req.method != "POST" || req.has_header("Content-Length") ||
        req.has_header("Transfer-Encoding"))
        return false;
    std::smatch m;
    if (std::regex_match(req.path, m, std::regex(kRepositoryActionUrl))) {
        repository_action(m[1], m[2] == "load", "", res);
    } else {
        reply_error(res, {Code::kInvalidArgument, "POST " + req.path + " without a Content-Length header"});
    }
    return true;
}

void HttpFrontendImpl::add_metrics_route() {
    Server& s = server_;
    http_.Get("/metrics", [&s](const httplib::Request&, httplib::Response& res) {
        res.set_content(s.metrics_text(), "text/plain; version=0.0.4");
    });
}

void HttpFrontendImpl::listen(const HttpOptions& opts, const char* what) {
    const int threads = opts.threads > 0 ? opts.threads : default_threads();
    http_.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
    http_.set_tcp_nodelay(true);
    // Only SO_REUSEADDR: httplib's default adds SO_REUSEPORT, which would let a second server
    // bind a port already serving and share its connections.
    http_.set_socket_options([](socket_t sock) {
        int yes = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    http_.set_keep_alive_max_count(1u << 20);  // load generators keep their connections
    // Errors without a body (no route, a bad request httplib rejects itself) still get
    // {"error": ...}, which is what clients read.
    http_.set_error_handler(
        httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
            if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
            if (bodyless_post(req, res)) return httplib::Server::HandlerResponse::Handled;
            const std::string msg = res.status == 404
                                        ? "no route for " + req.method + " " + req.path
                                        : "HTTP " + std::to_string(res.status) + " on " + req.method + " " + req.path;
            res.set_content(kserve::error_json(msg), kJson);
            return httplib::Server::HandlerResponse::Handled;
        }));
    http_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response&) {
        std::lock_guard<std::mutex> lock(busy_mutex_);
        busy_.insert({req.remote_addr, req.remote_port});
        return httplib::Server::HandlerResponse::Unhandled;
    });
    http_.set_logger([this](const httplib::Request& req, const httplib::Response&) {
        std::lock_guard<std::mutex> lock(busy_mutex_);
        if (auto it = busy_.find({req.remote_addr, req.remote_port}); it != busy_.end()) busy_.erase(it);
    });
    http_.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string msg = "unknown exception";
        try {
            std::rethrow_exception(ep);
        } catch (const std::exception& e) {
            msg = e.what();
        } catch (...) {
        }
        reply_error(res, {Code::kInternal, "internal error: " + msg});
    });

    port_ = opts.port == 0 ? http_.bind_to_any_port(opts.host)
                           : (http_.bind_to_port(opts.host, opts.port) ? opts.port : -1);
    KILN_CHECK(port_ > 0, kIOError) << what << ": cannot listen on " << opts.host << ":" << opts.port
                                    << " (address in use or not local?)";
    http_.raise_backlog(SOMAXCONN);
    thread_ = std::thread([this] { http_.listen_after_bind(); });
    // stop() before the listener runs would be lost (httplib only stops a running server).
    while (!http_.is_running()) std::this_thread::sleep_for(std::chrono::microseconds(100));
}

}  // namespace

std::unique_ptr<HttpFrontend> HttpFrontend::start(Server& server, const HttpOptions& opts) {
    auto f = std::make_unique<HttpFrontendImpl>(server);
    f->add_api_routes();
    f->listen(opts, "HTTP frontend");
    return f;
}

std::unique_ptr<HttpFrontend> HttpFrontend::start_metrics(Server& server, const HttpOptions& opts) {
    auto f = std::make_unique<HttpFrontendImpl>(server);
    f->add_metrics_route();
    f->listen(opts, "metrics frontend");
    return f;
}

}  // namespace kiln::serve
