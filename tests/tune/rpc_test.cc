// The rpc measurer and server over 127.0.0.1: a round trip through a server with a fake
// measurer, the handshake's version check (raw bytes on the socket), connection failures, errors
// of the server's measurer, and peers that do not speak the protocol.
#include "tune/rpc.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "support/error.h"

namespace kiln::tune {
namespace {

using nlohmann::json;

/// Records what it was asked to measure; candidate i takes i ms, odd ones fail; the workload
/// "throw" makes it throw a kiln::Error.
class FakeMeasurer : public Measurer {
public:
    std::vector<MeasureResult> measure(MeasureTask task, const MeasureOptions& opts) override {
        if (task.workload == "throw") KILN_THROW(kCompileError) << "fake compiler exploded on " << task.workload;
        std::vector<MeasureResult> out;
        for (size_t i = 0; i < task.candidates.size(); ++i)
            out.push_back({i % 2 == 0, 1e-3 * static_cast<double>(i), i % 2 ? "wrong result: #" + std::to_string(i) : ""});
        last_task = std::move(task);
        last_opts = opts;
        ++calls;
        return out;
    }
    std::string target() override { return "fake cpu | avx2"; }

    MeasureTask last_task;
    MeasureOptions last_opts;
    std::atomic<int> calls{0};
};

/// An RpcServer with a FakeMeasurer serving on 127.0.0.1, a free port, in a thread.
class ServerThread {
public:
    ServerThread() {
        auto fake = std::make_unique<FakeMeasurer>();
        fake_ = fake.get();
        server_ = std::make_unique<RpcServer>(std::move(fake), "127.0.0.1", 0);
        thread_ = std::thread([this] { server_->serve(); });
    }
    ~ServerThread() {
        server_->stop();
        thread_.join();
    }
    std::string address() const { return "127.0.0.1:" + std::to_string(server_->port()); }
    int port() const { return server_->port(); }
    FakeMeasurer& fake() { return *fake_; }

private:
    FakeMeasurer* fake_;
    std::unique_ptr<RpcServer> server_;
    std::thread thread_;
};

MeasureTask sample_task(const std::string& workload, size_t candidates) {
    MeasureTask t;
    t.workload = workload;
    t.flops = 2.5e6;
    t.args = {{DType::kFloat32, {1, 8, 16}, false, false},
              {DType::kFloat32, {8, 16}, false, true},
              {DType::kFloat32, {1, 8, 8}, true, false}};
    for (size_t i = 0; i < candidates; ++i) {
        Candidate c;
        c.knobs = "tile=" + std::to_string(4 << i);
        c.source = "void kernel_" + std::to_string(i) + "(float** a) { /* \"quoted\"\n\ttabs */ }\n";
        c.library = "/local/only/lib" + std::to_string(i) + ".so";
        t.candidates.push_back(c);
    }
    t.candidates.back().extern_name = "dnnl_matmul";
    t.candidates.back().extern_params = "post=relu";
    return t;
}

// ---- raw socket helpers, for peers that do not (fully) speak the protocol -----------------

int connect_raw(int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    timeval tv{10, 0};  // a test never hangs on a silent server
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

void send_bytes(int fd, const std::string& bytes) {
    ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

std::string frame(const std::string& body) {
    const uint32_t n = static_cast<uint32_t>(body.size());
    return std::string{static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
                       static_cast<char>(n)} +
           body;
}

bool recv_exact(int fd, char* p, size_t n) {
    for (size_t got = 0; got < n;) {
        ssize_t r = ::recv(fd, p + got, n - got, 0);
        if (r <= 0) return false;
        got += static_cast<size_t>(r);
    }
    return true;
}

/// One framed message, or nullopt when the peer closed (or said nothing for 10 s).
std::optional<std::string> recv_frame(int fd) {
    unsigned char h[4];
    if (!recv_exact(fd, reinterpret_cast<char*>(h), 4)) return std::nullopt;
    std::string body((size_t{h[0]} << 24) | (size_t{h[1]} << 16) | (size_t{h[2]} << 8) | h[3], '\0');
    if (!recv_exact(fd, body.data(), body.size())) return std::nullopt;
    return body;
}

/// A listening socket on a free loopback port, for fake servers.
int listen_raw(int& port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd, 4), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    return fd;
}

/// Expects `f` to throw kiln::Error of `kind` whose what() contains every one of `parts`.
template <typename F>
void expect_error(F&& f, ErrorKind kind, std::initializer_list<std::string> parts) {
    try {
        f();
        FAIL() << "expected a kiln::Error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), kind) << e.what();
        for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
}

// ---- tests ---------------------------------------------------------------------------------

TEST(RpcTest, RoundTripCarriesTaskIntactAndResultsInOrder) {
    ServerThread server;
    std::unique_ptr<Measurer> m = make_rpc_measurer(server.address());
    EXPECT_EQ(m->target(), "fake cpu | avx2");

    MeasureTask task = sample_task("matmul_8x16x8", 4);
    MeasureOptions opts;
    opts.threads = 3;
    opts.warmup = 2;
    opts.repeats = 7;
    opts.min_repeat_ms = 2.5;
    opts.timeout_s = 4;
    opts.compile_jobs = 2;
    opts.rtol = 1e-2;
    opts.atol = 1e-5;
    std::vector<MeasureResult> r = m->measure(task, opts);

    ASSERT_EQ(r.size(), 4u);
    for (size_t i = 0; i < r.size(); ++i) {
        EXPECT_EQ(r[i].ok, i % 2 == 0) << i;
        EXPECT_DOUBLE_EQ(r[i].seconds, 1e-3 * static_cast<double>(i)) << i;
        EXPECT_EQ(r[i].error, i % 2 ? "wrong result: #" + std::to_string(i) : "") << i;
    }
    const MeasureTask& got = server.fake().last_task;
    EXPECT_EQ(got.workload, task.workload);
    EXPECT_DOUBLE_EQ(got.flops, task.flops);
    ASSERT_EQ(got.args.size(), task.args.size());
    for (size_t i = 0; i < got.args.size(); ++i) {
        EXPECT_EQ(got.args[i].dtype, task.args[i].dtype);
        EXPECT_EQ(got.args[i].shape, task.args[i].shape);
        EXPECT_EQ(got.args[i].is_output, task.args[i].is_output);
        EXPECT_EQ(got.args[i].is_constant, task.args[i].is_constant);
    }
    ASSERT_EQ(got.candidates.size(), task.candidates.size());
    for (size_t i = 0; i < got.candidates.size(); ++i) {
        EXPECT_EQ(got.candidates[i].knobs, task.candidates[i].knobs);
        EXPECT_EQ(got.candidates[i].source, task.candidates[i].source);
        EXPECT_EQ(got.candidates[i].extern_name, task.candidates[i].extern_name);
        EXPECT_EQ(got.candidates[i].extern_params, task.candidates[i].extern_params);
        EXPECT_EQ(got.candidates[i].library, "") << "a local library path must not travel";
    }
    const MeasureOptions& o = server.fake().last_opts;
    EXPECT_EQ(o.threads, 3);
    EXPECT_EQ(o.warmup, 2);
    EXPECT_EQ(o.repeats, 7);
    EXPECT_DOUBLE_EQ(o.min_repeat_ms, 2.5);
    EXPECT_DOUBLE_EQ(o.timeout_s, 4);
    EXPECT_EQ(o.compile_jobs, 2);
    EXPECT_DOUBLE_EQ(o.rtol, 1e-2);
    EXPECT_DOUBLE_EQ(o.atol, 1e-5);

    // The same connection serves further requests.
    EXPECT_EQ(m->measure(sample_task("second", 1), opts).size(), 1u);
    EXPECT_EQ(server.fake().calls.load(), 2);
}

TEST(RpcTest, TwoClientsAreServedAtOnce) {
    ServerThread server;
    std::unique_ptr<Measurer> a = make_rpc_measurer(server.address());
    std::unique_ptr<Measurer> b = make_rpc_measurer(server.address());  // while a is connected
    EXPECT_EQ(b->measure(sample_task("b", 2), MeasureOptions()).size(), 2u);
    EXPECT_EQ(a->measure(sample_task("a", 3), MeasureOptions()).size(), 3u);
}

TEST(RpcTest, ServerRefusesAnotherProtocolVersion) {
    ServerThread server;
    int fd = connect_raw(server.port());
    send_bytes(fd, frame(json{{"kiln_rpc", kRpcProtocolVersion + 1}, {"kiln", "9.9.9"}}.dump()));
    std::optional<std::string> reply = recv_frame(fd);
    ASSERT_TRUE(reply.has_value());
    json j = json::parse(*reply);
    EXPECT_EQ(j["ok"], false);
    EXPECT_EQ(j["error"], "kiln rpc protocol version " + std::to_string(kRpcProtocolVersion + 1) +
                              ", this server speaks " + std::to_string(kRpcProtocolVersion));
    EXPECT_FALSE(recv_frame(fd).has_value()) << "the server closes after refusing";
    ::close(fd);
    // ... and keeps serving.
    EXPECT_EQ(make_rpc_measurer(server.address())->target(), "fake cpu | avx2");
}

TEST(RpcTest, ClientReportsTheServersVersionRefusal) {
    int port = 0;
    int lfd = listen_raw(port);
    std::thread fake_server([lfd] {
        int fd = ::accept(lfd, nullptr, nullptr);
        json hello = json::parse(recv_frame(fd).value_or("{}"));
        EXPECT_EQ(hello["kiln_rpc"], kRpcProtocolVersion);
        EXPECT_TRUE(hello["kiln"].is_string());
        send_bytes(fd, frame(R"({"ok": false, "error": "kiln rpc protocol version 1, this server speaks 2"})"));
        ::close(fd);
    });
    expect_error([&] { make_rpc_measurer("127.0.0.1:" + std::to_string(port)); }, ErrorKind::kUnsupported,
                 {"kiln rpc protocol version 1, this server speaks 2", std::to_string(port)});
    fake_server.join();
    ::close(lfd);
}

TEST(RpcTest, ConnectingToAClosedPortIsAClearError) {
    int port = 0;
    ::close(listen_raw(port));  // a port that was free a moment ago and has no listener now
    const std::string address = "127.0.0.1:" + std::to_string(port);
    expect_error([&] { make_rpc_measurer(address); }, ErrorKind::kIOError,
                 {"cannot connect to rpc server " + address, "Connection refused"});
}

TEST(RpcTest, MalformedAddressIsInvalidArgument) {
    for (const char* bad : {"", "localhost", "127.0.0.1:", ":9190", "host:port", "host:0", "host:65536", "host:-1"})
        expect_error([&] { make_rpc_measurer(bad); }, ErrorKind::kInvalidArgument, {"HOST:PORT", std::string("'") + bad + "'"});
}

TEST(RpcTest, ServerMeasurerErrorReachesClientAndServerKeepsServing) {
    ServerThread server;
    std::unique_ptr<Measurer> m = make_rpc_measurer(server.address());
    expect_error([&] { m->measure(sample_task("throw", 2), MeasureOptions()); }, ErrorKind::kCompileError,
                 {"fake compiler exploded on throw", "rpc server " + server.address()});
    // The same connection, then a new one, go on working.
    EXPECT_EQ(m->measure(sample_task("after", 3), MeasureOptions()).size(), 3u);
    EXPECT_EQ(make_rpc_measurer(server.address())->measure(sample_task("new", 2), MeasureOptions()).size(), 2u);
}

TEST(RpcTest, InvalidTaskIsAnErrorReply) {
    ServerThread server;
    int fd = connect_raw(server.port());
    send_bytes(fd, frame(json{{"kiln_rpc", kRpcProtocolVersion}}.dump()));
    ASSERT_TRUE(recv_frame(fd).has_value());
    send_bytes(fd, frame(R"({"measure": {"workload": "w"}})"));
    json j = json::parse(recv_frame(fd).value_or("{}"));
    EXPECT_EQ(j["kind"], "InvalidArgument");
    EXPECT_NE(j["error"].get<std::string>().find("missing field"), std::string::npos) << j.dump();
    send_bytes(fd, frame(R"({"launch": "rockets"})"));
    j = json::parse(recv_frame(fd).value_or("{}"));
    EXPECT_NE(j["error"].get<std::string>().find("unknown rpc request"), std::string::npos) << j.dump();
    ::close(fd);
}

TEST(RpcTest, GarbageFromAPeerClosesOnlyThatConnection) {
    ServerThread server;
    std::unique_ptr<Measurer> m = make_rpc_measurer(server.address());  // connected throughout
    const std::vector<std::string> garbage = {
        std::string("\xff\xff\xff\xff", 4),        // absurd length
        "GET / HTTP/1.1\r\nHost: x\r\n\r\n",       // another protocol (its length is over 1 GiB)
        frame("this is not json"),                 // not JSON
        frame("[1, 2, 3]"),                        // JSON, not an object
        frame(R"({"hello": "there"})"),            // no handshake
        frame(R"({"kiln_rpc": "one"})"),           // malformed version
        std::string("\0\x10\0\0", 4),              // a 1 MiB handshake (the limit is 64 KiB)
        std::string("\0\0", 2),                    // a truncated header, then the peer leaves
    };
    for (size_t i = 0; i < garbage.size(); ++i) {
        const std::string& g = garbage[i];
        int fd = connect_raw(server.port());
        send_bytes(fd, g);
        if (g.size() == 2) ::shutdown(fd, SHUT_WR);
        EXPECT_FALSE(recv_frame(fd).has_value()) << "the server closes a peer that sent garbage #" << i;
        ::close(fd);
    }
    // After the handshake, garbage closes the connection as well.
    int fd = connect_raw(server.port());
    send_bytes(fd, frame(json{{"kiln_rpc", kRpcProtocolVersion}}.dump()));
    ASSERT_TRUE(recv_frame(fd).has_value());
    send_bytes(fd, frame("{not json"));
    EXPECT_FALSE(recv_frame(fd).has_value());
    ::close(fd);
    // A request length over 1 GiB after the handshake.
    fd = connect_raw(server.port());
    send_bytes(fd, frame(json{{"kiln_rpc", kRpcProtocolVersion}}.dump()));
    ASSERT_TRUE(recv_frame(fd).has_value());
    send_bytes(fd, std::string("\x40\0\0\x01", 4));
    EXPECT_FALSE(recv_frame(fd).has_value());
    ::close(fd);
    // A request announced just under 1 GiB whose sender leaves after a few bytes.
    fd = connect_raw(server.port());
    send_bytes(fd, frame(json{{"kiln_rpc", kRpcProtocolVersion}}.dump()));
    ASSERT_TRUE(recv_frame(fd).has_value());
    send_bytes(fd, std::string("\x3f\xff\xff\xff{\"measure\"", 14));
    ::shutdown(fd, SHUT_WR);
    EXPECT_FALSE(recv_frame(fd).has_value());
    ::close(fd);

    EXPECT_EQ(m->measure(sample_task("still served", 2), MeasureOptions()).size(), 2u);
    EXPECT_EQ(make_rpc_measurer(server.address())->target(), "fake cpu | avx2");
}

TEST(RpcTest, ConnectionDroppedMidRequestIsAClearErrorAndReconnects) {
    int port = 0;
    int lfd = listen_raw(port);
    std::thread fake_server([lfd] {
        for (int conn = 0; conn < 2; ++conn) {
            int fd = ::accept(lfd, nullptr, nullptr);
            recv_frame(fd);
            send_bytes(fd, frame(R"({"ok": true, "protocol": 1, "target": "flaky"})"));
            recv_frame(fd);  // the request; the first connection dies without answering
            if (conn == 1) send_bytes(fd, frame(R"({"results": [{"ok": true, "seconds": 0.5, "error": ""}]})"));
            ::close(fd);
        }
    });
    const std::string address = "127.0.0.1:" + std::to_string(port);
    std::unique_ptr<Measurer> m = make_rpc_measurer(address);
    EXPECT_EQ(m->target(), "flaky");
    expect_error([&] { m->measure(sample_task("dropped", 1), MeasureOptions()); }, ErrorKind::kIOError,
                 {"rpc server " + address + " closed the connection", "while measuring workload 'dropped'"});
    std::vector<MeasureResult> r = m->measure(sample_task("again", 1), MeasureOptions());
    ASSERT_EQ(r.size(), 1u);
    EXPECT_DOUBLE_EQ(r[0].seconds, 0.5);
    fake_server.join();
    ::close(lfd);
}

TEST(RpcTest, WrongResultCountIsAnError) {
    int port = 0;
    int lfd = listen_raw(port);
    std::thread fake_server([lfd] {
        int fd = ::accept(lfd, nullptr, nullptr);
        recv_frame(fd);
        send_bytes(fd, frame(R"({"ok": true, "protocol": 1, "target": "t"})"));
        recv_frame(fd);
        send_bytes(fd, frame(R"({"results": []})"));
        recv_frame(fd);  // until the client goes
        ::close(fd);
    });
    {
        std::unique_ptr<Measurer> m = make_rpc_measurer("127.0.0.1:" + std::to_string(port));
        expect_error([&] { m->measure(sample_task("w", 2), MeasureOptions()); }, ErrorKind::kIOError,
                     {"returned 0 results for 2 candidates"});
    }
    fake_server.join();
    ::close(lfd);
}

TEST(RpcTest, StopReturnsWhileClientsAreConnected) {
    auto server = std::make_unique<ServerThread>();
    std::unique_ptr<Measurer> m = make_rpc_measurer(server->address());
    int idle = connect_raw(server->port());  // connected, never says anything
    server.reset();                          // stop() + join: must not wait for the clients
    expect_error([&] { m->measure(sample_task("after stop", 1), MeasureOptions()); }, ErrorKind::kIOError, {});
    ::close(idle);
}

TEST(RpcTest, ListeningOnABusyPortIsAClearError) {
    ServerThread server;
    expect_error([&] { RpcServer(std::make_unique<FakeMeasurer>(), "127.0.0.1", server.port()); },
                 ErrorKind::kIOError, {"cannot listen on 127.0.0.1:" + std::to_string(server.port())});
}

}  // namespace
}  // namespace kiln::tune
