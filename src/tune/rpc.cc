// Remote measurement over TCP: the framing (4-byte big-endian length + JSON), the server's accept
// loop and per-connection threads, and the client measurer. The protocol is described in rpc.h.
//
// Nothing here may hang forever on a peer: every read waits in poll() with a timeout (the client)
// or on the server's stop pipe as well (the server, which waits for requests without a limit but
// for the rest of a begun message only kProgressMs). Sends use MSG_NOSIGNAL so a vanished peer is
// an error, not a SIGPIPE, and a send timeout so a peer that stops reading cannot block us.
#include "tune/rpc.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <list>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "support/error.h"

#ifndef KILN_VERSION
#define KILN_VERSION "unknown"
#endif

namespace kiln::tune {
namespace {

using nlohmann::json;

constexpr int kConnectMs = 20'000;    // connecting to a server
constexpr int kHandshakeMs = 30'000;  // the handshake, either side
constexpr int kProgressMs = 60'000;   // each later piece of a message once it has begun
constexpr int kSendTimeoutS = 60;     // a peer that stops reading
constexpr uint32_t kMaxHandshakeBytes = 64 << 10;

/// Thrown inside the server when stop() was called while a connection waited.
struct Stopped {};

std::string errno_text(int e) { return std::strerror(e); }

void log_line(const std::string& s) {
    std::string line = "kiln rpc-server: " + s + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);  // one write, so threads do not interleave
    std::fflush(stderr);
}

/// Closes a file descriptor when it goes out of scope, unless released.
class FdGuard {
public:
    explicit FdGuard(int fd) : fd_(fd) {}
    ~FdGuard() {
        if (fd_ >= 0) ::close(fd_);
    }
    FdGuard(const FdGuard&) = delete;
    FdGuard& operator=(const FdGuard&) = delete;
    int get() const { return fd_; }
    int release() { return std::exchange(fd_, -1); }

private:
    int fd_;
};

int clamp_ms(double seconds) { return static_cast<int>(std::clamp(seconds * 1000.0, 0.0, 2e9)); }

std::string address_text(const sockaddr* sa) {
    char host[NI_MAXHOST], port[NI_MAXSERV];
    socklen_t len = sa->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    if (::getnameinfo(sa, len, host, sizeof host, port, sizeof port, NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        return "?";
    return sa->sa_family == AF_INET6 ? "[" + std::string(host) + "]:" + port : std::string(host) + ":" + port;
}

void set_stream_options(int fd) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    timeval tv{kSendTimeoutS, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/// Waits until `fd` is readable (or hung up). Throws kIOError after `timeout_ms` (-1: never),
/// Stopped when `stop_fd` (-1: none) becomes readable.
void wait_readable(int fd, int stop_fd, int timeout_ms, const std::string& peer) {
    using Clock = std::chrono::steady_clock;
    const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
    for (;;) {
        pollfd p[2] = {{fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
        int wait = -1;
        if (timeout_ms >= 0)
            wait = static_cast<int>(std::max<int64_t>(
                0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count()));
        int r = ::poll(p, stop_fd >= 0 ? 2 : 1, wait);
        if (r < 0) {
            if (errno == EINTR) continue;
            KILN_THROW(kIOError) << "cannot wait for " << peer << ": " << errno_text(errno);
        }
        if (stop_fd >= 0 && p[1].revents != 0) throw Stopped{};
        if (p[0].revents != 0) return;  // data, end of stream or an error: recv() tells which
        if (r == 0 && Clock::now() >= deadline)
            KILN_THROW(kIOError) << "timed out after " << timeout_ms / 1000.0 << " s waiting for " << peer;
    }
}

/// Reads exactly n bytes. Returns false when `eof_ok` and the peer closed before the first byte.
bool read_exact(int fd, int stop_fd, char* buf, size_t n, int first_ms, int rest_ms, const std::string& peer,
                bool eof_ok) {
    size_t got = 0;
    while (got < n) {
        wait_readable(fd, stop_fd, got == 0 ? first_ms : rest_ms, peer);
        ssize_t r = ::recv(fd, buf + got, n - got, 0);
        if (r > 0) {
            got += static_cast<size_t>(r);
        } else if (r == 0) {
            if (got == 0 && eof_ok) return false;
            KILN_THROW(kIOError) << peer << " closed the connection in the middle of a message";
        } else if (errno != EINTR && errno != EAGAIN) {
            KILN_THROW(kIOError) << "cannot read from " << peer << ": " << errno_text(errno);
        }
    }
    return true;
}

/// Reads one message into `body`. Returns false when the peer closed the connection cleanly
/// before a message began. `first_ms`: how long to wait for it to begin (-1: forever).
bool read_message(int fd, int stop_fd, int first_ms, const std::string& peer, std::string& body,
                  uint32_t max_bytes = kRpcMaxMessageBytes) {
    unsigned char head[4];
    if (!read_exact(fd, stop_fd, reinterpret_cast<char*>(head), 4, first_ms, kProgressMs, peer, true)) return false;
    const uint32_t n = (uint32_t{head[0]} << 24) | (uint32_t{head[1]} << 16) | (uint32_t{head[2]} << 8) | head[3];
    KILN_CHECK(n <= max_bytes, kIOError) << peer << " announced a message of " << n << " bytes, over the limit of "
                                         << max_bytes << " (not a kiln rpc peer?)";
    // The body follows at the sender's pace (kProgressMs per piece). It grows as it arrives, so a
    // peer announcing a huge message costs memory only for what it really sends.
    constexpr size_t kChunk = size_t{1} << 20;
    body.clear();
    while (body.size() < n) {
        const size_t at = body.size();
        body.resize(at + std::min<size_t>(kChunk, n - at));
        read_exact(fd, stop_fd, body.data() + at, body.size() - at, kProgressMs, kProgressMs, peer, false);
    }
    return true;
}

void write_message(int fd, const std::string& body, const std::string& peer) {
    KILN_CHECK(body.size() <= kRpcMaxMessageBytes, kInvalidArgument)
        << "rpc message of " << body.size() << " bytes for " << peer << " is over the 1 GiB limit";
    const uint32_t n = static_cast<uint32_t>(body.size());
    std::string frame = {static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
                         static_cast<char>(n)};
    frame += body;
    size_t sent = 0;
    while (sent < frame.size()) {
        ssize_t r = ::send(fd, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
        if (r >= 0) {
            sent += static_cast<size_t>(r);
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            KILN_THROW(kIOError) << "timed out after " << kSendTimeoutS << " s sending to " << peer;
        } else if (errno != EINTR) {
            KILN_THROW(kIOError) << "cannot send to " << peer << ": " << errno_text(errno);
        }
    }
}

/// Parses a message body as a JSON object; kIOError (the peer does not speak the protocol) otherwise.
json parse_object(const std::string& body, const std::string& peer, const char* what) {
    json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
    KILN_CHECK(!j.is_discarded() && j.is_object(), kIOError)
        << peer << " sent " << what << " that is not a JSON object (not a kiln rpc peer?)";
    return j;
}

/// The message of an error without its kind prefix: the text a remote side re-raises.
std::string error_text(const Error& e) {
    std::string s = e.message();
    for (const std::string& c : e.context()) s += "\n  " + c;
    return s;
}

ErrorKind error_kind_from_name(const std::string& name) {
    for (int k = 0; k <= static_cast<int>(ErrorKind::kInternal); ++k)
        if (name == error_kind_name(static_cast<ErrorKind>(k))) return static_cast<ErrorKind>(k);
    return ErrorKind::kIOError;
}

addrinfo* resolve(const std::string& host, int port, bool passive, const std::string& what) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    addrinfo* res = nullptr;
    const std::string service = std::to_string(port);
    int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
    KILN_CHECK(rc == 0, kIOError) << "cannot resolve " << what << ": " << ::gai_strerror(rc);
    return res;
}

int listen_on(const std::string& host, int port) {
    const std::string what = host + ":" + std::to_string(port);
    KILN_CHECK(port >= 0 && port <= 65535, kInvalidArgument)
        << "rpc server port " << port << " is not in 0..65535 (0: any free port)";
    addrinfo* res = resolve(host, port, true, what);
    int err = 0;
    int fd = -1;
    for (addrinfo* a = res; a && fd < 0; a = a->ai_next) {
        fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 64) != 0) {
            err = errno;
            ::close(fd);
            fd = -1;
        }
    }
    ::freeaddrinfo(res);
    KILN_CHECK(fd >= 0, kIOError) << "cannot listen on " << what << ": " << errno_text(err);
    return fd;
}

/// Connects with a timeout; kIOError naming `address` and the system's reason on failure.
int connect_to(const std::string& host, int port, const std::string& address) {
    addrinfo* res = resolve(host, port, false, "rpc server address '" + address + "'");
    std::string reason = "no address";
    int fd = -1;
    for (addrinfo* a = res; a && fd < 0; a = a->ai_next) {
        fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0) {
            reason = errno_text(errno);
            continue;
        }
        int err = 0;
        if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            err = errno;
            if (err == EINPROGRESS) {
                pollfd p{fd, POLLOUT, 0};
                int r;
                do r = ::poll(&p, 1, kConnectMs);
                while (r < 0 && errno == EINTR);
                socklen_t len = sizeof err;
                if (r == 0)
                    err = ETIMEDOUT;
                else if (r < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
                    err = errno;
            }
        }
        if (err != 0) {
            reason = err == ETIMEDOUT ? "timed out after " + std::to_string(kConnectMs / 1000) + " s" : errno_text(err);
            ::close(fd);
            fd = -1;
        }
    }
    ::freeaddrinfo(res);
    KILN_CHECK(fd >= 0, kIOError) << "cannot connect to rpc server " << address << ": " << reason;
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    set_stream_options(fd);
    return fd;
}

void parse_address(const std::string& s, std::string& host, int& port) {
    const size_t colon = s.rfind(':');
    KILN_CHECK(colon != std::string::npos && colon > 0 && colon + 1 < s.size(), kInvalidArgument)
        << "rpc server address '" << s << "' is not HOST:PORT (e.g. 127.0.0.1:9190)";
    host = s.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    const std::string p = s.substr(colon + 1);
    const bool digits = p.size() <= 5 && std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; });
    port = digits ? std::stoi(p) : -1;
    KILN_CHECK(!host.empty() && port >= 1 && port <= 65535, kInvalidArgument)
        << "rpc server address '" << s << "' is not HOST:PORT with a port in 1..65535";
}

// ---- client --------------------------------------------------------------------------------

class RpcMeasurer final : public Measurer {
public:
    RpcMeasurer(std::string address, std::string host, int port)
        : address_(std::move(address)), host_(std::move(host)), port_(port), peer_("rpc server " + address_) {
        connect();
    }
    ~RpcMeasurer() override { disconnect(); }

