// `kiln serve`: the KServe v2 inference server (src/serve) on a Triton-layout model repository,
// with Triton's flag names where they exist. Prints one line per bound port ("kiln serve: HTTP on
// 0.0.0.0:8000") so that scripts and tests that ask for port 0 can read them.
//
// Shutdown: SIGINT and SIGTERM are blocked in every thread and taken by sigwait() on the main
// thread (no work in a signal handler): the frontends stop accepting and finish the requests
// they are handling, Server::shutdown() finishes what is queued, then the process exits 0.
#include <fmt/format.h>
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "kiln/error.h"
#include "serve/grpc_frontend.h"
#include "serve/http_frontend.h"
#include "serve/server.h"

namespace kiln::cli {
namespace {

struct ServeArgs {
    std::string model_repository;
    bool allow_http = true, allow_grpc = true, allow_metrics = true;
    std::string http_address = "0.0.0.0", grpc_address = "0.0.0.0", metrics_address = "0.0.0.0";
    int http_port = 8000, grpc_port = 8001, metrics_port = 8002;
    int http_threads = 0;
    std::string model_control_mode = "none";
    std::vector<std::string> load_models;
    int threads = 0;
    bool no_be_padding = false, no_preemption = false;
    int be_nice = 0;
    std::string kernel_cache_dir;
};

/// Triton's --model-control-mode to serve::ServerOptions::model_control: Triton's "none" loads
/// every model at start and the repository API cannot change them (load and unload requests are
/// refused); "explicit" loads the --load-model ones ("*": all).
void set_model_control(const ServeArgs& args, serve::ServerOptions& opts) {
    if (args.model_control_mode == "none") {
        KILN_CHECK(args.load_models.empty(), kInvalidArgument)
            << "--load-model needs --model-control-mode explicit (mode none loads every model)";
        opts.model_control = "all";
        opts.repository_control = false;
        return;
    }
    bool all = false;
    for (const std::string& m : args.load_models) all = all || m == "*";
    opts.model_control = all ? "all" : "explicit";
    if (!all) opts.load_models = args.load_models;
}

/// Blocks the shutdown signals in this thread and every thread it starts later.
sigset_t block_shutdown_signals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::signal(SIGPIPE, SIG_IGN);  // a client gone mid-answer is an error return, not a kill
    return set;
}

int serve_main(const ServeArgs& args) {
    KILN_CHECK(args.allow_http || args.allow_grpc, kInvalidArgument)
        << "nothing to serve on: both --allow-http and --allow-grpc are false";
    const sigset_t signals = block_shutdown_signals();

    serve::ServerOptions opts;
    opts.model_repository = args.model_repository;
    set_model_control(args, opts);
    opts.threads = args.threads;
    opts.be_padding = !args.no_be_padding;
    opts.preemption = !args.no_preemption;
    opts.be_nice = args.be_nice;
    opts.kernel_cache_dir = args.kernel_cache_dir;
    std::unique_ptr<serve::Server> server = serve::Server::create(opts);

    std::unique_ptr<serve::HttpFrontend> http, metrics;
    std::unique_ptr<serve::GrpcFrontend> grpc;
    if (args.allow_http) {
        http = serve::HttpFrontend::start(*server, {args.http_address, args.http_port, args.http_threads});
        fmt::print("kiln serve: HTTP on {}:{}\n", args.http_address, http->port());
    }
    if (args.allow_grpc) {
        grpc = serve::GrpcFrontend::start(*server, {args.grpc_address, args.grpc_port});
        fmt::print("kiln serve: gRPC on {}:{}\n", args.grpc_address, grpc->port());
    }
    if (args.allow_metrics) {
        metrics = serve::HttpFrontend::start_metrics(*server, {args.metrics_address, args.metrics_port, 4});
        fmt::print("kiln serve: metrics on {}:{}\n", args.metrics_address, metrics->port());
    }
    std::fflush(stdout);

    int sig = 0;
    sigwait(&signals, &sig);
    fmt::print("kiln serve: {}: stopping (finishing requests in flight)\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    std::fflush(stdout);
    if (http) http->stop();
    if (grpc) grpc->stop();
    server->shutdown();
    if (metrics) metrics->stop();
    fmt::print("kiln serve: stopped\n");
    std::fflush(stdout);
    return 0;
}

}  // namespace

void add_serve_command(CLI::App& app, CommandAction& action) {
    CLI::App* sub =
        app.add_subcommand("serve", "Serve a model repository over KServe v2 (HTTP/REST, gRPC) with metrics");
    auto args = std::make_shared<ServeArgs>();
    sub->add_option("--model-repository", args->model_repository,
                    "Triton-layout repository: DIR/<model>/<version>/model.onnx (or model.kiln), optional "
                    "DIR/<model>/config.pbtxt")
        ->required()
        ->check(CLI::ExistingDirectory);
    auto port = [&](const char* flag, int& value, const char* what) {
        sub->add_option(flag, value, std::string(what) + " port (0: any free port, printed)")
            ->capture_default_str()
            ->check(CLI::Range(0, 65535));
    };
    port("--http-port", args->http_port, "HTTP/REST");
    port("--grpc-port", args->grpc_port, "gRPC");
    port("--metrics-port", args->metrics_port, "Prometheus metrics (GET /metrics)");
    sub->add_option("--http-address", args->http_address, "Address the HTTP/REST frontend listens on")
        ->capture_default_str();
    sub->add_option("--grpc-address", args->grpc_address, "Address the gRPC frontend listens on")
        ->capture_default_str();
    sub->add_option("--metrics-address", args->metrics_address, "Address the metrics frontend listens on")
        ->capture_default_str();
    auto allow = [&](const char* flag, bool& value, const char* what) {
        sub->add_option(flag, value, std::string("Serve ") + what + " (true|false)")
            ->expected(0, 1)
            ->default_str("true");
    };
    allow("--allow-http", args->allow_http, "HTTP/REST");
    allow("--allow-grpc", args->allow_grpc, "gRPC");
    allow("--allow-metrics", args->allow_metrics, "metrics");
    sub->add_option("--http-thread-count", args->http_threads,
                    "HTTP connection threads, one per connected client (0: a default for many clients)")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--model-control-mode", args->model_control_mode,
                    "none: load every model at start; explicit: load the --load-model ones (and on request)")
        ->capture_default_str()
        ->check(CLI::IsMember({"none", "explicit"}));
    sub->add_option("--load-model", args->load_models,
                    "With --model-control-mode explicit: a model to load at start "
                    "(repeatable; '*': all)");
    sub->add_option("--threads", args->threads, "Cores the server may use (0: all)")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    sub->add_flag("--no-be-padding", args->no_be_padding,
                  "Best-effort work waits while real-time work runs, instead of filling the cores it leaves idle");
    sub->add_flag("--no-preemption", args->no_preemption,
                  "Real-time requests do not preempt running best-effort work (for comparison)");
    sub->add_option("--be-nice", args->be_nice,
                    "OS nice value (1-19) of the threads running best-effort requests, so real-time "
                    "threads are run first (0: the process's)")
        ->capture_default_str()
        ->check(CLI::Range(0, 19));
    sub->add_option("--kernel-cache-dir", args->kernel_cache_dir, "Compiled kernel cache (default: Kiln's)");
    sub->callback([args, &action] { action = [args] { return serve_main(*args); }; });
}

}  // namespace kiln::cli
