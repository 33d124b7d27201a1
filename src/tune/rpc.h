// Remote measurement (TVM's rpc server idea, simplified): a tuner on one machine measures
// candidates on another. `kiln rpc-server` runs an RpcServer around that machine's local
// measurer; the tuner's make_rpc_measurer("HOST:PORT") sends each task (C sources, not compiled
// libraries: the server compiles for its own machine) and gets the results back.
//
// Protocol (kRpcProtocolVersion), over one TCP connection: every message is a 4-byte big-endian
// length followed by that many bytes of JSON (lengths over kRpcMaxMessageBytes are refused).
//   client: {"kiln_rpc": 1, "kiln": "0.1.0"}
//   server: {"ok": true, "protocol": 1, "target": "AMD EPYC 9B45 | avx512", "kiln": "0.1.0"}
//        or {"ok": false, "error": "kiln rpc protocol version 2, this server speaks 1"}, then closes
//   client: {"measure": <task_to_json object>}          (any number of requests)
//   server: {"results": <results_to_json array>}  or  {"error": "...", "kind": "CompileError"}
// A peer that does not speak the protocol (bad length, not JSON, no handshake) is disconnected
// with a message on stderr; the server keeps serving. Measurements are serialized: connections
// are served by their own threads but one task is measured at a time, so times do not disturb
// each other.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "tune/measure.h"

namespace kiln::tune {

/// The protocol a client announces and a server speaks; bump on any incompatible change.
inline constexpr int kRpcProtocolVersion = 1;
/// The largest message either side accepts (1 GiB).
inline constexpr uint32_t kRpcMaxMessageBytes = 1u << 30;

/// Serves measurement requests with a local measurer. Not copyable.
class RpcServer {
public:
    /// Binds and listens on host:port (port 0: a free port, see port()). Throws kIOError naming
    /// the address and the system's reason when it cannot.
    RpcServer(std::unique_ptr<Measurer> local, const std::string& host, int port);
    ~RpcServer();
    RpcServer(const RpcServer&) = delete;
    RpcServer& operator=(const RpcServer&) = delete;

    /// The port listened on (the chosen one when constructed with port 0).
    int port() const { return port_; }
    /// The local measurer's target, sent to clients in the handshake.
    const std::string& target() const { return target_; }

    /// Accepts and serves connections (a thread each) until stop(); returns after every
    /// connection thread has finished (a measurement under way completes first).
    void serve();
    /// Makes serve() return. Safe from another thread and from a signal handler (it only stores
    /// an atomic flag and writes one byte to a pipe).
    void stop();

private:
    void serve_connection(int fd, const std::string& peer);
    bool handshake(int fd, const std::string& peer);
    std::string handle_request(const std::string& body, const std::string& peer);

    std::unique_ptr<Measurer> local_;
    std::string target_;
    int listen_fd_ = -1;
    int stop_pipe_[2] = {-1, -1};
    int port_ = 0;
    std::atomic<bool> stopping_{false};
    std::mutex measure_mutex_;  // one measurement at a time
};

/// A measurer that measures on the rpc server at "HOST:PORT" (tune/rpc.h's protocol). Connects and
/// handshakes now: throws kInvalidArgument for a malformed address, kIOError naming the address and
/// the system's reason when the connection fails, kUnsupported when the server speaks another
/// protocol version. measure() throws kIOError when the connection drops or the server does not
/// answer in time ((timeout_s + 5) * candidates + 60 s), and reconnects on the next call.
std::unique_ptr<Measurer> make_rpc_measurer(const std::string& host_port);

}  // namespace kiln::tune