    std::vector<MeasureResult> measure(MeasureTask task, const MeasureOptions& opts) override {
        std::lock_guard<std::mutex> lock(mutex_);
        if (fd_ < 0) connect();  // the last request lost the connection: try again
        // Sources only: the server compiles for its own machine.
        for (Candidate& c : task.candidates) c.library.clear();
        const size_t n = task.candidates.size();
        const std::string request = "{\"measure\":" + task_to_json(task, opts) + "}";
        // The server answers when the whole batch is measured: each candidate may take its
        // timeout plus its compile, and the batch some fixed overhead.
        const int timeout_ms = clamp_ms((opts.timeout_s + 5) * static_cast<double>(n) + 60);
        std::string body;
        json reply;
        try {
            write_message(fd_, request, peer_);
            KILN_CHECK(read_message(fd_, -1, timeout_ms, peer_, body), kIOError)
                << peer_ << " closed the connection before answering";
            reply = parse_object(body, peer_, "an answer");
        } catch (Error& e) {
            disconnect();  // the stream is out of step (or gone): reconnect on the next call
            e.add_context("while measuring workload '" + task.workload + "' on " + peer_);
            throw;
        }
        if (reply.contains("error")) {
            const std::string kind = reply.value("kind", std::string());
            const json& err = reply["error"];
            throw Error(error_kind_from_name(kind), peer_ + ": " + (err.is_string() ? err.get<std::string>() : err.dump()));
        }
        KILN_CHECK(reply.contains("results"), kIOError) << peer_ << " answered without results or error";
        std::vector<MeasureResult> results = results_from_json(reply["results"].dump());
        KILN_CHECK(results.size() == n, kIOError)
            << peer_ << " returned " << results.size() << " results for " << n << " candidates";
        return results;
    }

