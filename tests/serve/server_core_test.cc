// serve::Server end to end through infer(): real models compiled by Kiln, answers compared with
// direct Session runs of the same model (an independent path: no queue, no batching).
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "kiln/session.h"
#include "serve/server.h"
#include "serve_test_models.h"

namespace kiln::serve {
namespace {

using namespace kiln::serve::testing;
using namespace std::chrono_literals;

struct Answer {
    Failure failure;
    InferResponse response;
};

/// Sends a request and returns a future of its (single) answer; counts answers per request.
std::future<Answer> send(Server& s, InferRequest r, std::atomic<int>* answers = nullptr) {
    auto p = std::make_shared<std::promise<Answer>>();
    auto f = p->get_future();
    s.infer(std::move(r), [p, answers](Failure f, InferResponse resp) {
        if (answers) ++*answers;
        p->set_value({std::move(f), std::move(resp)});
    });
    return f;
}

InferRequest request(const std::string& model, const std::string& input, Tensor t) {
    InferRequest r;
    r.model = model;
    r.inputs.push_back({input, std::move(t)});
    return r;
}

/// Waits (up to 10 s) until the server's metrics show runs of `priority` holding `cores`
/// cores, or `finished()` (the run ended first); whether the metrics showed it.
bool wait_for_cores(Server& s, const char* priority, int cores, const std::function<bool()>& finished) {
    const std::string line = std::string("kiln_cores_in_use{priority=\"") + priority + "\"} " + std::to_string(cores) + "\n";
    for (int i = 0; i < 100000 && !finished(); ++i) {
        if (s.metrics_text().find(line) != std::string::npos) return true;
        std::this_thread::sleep_for(100us);
    }
    return s.metrics_text().find(line) != std::string::npos;
}

std::unique_ptr<Server> start(const TempRepo& repo, ServerOptions opts = {}) {
    opts.model_repository = repo.root.string();
    auto s = Server::create(opts);
    for (int i = 0; i < 6000 && !s->ready(); ++i) std::this_thread::sleep_for(10ms);
    EXPECT_TRUE(s->ready());
    return s;
}

TEST(serve_Server, DigitsMatchesADirectSessionRun) {
    TempRepo repo("digits");
    repo.copy("digits", std::string(KILN_SOURCE_DIR) + "/models/digits/digits_cnn.onnx");
    auto s = start(repo);
    ASSERT_TRUE(s->model_ready("digits", ""));
    ModelMetadata md;
    ASSERT_TRUE(s->model_metadata("digits", "", md).ok());
    ASSERT_EQ(md.inputs.size(), 1u);
    EXPECT_EQ(md.inputs[0].datatype, "FP32");
    EXPECT_EQ(md.inputs[0].shape, (std::vector<int64_t>{-1, 1, 8, 8}));
    Tensor x = random_tensor({3, 1, 8, 8}, 5);
    InferRequest r = request("digits", "image", x.clone());
    r.id = "req-7";
    Answer a = send(*s, std::move(r)).get();
    ASSERT_TRUE(a.failure.ok()) << a.failure.message;
    EXPECT_EQ(a.response.id, "req-7");
    SessionOptions so;
    so.dims["N"] = 3;
    auto ref = Session::load(std::string(KILN_SOURCE_DIR) + "/models/digits/digits_cnn.onnx", so);
    auto want = ref->run({{"image", x}});
    ASSERT_EQ(a.response.outputs.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(a.response.outputs[i].name, ref->outputs()[i].name);
        EXPECT_TRUE(same_values(a.response.outputs[i].tensor, want[i])) << ref->outputs()[i].name;
    }
    std::string json;
    ASSERT_TRUE(s->model_config_json("digits", "", json).ok());
    EXPECT_NE(json.find("\"max_batch_size\":8"), std::string::npos) << json;
    std::vector<ModelStatistics> stats;
    ASSERT_TRUE(s->statistics("digits", "", stats).ok());
    ASSERT_EQ(stats.size(), 1u);
    EXPECT_EQ(stats[0].inference_count, 3u);  // batch rows, not requests
    EXPECT_NE(s->metrics_text().find("kiln_inference_requests_total{model=\"digits\",version=\"1\",outcome=\"success\"} 1"),
              std::string::npos);
}

TEST(serve_Server, BadRequestsGetClearErrors) {
    TempRepo repo("bad");
    repo.add("mlp", mlp_model());
    auto s = start(repo);
    auto expect = [&](InferRequest r, Code code, const std::string& needle) {
        Answer a = send(*s, std::move(r)).get();
        EXPECT_EQ(a.failure.code, code) << a.failure.message;
        EXPECT_NE(a.failure.message.find(needle), std::string::npos) << a.failure.message;
    };
    expect(request("nope", "x", random_tensor({1, 4}, 1)), Code::kNotFound, "unknown model 'nope'");
    InferRequest v = request("mlp", "x", random_tensor({1, 4}, 1));
    v.version = "9";
    expect(std::move(v), Code::kNotFound, "no version '9'");
    expect(request("mlp", "q", random_tensor({1, 4}, 1)), Code::kInvalidArgument, "unknown input 'q'");
    expect(request("mlp", "x", random_tensor({1, 5}, 1)), Code::kInvalidArgument, "expected shape [-1,4], got [1,5]");
    expect(request("mlp", "x", random_tensor({9, 4}, 1)), Code::kInvalidArgument, "batch size 9");
    expect(request("mlp", "x", Tensor(DType::kInt64, {1, 4})), Code::kInvalidArgument, "expected datatype FP32, got INT64");
    InferRequest none;
    none.model = "mlp";
    expect(std::move(none), Code::kInvalidArgument, "input 'x' is missing");
    // The model still serves.
    EXPECT_TRUE(send(*s, request("mlp", "x", random_tensor({2, 4}, 3))).get().failure.ok());
}

TEST(serve_Server, DynamicBatchingIsBitIdenticalToUnbatchedRuns) {
    TempRepo repo("batch");
    repo.add("mlp", mlp_model(),
             "max_batch_size: 8\ndynamic_batching { preferred_batch_size: [ 6 ] max_queue_delay_microseconds: 200000 }\n");
    auto s = start(repo);
    std::vector<Tensor> xs;
    std::vector<std::future<Answer>> answers;
    for (int i = 0; i < 6; ++i) {
        xs.push_back(random_tensor({i % 2 + 1, 4}, 100 + i));  // 1 or 2 rows: 9 rows in all
        answers.push_back(send(*s, request("mlp", "x", xs.back().clone())));
    }
    auto ref = Session::load((repo.root / "mlp" / "1" / "model.onnx").string());
    for (int i = 0; i < 6; ++i) {
        Answer a = answers[i].get();
        ASSERT_TRUE(a.failure.ok()) << a.failure.message;
        auto want = ref->run({{"x", xs[i]}});
        EXPECT_TRUE(same_values(a.response.outputs[0].tensor, want[0])) << "request " << i;
    }
    std::vector<ModelStatistics> stats;
    ASSERT_TRUE(s->statistics("mlp", "1", stats).ok());
    EXPECT_EQ(stats[0].inference_count, 9u);  // batch rows of the 6 requests
    EXPECT_LT(stats[0].execution_count, 6u);  // some requests shared a run
}

TEST(serve_Server, QueueFullDeadlineUnloadAndShutdown) {
    TempRepo repo("queue");
    // Requests wait up to 2 s for a batch of 8 to fill: they stay queued while we look.
    repo.add("slow", mlp_model(),
             "max_batch_size: 8\ndynamic_batching { max_queue_delay_microseconds: 2000000\n"
             "  default_queue_policy { max_queue_size: 3 allow_timeout_override: true } }\n");
    auto s = start(repo);
    std::atomic<int> answered{0};
    std::vector<std::future<Answer>> queued;
    for (int i = 0; i < 3; ++i) queued.push_back(send(*s, request("slow", "x", random_tensor({1, 4}, i)), &answered));
    Answer full = send(*s, request("slow", "x", random_tensor({1, 4}, 9))).get();
    EXPECT_EQ(full.failure.code, Code::kUnavailable);
    EXPECT_NE(full.failure.message.find("queue is full"), std::string::npos) << full.failure.message;
    // Unload: queued requests are answered kUnavailable at once.
    ASSERT_TRUE(s->unload_model("slow").ok());
    for (auto& f : queued) {
        Answer a = f.get();
        EXPECT_EQ(a.failure.code, Code::kUnavailable) << a.failure.message;
    }
    EXPECT_EQ(answered.load(), 3);
    EXPECT_FALSE(s->model_ready("slow", ""));
    EXPECT_EQ(send(*s, request("slow", "x", random_tensor({1, 4}, 1))).get().failure.code, Code::kUnavailable);
    // Reload; a request with a 50 ms timeout is answered kDeadlineExceeded long before 2 s.
    ASSERT_TRUE(s->load_model("slow").ok());
    InferRequest r = request("slow", "x", random_tensor({1, 4}, 4));
    r.timeout = 50ms;
    auto t0 = std::chrono::steady_clock::now();
    Answer late = send(*s, std::move(r)).get();
    EXPECT_EQ(late.failure.code, Code::kDeadlineExceeded) << late.failure.message;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 1500ms);
    // Shutdown drains: queued requests run (without waiting for the batch delay) and succeed.
    std::vector<std::future<Answer>> drained;
    for (int i = 0; i < 2; ++i) drained.push_back(send(*s, request("slow", "x", random_tensor({1, 4}, 20 + i))));
    s->shutdown();
    for (auto& f : drained) EXPECT_TRUE(f.get().failure.ok());
    EXPECT_EQ(send(*s, request("slow", "x", random_tensor({1, 4}, 1))).get().failure.code, Code::kUnavailable);
}

TEST(serve_Server, EveryRequestAnsweredExactlyOnceUnderConcurrency) {
    TempRepo repo("many");
    repo.add("mlp", mlp_model(),
             "max_batch_size: 8\ndynamic_batching { max_queue_delay_microseconds: 500 }\ninstance_group [ { count: 2 } ]\n");
    auto s = start(repo);
    auto ref = Session::load((repo.root / "mlp" / "1" / "model.onnx").string());
    constexpr int kThreads = 8, kEach = 40;
    std::atomic<int> answers{0}, wrong{0};
    std::vector<std::thread> clients;
    for (int t = 0; t < kThreads; ++t)
        clients.emplace_back([&, t] {
            std::vector<std::pair<Tensor, std::future<Answer>>> mine;
            for (int i = 0; i < kEach; ++i) {
                Tensor x = random_tensor({1 + (i % 3), 4}, static_cast<uint32_t>(t * 1000 + i));
                InferRequest r = request("mlp", "x", x.clone());
                r.priority = i % 4 == 0 ? Priority::kRealTime : Priority::kBestEffort;
                mine.emplace_back(x, send(*s, std::move(r), &answers));
            }
            for (auto& [x, f] : mine) {
                Answer a = f.get();
                if (!a.failure.ok() || !same_values(a.response.outputs[0].tensor, ref->run({{"x", x}})[0])) ++wrong;
            }
        });
    for (auto& c : clients) c.join();
    s->shutdown();
    EXPECT_EQ(answers.load(), kThreads * kEach);
    EXPECT_EQ(wrong.load(), 0);
}

/// The value of an unlabelled counter line `name V` in the metrics text (-1 if none).
double counter_value(const std::string& text, const std::string& name) {
    const std::string head = "\n" + name + " ";
    const size_t at = text.find(head);
    return at == std::string::npos ? -1 : std::stod(text.substr(at + head.size()));
}

// With the runtime's preemption (serve-rt), a real-time request arriving during a long
// best-effort run preempts it and is served before that run finishes, and the preempted run's
// result is still exact. The BE run (512 rows through 64 [256 x 256] matmuls, ~4 GFLOP: tens of
// ms on an idle fast machine, more here) is surely running when RT arrives: RT is sent once the
// BE run holds its cores (kiln_cores_in_use{priority="best_effort"} 2), so RT finds both cores
// taken and must preempt it; the BE run can resume only after RT gives the cores back.
TEST(serve_Server, RealTimeDuringBestEffortBothCorrect) {
    TempRepo repo("rtbe");
    repo.add("deep", deep_model(256, 64), "max_batch_size: 512\n");
    ServerOptions opts;
    opts.threads = 2;
    auto s = start(repo, opts);
    auto ref = Session::load((repo.root / "deep" / "1" / "model.onnx").string());
    Tensor big = random_tensor({512, 256}, 1), small = random_tensor({1, 256}, 2);
    InferRequest be = request("deep", "x", big.clone());
    be.priority = Priority::kBestEffort;
    std::atomic<int64_t> be_done_at{0}, rt_done_at{0};
    auto be_answer = std::make_shared<std::promise<Answer>>();
    s->infer(std::move(be), [&, be_answer](Failure f, InferResponse r) {
        be_done_at = std::chrono::steady_clock::now().time_since_epoch().count();
        be_answer->set_value({std::move(f), std::move(r)});
    });
    // infer() queued the request before returning; the model's worker takes it and runs it.
    const bool held = wait_for_cores(*s, "best_effort", 2, [&] { return be_done_at != 0; });
    ASSERT_EQ(be_done_at.load(), 0) << "the BE run ended before the test saw it hold its cores";
    ASSERT_TRUE(held) << "the BE run never held both cores";
    InferRequest rt = request("deep", "x", small.clone());
    rt.priority = Priority::kRealTime;
    // Both answer times are taken in the answer callbacks (a time taken after the future
    // returned adds the test thread's wake-up, which a resumed best-effort run can beat).
    auto rt_answer = std::make_shared<std::promise<Answer>>();
    s->infer(std::move(rt), [&, rt_answer](Failure f, InferResponse r) {
        rt_done_at = std::chrono::steady_clock::now().time_since_epoch().count();
        rt_answer->set_value({std::move(f), std::move(r)});
    });
    Answer rt_a = rt_answer->get_future().get();
    Answer be_a = be_answer->get_future().get();
    ASSERT_TRUE(rt_a.failure.ok()) << rt_a.failure.message;
    ASSERT_TRUE(be_a.failure.ok()) << be_a.failure.message;
    EXPECT_TRUE(same_values(rt_a.response.outputs[0].tensor, ref->run({{"x", small}})[0]));
    EXPECT_TRUE(same_values(be_a.response.outputs[0].tensor, ref->run({{"x", big}})[0]));
    const std::string metrics = s->metrics_text();
    EXPECT_GE(counter_value(metrics, "kiln_preemptions_total"), 1) << metrics;
    EXPECT_LT(rt_done_at.load(), be_done_at.load()) << "the real-time request finished after the best-effort run";
}

// InferRequest::caller_waits (the HTTP frontend's): an RT request with no other RT request of its
// version queued or running runs on the calling thread, so infer() returns with it answered; it
// still preempts the BE run that holds the cores, and both answers are right.
TEST(serve_Server, ACallerWaitsRealTimeRequestRunsOnTheCallersThread) {
    TempRepo repo("inline");
    repo.add("deep", deep_model(256, 64), "max_batch_size: 512\n");
    ServerOptions opts;
    opts.threads = 2;
    auto s = start(repo, opts);
    auto ref = Session::load((repo.root / "deep" / "1" / "model.onnx").string());
    Tensor big = random_tensor({512, 256}, 1), small = random_tensor({1, 256}, 2);
    InferRequest be = request("deep", "x", big.clone());
    be.priority = Priority::kBestEffort;
    auto be_answer = send(*s, std::move(be));
    wait_for_cores(*s, "best_effort", 2, [&] { return be_answer.wait_for(0s) == std::future_status::ready; });
    ASSERT_NE(be_answer.wait_for(0s), std::future_status::ready) << "the BE run ended before the RT request came";
    InferRequest rt = request("deep", "x", small.clone());
    rt.priority = Priority::kRealTime;
    rt.caller_waits = true;
    const std::thread::id caller = std::this_thread::get_id();
    std::thread::id answered_on;
    std::optional<Answer> rt_a;
    s->infer(std::move(rt), [&](Failure f, InferResponse r) {
        answered_on = std::this_thread::get_id();
        rt_a = Answer{std::move(f), std::move(r)};
    });
    ASSERT_TRUE(rt_a.has_value()) << "infer() returned before the caller-waits RT request was answered";
    EXPECT_EQ(answered_on, caller);
    ASSERT_TRUE(rt_a->failure.ok()) << rt_a->failure.message;
    EXPECT_TRUE(same_values(rt_a->response.outputs[0].tensor, ref->run({{"x", small}})[0]));
    Answer be_a = be_answer.get();
    ASSERT_TRUE(be_a.failure.ok()) << be_a.failure.message;
    EXPECT_TRUE(same_values(be_a.response.outputs[0].tensor, ref->run({{"x", big}})[0]));
    EXPECT_GE(counter_value(s->metrics_text(), "kiln_preemptions_total"), 1);
    s->shutdown();
}

// An RT request claims the cores when it is queued (CoreScheduler::claim_for_real_time), before
// its worker takes it. A claimed request that leaves the queue without running (its deadline
// passed while an earlier RT run held the worker) must give the claim back: a leaked claim
// would keep every best-effort run off those cores for good. RT request A (512 rows) holds the
// worker; B, queued behind it with a 1 ms timeout, expires; a BE request after them must run.
TEST(serve_Server, AnExpiredRealTimeRequestGivesItsClaimOnTheCoresBack) {
    TempRepo repo("claim");
    repo.add("deep", deep_model(256, 64), "max_batch_size: 512\n");
    ServerOptions opts;
    opts.threads = 2;
    auto s = start(repo, opts);
    auto ref = Session::load((repo.root / "deep" / "1" / "model.onnx").string());
    InferRequest a = request("deep", "x", random_tensor({512, 256}, 1));
    a.priority = Priority::kRealTime;
    auto a_answer = send(*s, std::move(a));
    wait_for_cores(*s, "realtime", 2, [&] { return a_answer.wait_for(0s) == std::future_status::ready; });
    InferRequest b = request("deep", "x", random_tensor({1, 256}, 2));
    b.priority = Priority::kRealTime;
    b.timeout = 1ms;
    Answer b_a = send(*s, std::move(b)).get();
    ASSERT_EQ(b_a.failure.code, Code::kDeadlineExceeded) << "B ran: the test did not expire a claimed request";
    ASSERT_TRUE(a_answer.get().failure.ok());
    Tensor small = random_tensor({1, 256}, 3);
    InferRequest c = request("deep", "x", small.clone());
    c.priority = Priority::kBestEffort;
    auto c_answer = send(*s, std::move(c));
    // A leaked claim never lets C start; the wait only bounds how long the test hangs.
    ASSERT_EQ(c_answer.wait_for(120s), std::future_status::ready) << "the BE request never ran: the claim leaked";
    Answer c_a = c_answer.get();
    ASSERT_TRUE(c_a.failure.ok()) << c_a.failure.message;
    EXPECT_TRUE(same_values(c_a.response.outputs[0].tensor, ref->run({{"x", small}})[0]));
    s->shutdown();
}

/// The nice value of every thread of this process (/proc/self/task/TID/stat, field 19).
std::vector<int> thread_nice_values() {
    std::vector<int> out;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
        std::ifstream f(e.path() / "stat");
        std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        const size_t close = stat.rfind(')');
        if (close == std::string::npos) continue;
        std::istringstream rest(stat.substr(close + 2));
        std::string field;
        for (int i = 3; i <= 19 && rest >> field; ++i)  // fields 3 (state) .. 19 (nice)
            if (i == 19) out.push_back(std::stoi(field));
    }
    return out;
}

