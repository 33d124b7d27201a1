// A manual check's server (not built by CMake, not a CI test): the gRPC frontend in front of the
// tests' FakeServer, so that tritonclient can be pointed at it without compiling real models.
// Build and run: tests/serve/manual/tritonclient_grpc_check.sh
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "../grpc_fake_server.h"
#include "serve/grpc_frontend.h"

int main(int argc, char** argv) {
    int port = argc > 1 ? std::atoi(argv[1]) : 8001;
    kiln::serve::testing::FakeServer server;
    auto frontend = kiln::serve::GrpcFrontend::start(server, {"127.0.0.1", port});
    std::printf("listening on 127.0.0.1:%d\n", frontend->port());
    std::fflush(stdout);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    int sig = 0;
    sigwait(&set, &sig);
    frontend->stop();
    return 0;
}