    std::string target() override { return target_; }

private:
    void connect() {
        FdGuard fd(connect_to(host_, port_, address_));
        const json hello = {{"kiln_rpc", kRpcProtocolVersion}, {"kiln", KILN_VERSION}};
        write_message(fd.get(), hello.dump(), peer_);
        std::string body;
        KILN_CHECK(read_message(fd.get(), -1, kHandshakeMs, peer_, body, kMaxHandshakeBytes), kIOError)
            << peer_ << " closed the connection during the handshake (not a kiln rpc server?)";
        const json j = parse_object(body, peer_, "a handshake answer");
        KILN_CHECK(j.contains("ok") && j["ok"].is_boolean(), kIOError)
            << peer_ << " sent a handshake answer without 'ok' (not a kiln rpc server?)";
        if (!j["ok"].get<bool>()) {
            const std::string err = j.contains("error") && j["error"].is_string() ? j["error"].get<std::string>()
                                                                                   : "refused the connection";
            KILN_THROW(kUnsupported) << peer_ << ": " << err;
        }
        KILN_CHECK(j.contains("target") && j["target"].is_string(), kIOError)
            << peer_ << " sent a handshake answer without 'target'";
        target_ = j["target"].get<std::string>();
        fd_ = fd.release();
    }

    void disconnect() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }

    std::string address_, host_;
    int port_;
    std::string peer_;
    std::string target_;
    int fd_ = -1;
    std::mutex mutex_;
};

}  // namespace

// ---- server --------------------------------------------------------------------------------

RpcServer::RpcServer(std::unique_ptr<Measurer> local, const std::string& host, int port) : local_(std::move(local)) {
    KILN_ICHECK(local_ != nullptr);
    target_ = local_->target();
    KILN_CHECK(::pipe2(stop_pipe_, O_CLOEXEC | O_NONBLOCK) == 0, kIOError)
        << "rpc server: cannot create a pipe: " << errno_text(errno);
    listen_fd_ = listen_on(host, port);
    sockaddr_storage sa{};
    socklen_t len = sizeof sa;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len);
    port_ = ntohs(sa.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&sa)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&sa)->sin_port);
}

RpcServer::~RpcServer() {
    for (int fd : {listen_fd_, stop_pipe_[0], stop_pipe_[1]})
        if (fd >= 0) ::close(fd);
}

void RpcServer::stop() {
    stopping_.store(true);
    const char c = 1;
    ssize_t r = ::write(stop_pipe_[1], &c, 1);  // stays readable: wakes every waiting thread
    (void)r;
}

void RpcServer::serve() {
    struct Connection {
        std::thread thread;
        std::shared_ptr<std::atomic<bool>> done;
    };
    std::list<Connection> connections;
    auto reap = [&](bool all) {
        for (auto it = connections.begin(); it != connections.end();) {
            if (all || it->done->load()) {
                it->thread.join();
                it = connections.erase(it);
            } else {
                ++it;
            }
        }
    };
    while (!stopping_.load()) {
        pollfd p[2] = {{listen_fd_, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
        if (::poll(p, 2, -1) < 0) {
            if (errno == EINTR) continue;
            log_line("poll failed: " + errno_text(errno) + "; stopping");
            break;
        }
        if (p[1].revents != 0) break;
        if ((p[0].revents & POLLIN) == 0) continue;
        sockaddr_storage sa{};
        socklen_t len = sizeof sa;
        int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNABORTED) {
                log_line("accept failed: " + errno_text(errno));
                std::this_thread::sleep_for(std::chrono::milliseconds(100));  // e.g. out of descriptors
            }
            continue;
        }
        reap(false);
        std::string peer = "client " + address_text(reinterpret_cast<sockaddr*>(&sa));
        auto done = std::make_shared<std::atomic<bool>>(false);
        connections.push_back({std::thread([this, fd, peer, done] {
                                   serve_connection(fd, peer);
                                   done->store(true);
                               }),
                               done});
    }
    reap(true);
}