// ServerOptions::be_nice: the best-effort workers run at that nice value, the real-time ones
// (and the test's own thread) at the process's; a value the OS cannot take is refused.
TEST(serve_Server, BestEffortWorkersRunAtTheirNiceValue) {
    const std::vector<int> before = thread_nice_values();
    ASSERT_EQ(std::count(before.begin(), before.end(), 7), 0) << "a thread already at nice 7";
    TempRepo repo("be_nice");
    repo.add("mlp", mlp_model());
    ServerOptions opts;
    opts.threads = 2;
    opts.be_nice = 7;
    {
        auto s = start(repo, opts);
        InferRequest be = request("mlp", "x", random_tensor({2, 4}, 9));
        be.priority = Priority::kBestEffort;
        Answer a = send(*s, std::move(be)).get();
        ASSERT_TRUE(a.failure.ok()) << a.failure.message;
        const std::vector<int> nice = thread_nice_values();
        EXPECT_GE(std::count(nice.begin(), nice.end(), 7), 1) << "no best-effort worker at nice 7";
        EXPECT_GE(std::count(nice.begin(), nice.end(), 0), 2) << "the real-time workers lost the process's priority";
        EXPECT_EQ(getpriority(PRIO_PROCESS, 0), 0) << "the test's own thread";
        s->shutdown();
    }
    opts.be_nice = 25;
    opts.model_repository = repo.root.string();
    try {
        (void)Server::create(opts);
        ADD_FAILURE() << "be_nice 25 was accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
        EXPECT_NE(std::string(e.what()).find("be_nice"), std::string::npos) << e.what();
    }
}

