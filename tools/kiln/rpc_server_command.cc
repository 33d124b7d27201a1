// `kiln rpc-server`: measures tuning candidates for tuners on other machines (tune/rpc.h). Serves
// with this machine's local measurer (it compiles the sources it receives here and times them in a
// child process) until SIGINT or SIGTERM.
#include <fmt/format.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "tune/measure.h"
#include "tune/rpc.h"

namespace kiln::cli {
namespace {

struct RpcServerArgs {
    std::string host = "127.0.0.1";
    int port = 9190;
    int threads = 0;  // 0: the threads each request asks for
};

/// Times every task on `threads` intra-op threads, whatever the client asked: the client does not
/// know this machine's cores.
class FixedThreadsMeasurer : public tune::Measurer {
public:
    FixedThreadsMeasurer(std::unique_ptr<tune::Measurer> inner, int threads)
        : inner_(std::move(inner)), threads_(threads) {}
    std::vector<tune::MeasureResult> measure(tune::MeasureTask task, const tune::MeasureOptions& opts) override {
        tune::MeasureOptions o = opts;
        o.threads = threads_;
        return inner_->measure(std::move(task), o);
    }
    std::string target() override { return inner_->target(); }

private:
    std::unique_ptr<tune::Measurer> inner_;
    int threads_;
};

std::atomic<tune::RpcServer*> g_server{nullptr};

extern "C" void stop_on_signal(int) {
    if (tune::RpcServer* s = g_server.load()) s->stop();  // async-signal-safe: a flag and a write()
}

int serve(const RpcServerArgs& args) {
    std::unique_ptr<tune::Measurer> local = tune::make_local_measurer();
    if (args.threads > 0) local = std::make_unique<FixedThreadsMeasurer>(std::move(local), args.threads);
    tune::RpcServer server(std::move(local), args.host, args.port);

    struct sigaction sa {};
    sa.sa_handler = stop_on_signal;
    sigemptyset(&sa.sa_mask);
    struct sigaction old_int {}, old_term {};
    g_server.store(&server);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);

    fmt::print("kiln rpc-server listening on {}:{} (target {})\n", args.host, server.port(), server.target());
    std::fflush(stdout);
    server.serve();

    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    g_server.store(nullptr);
    fmt::print("kiln rpc-server stopped\n");
    std::fflush(stdout);
    return 0;
}

}  // namespace

void add_rpc_server_command(CLI::App& app, CommandAction& action) {
    CLI::App* sub = app.add_subcommand("rpc-server", "Measure tuning candidates for tuners on other machines");
    auto args = std::make_shared<RpcServerArgs>();
    sub->add_option("--host", args->host, "Address to listen on (0.0.0.0: every interface)")->capture_default_str();
    sub->add_option("--port", args->port, "TCP port to listen on (0: any free port, printed)")
        ->capture_default_str()
        ->check(CLI::Range(0, 65535));
    sub->add_option("--threads", args->threads,
                    "Intra-op threads to time kernels on, whatever the client asks (0: the client's setting)")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    sub->callback([args, &action] { action = [args] { return serve(*args); }; });
}

}  // namespace kiln::cli