void RpcServer::serve_connection(int fd, const std::string& peer) {
    FdGuard guard(fd);
    set_stream_options(fd);
    try {
        if (!handshake(fd, peer)) return;
        std::string body;
        while (read_message(fd, stop_pipe_[0], -1, peer, body)) write_message(fd, handle_request(body, peer), peer);
        log_line(peer + " disconnected");
    } catch (const Stopped&) {
    } catch (const std::exception& e) {
        log_line("closing the connection of " + peer + ": " + e.what());
    }
}

bool RpcServer::handshake(int fd, const std::string& peer) {
    std::string body;
    if (!read_message(fd, stop_pipe_[0], kHandshakeMs, peer, body, kMaxHandshakeBytes)) return false;
    const json j = parse_object(body, peer, "a handshake");
    KILN_CHECK(j.contains("kiln_rpc") && j["kiln_rpc"].is_number_integer(), kIOError)
        << peer << " did not send a kiln rpc handshake (not a kiln rpc client?)";
    const int64_t version = j["kiln_rpc"].get<int64_t>();
    const std::string kiln = j.contains("kiln") && j["kiln"].is_string() ? j["kiln"].get<std::string>() : "?";
    if (version != kRpcProtocolVersion) {
        const std::string err = "kiln rpc protocol version " + std::to_string(version) + ", this server speaks " +
                                std::to_string(kRpcProtocolVersion);
        write_message(fd, json{{"ok", false}, {"error", err}}.dump(), peer);
        log_line("refused " + peer + " (kiln " + kiln + "): " + err);
        return false;
    }
    write_message(fd, json{{"ok", true}, {"protocol", kRpcProtocolVersion}, {"target", target_}, {"kiln", KILN_VERSION}}.dump(),
                  peer);
    log_line(peer + " connected (kiln " + kiln + ")");
    return true;
}

std::string RpcServer::handle_request(const std::string& body, const std::string& peer) {
    const json j = parse_object(body, peer, "a request");  // garbage: the caller drops the connection
    json reply;
    try {
        KILN_CHECK(j.contains("measure"), kInvalidArgument)
            << "unknown rpc request (this server speaks protocol " << kRpcProtocolVersion << ": 'measure')";
        MeasureTask task;
        MeasureOptions opts;
        size_t first = 1;
        task_from_json(j["measure"].dump(), task, opts, first);
        const size_t n = task.candidates.size();
        const std::string workload = task.workload;
        std::vector<MeasureResult> results;
        {
            std::lock_guard<std::mutex> lock(measure_mutex_);  // one measurement at a time
            KILN_CHECK(!stopping_.load(), kIOError) << "the rpc server is stopping";
            results = local_->measure(std::move(task), opts);
        }
        KILN_CHECK(results.size() == n, kInternal)
            << "bug in Kiln: the server's measurer returned " << results.size() << " results for " << n
            << " candidates of workload '" << workload << "'";
        reply = {{"results", json::parse(results_to_json(results))}};
    } catch (const Error& e) {
        log_line("request of " + peer + " failed: " + e.what());
        reply = {{"error", error_text(e)}, {"kind", error_kind_name(e.kind())}};
    } catch (const std::exception& e) {
        log_line("request of " + peer + " failed: " + e.what());
        reply = {{"error", e.what()}, {"kind", error_kind_name(ErrorKind::kInternal)}};
    }
    return reply.dump();
}

std::unique_ptr<Measurer> make_rpc_measurer(const std::string& host_port) {
    std::string host;
    int port = 0;
    parse_address(host_port, host, port);
    return std::make_unique<RpcMeasurer>(host_port, host, port);
}

}  // namespace kiln::tune
