// A serve::Server for frontend tests: a few hand-made models answered on threads of its own,
// so that frontends are tested without the real core.
//   add_one  FP32 input "x" (any shape) -> output "y" = x + 1 (and INT64 "x" -> INT64 "y")
//   echo     every input back as an output of the same name, dtype and shape
//   slow     like add_one, answered once release() is called (or after 10 s)
//   full     always kUnavailable ("queue full"); late: kDeadlineExceeded; broken: kInternal
// Models are ready except "loading"; version "1" exists for each, "2" does not.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "serve/server.h"

namespace kiln::serve::testing {

class FakeServer : public Server {
public:
    ~FakeServer() override {
        release();
        std::lock_guard<std::mutex> lock(threads_mutex_);
        for (std::thread& t : threads_) t.join();
    }

    bool live() const override { return true; }
    bool ready() const override { return ready_flag; }
    bool model_ready(const std::string& name, const std::string& version) const override {
        return known(name) && name != "loading" && (version.empty() || version == "1");
    }
    ServerMetadata metadata() const override { return {"kiln", "0.1.0", {"binary_tensor_data", "statistics"}}; }
    Failure model_metadata(const std::string& name, const std::string& version, ModelMetadata& out) const override {
        if (Failure f = check_model(name, version); !f.ok()) return f;
        out = {name, {"1"}, "kiln", {{"x", "FP32", {-1, 2}}}, {{"y", "FP32", {-1, 2}}}};
        return Failure::none();
    }
    Failure model_config_json(const std::string& name, const std::string& version, std::string& out) const override {
        if (Failure f = check_model(name, version); !f.ok()) return f;
        out = R"({"name":")" + name + R"(","max_batch_size":8})";
        return Failure::none();
    }

    void infer(InferRequest request, InferCallback done) override {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            last_request = request;
        }
        if (Failure f = check_model(request.model, request.version); !f.ok()) return done(f, {});
        arrived++;
        std::lock_guard<std::mutex> lock(threads_mutex_);
        threads_.emplace_back([this, request = std::move(request), done = std::move(done)]() mutable {
            if (request.model == "slow") {
                std::unique_lock<std::mutex> lock(mutex_);
                cv_.wait_for(lock, std::chrono::seconds(10), [this] { return released_; });
            }
            InferResponse response{request.model, "1", request.id, {}};
            Failure f = run(request, response);
            done(std::move(f), std::move(response));
            answered++;
        });
    }

    std::vector<RepositoryEntry> repository_index(bool ready_only) const override {
        std::vector<RepositoryEntry> out{{"add_one", "1", "READY", ""}};
        if (!ready_only) out.push_back({"loading", "", "UNAVAILABLE", "unloaded"});
        return out;
    }
    Failure load_model(const std::string& name) override {
        if (!known(name)) return {Code::kNotFound, "unknown model '" + name + "'"};
        loads.push_back(name);
        return Failure::none();
    }
    Failure unload_model(const std::string& name) override {
        if (!known(name)) return {Code::kNotFound, "unknown model '" + name + "'"};
        unloads.push_back(name);
        return Failure::none();
    }
    Failure statistics(const std::string& name, const std::string& version,
                       std::vector<ModelStatistics>& out) const override {
        if (!name.empty())
            if (Failure f = check_model(name, version); !f.ok()) return f;
        ModelStatistics s;
        s.name = name.empty() ? "add_one" : name;
        s.version = "1";
        s.last_inference_ms = 1700000000123;
        s.inference_count = 6;
        s.execution_count = 2;
        s.success = {6, 6000};
        s.queue = {6, 600};
        s.compute_infer = {2, 2000};
        s.batch_stats = {{4, {1, 10}, {1, 1000}, {1, 20}}};
        out = {s};
        return Failure::none();
    }
    std::string metrics_text() const override { return "# TYPE kiln_requests counter\nkiln_requests 3\n"; }
    void shutdown() override {}

    /// Lets every waiting "slow" request finish.
    void release() {
        std::lock_guard<std::mutex> lock(mutex_);
        released_ = true;
        cv_.notify_all();
    }
    InferRequest last() {
        std::lock_guard<std::mutex> lock(mutex_);
        return last_request;
    }

    std::atomic<bool> ready_flag{true};
    std::atomic<int> arrived{0}, answered{0};
    std::vector<std::string> loads, unloads;

private:
    static bool known(const std::string& name) {
        static const std::set<std::string> names{"add_one", "echo", "slow", "full", "late", "broken", "loading"};
        return names.count(name) > 0;
    }
    static Failure check_model(const std::string& name, const std::string& version) {
        if (!known(name)) return {Code::kNotFound, "unknown model '" + name + "'"};
        if (!version.empty() && version != "1")
            return {Code::kNotFound, "model '" + name + "' has no version " + version};
        return Failure::none();
    }
    static Failure run(const InferRequest& request, InferResponse& response) {
        const std::string& m = request.model;
        if (m == "full") return {Code::kUnavailable, "model 'full': queue full, 4 requests"};
        if (m == "late") return {Code::kDeadlineExceeded, "model 'late': timeout passed in the queue"};
        if (m == "broken") return {Code::kInternal, "model 'broken' failed"};
        if (m == "echo") {
            response.outputs = request.inputs;
            return Failure::none();
        }
        if (request.inputs.size() != 1 || request.inputs[0].name != "x")
            return {Code::kInvalidArgument, "model '" + m + "' expects one input 'x'"};
        const Tensor& x = request.inputs[0].tensor;
        Tensor y(x.dtype(), x.shape());
        if (x.dtype() == DType::kFloat32)
            for (int64_t i = 0; i < x.numel(); ++i) y.data_as<float>()[i] = x.data_as<float>()[i] + 1;
        else if (x.dtype() == DType::kInt64)
            for (int64_t i = 0; i < x.numel(); ++i) y.data_as<int64_t>()[i] = x.data_as<int64_t>()[i] + 1;
        else
            return {Code::kInvalidArgument, "model '" + m + "' input 'x': expected FP32 or INT64"};
        response.outputs = {{"y", y}};
        return Failure::none();
    }

    std::mutex mutex_;
    std::condition_variable cv_;
    bool released_ = false;
    InferRequest last_request;
    std::mutex threads_mutex_;
    std::vector<std::thread> threads_;
};

}  // namespace kiln::serve::testing