/// The value of a metric line `name{model="M",version="1"} V` in the metrics text (-1 if none).
double metric_value(const std::string& text, const std::string& name, const std::string& model) {
    const std::string head = name + "{model=\"" + model + "\",version=\"1\"} ";
    const size_t at = text.find(head);
    return at == std::string::npos ? -1 : std::stod(text.substr(at + head.size()));
}

TEST(serve_Server, OneSessionServesEveryBatchSizeSharingItsWeights) {
    const std::string model = std::string(KILN_SOURCE_DIR) + "/models/digits/digits_cnn.onnx";
    TempRepo repo("one_session");
    repo.copy("digits", model);
    std::ofstream(repo.root / "digits" / "config.pbtxt") << "max_batch_size: 8\n";  // no batcher: a run per request
    auto s = start(repo);
    // The load compiled batch sizes 1 and 8 (the smallest and the largest the batcher forms).
    EXPECT_EQ(metric_value(s->metrics_text(), "kiln_model_specializations", "digits"), 2);
    size_t per_session_constants = 0;  // what a session per batch size (the old server) held
    size_t weight_bytes = 0;
    for (int64_t rows : {1, 3, 8}) {
        Tensor x = random_tensor({rows, 1, 8, 8}, static_cast<uint32_t>(40 + rows));
        Answer a = send(*s, request("digits", "image", x.clone())).get();
        ASSERT_TRUE(a.failure.ok()) << a.failure.message;
        SessionOptions so;
        so.dims["N"] = rows;
        auto ref = Session::load(model, so);
        auto want = ref->run({{"image", x}});
        per_session_constants += ref->stats().constant_bytes;
        weight_bytes = ref->stats().weight_bytes;
        ASSERT_EQ(a.response.outputs.size(), want.size());
        for (size_t i = 0; i < want.size(); ++i)
            EXPECT_TRUE(same_values(a.response.outputs[i].tensor, want[i])) << "batch " << rows << " output " << i;
    }
    const std::string text = s->metrics_text();
    EXPECT_EQ(metric_value(text, "kiln_model_sessions", "digits"), 1) << text;
    EXPECT_EQ(metric_value(text, "kiln_model_specializations", "digits"), 3) << text;  // 1, 3 and 8
    EXPECT_EQ(metric_value(text, "kiln_model_compiles", "digits"), 3) << text;
    EXPECT_EQ(metric_value(text, "kiln_model_weight_bytes", "digits"), static_cast<double>(weight_bytes)) << text;
    // The specializations share their constants: the session holds the imported weights once,
    // where a session per batch size held three copies. Not exactly one copy in all: batch 8's
    // fc layer packs its weights for the matmul micro-kernel (a second layout of those 2.5 KB of
    // 7.4 KB); batches 1 and 3 use them as imported.
    const double constants = metric_value(text, "kiln_model_constant_bytes", "digits");
    EXPECT_GE(constants, static_cast<double>(weight_bytes)) << text;
    EXPECT_LE(constants + 1.5 * static_cast<double>(weight_bytes), static_cast<double>(per_session_constants))
        << text << "\nconstants of a session per batch size: " << per_session_constants;
}

TEST(serve_Server, AModelOverItsMemoryBudgetAnswersUnavailable) {
    // y = x @ W with W [4, 300000]: one row's output is 1.2 MB, over a 1 MB budget.
    onnx::ModelProto m = make_model(17);
    auto* g = m.mutable_graph();
    add_input(g, "x", {std::string("N"), int64_t{4}});
    add_float_init(g, "W", {4, 300000}, pattern(4 * 300000, 0.25f));
    add_node(g, "MatMul", {"x", "W"}, {"y"});
    add_output(g, "y", {std::string("N"), int64_t{300000}});
    TempRepo repo("oom");
    repo.add("wide", m, "max_batch_size: 2\nparameters { key: \"memory_limit_mb\" value { string_value: \"1\" } }\n");
    auto s = start(repo);
    Answer a = send(*s, request("wide", "x", random_tensor({1, 4}, 1))).get();
    EXPECT_EQ(a.failure.code, Code::kUnavailable) << a.failure.message;
    EXPECT_NE(a.failure.message.find("OutOfMemory"), std::string::npos) << a.failure.message;
}

}  // namespace
}  // namespace kiln::serve
