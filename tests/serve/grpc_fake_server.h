// A fake serve::Server for the gRPC frontend's tests: a handful of models with known behaviour,
// and a record of what the frontend asked for. No compiler, no real models.
//   add_one  FP32 INPUT0 -> OUTPUT0 = INPUT0 + 1, OUTPUT1 = INPUT0 * 2 (answered before infer
//            returns, as the server does for requests it can answer at once)
//   echo     every input back as an output of the same name, any dtype (answered on a thread)
//   slow     as add_one, answered after `slow_ms` on a thread of its own
//   failing  kInternal; full: kUnavailable; expired: kDeadlineExceeded
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "serve/server.h"

namespace kiln::serve::testing {

class FakeServer final : public Server {
public:
    ~FakeServer() override {
        std::lock_guard lock(threads_mu_);
        for (auto& t : threads_) t.join();
    }

    std::atomic<bool> is_live{true};
    std::atomic<bool> is_ready{true};
    std::atomic<int> slow_ms{200};
    std::atomic<int> in_flight{0};      // slow requests not answered yet
    std::atomic<int> max_in_flight{0};
    std::atomic<int> received{0};       // infer() calls

    InferRequest last_request() {
        std::lock_guard lock(mu_);
        return last_;
    }
    std::vector<std::string> loads() {
        std::lock_guard lock(mu_);
        return loads_;
    }

    bool live() const override { return is_live; }
    bool ready() const override { return is_ready; }
    bool model_ready(const std::string& name, const std::string& version) const override {
        return known(name) && (version.empty() || version == "1");
    }

    ServerMetadata metadata() const override {
        return {"kiln", "0.1.0", {"model_repository", "statistics", "schedule_policy"}};
    }

    Failure model_metadata(const std::string& name, const std::string& version,
                           ModelMetadata& out) const override {
        if (!known(name)) return unknown(name);
        out.name = name;
        out.versions = {"1"};
        out.platform = "onnxruntime_onnx";
        out.inputs = {{"INPUT0", "FP32", {-1, 3}}};
        out.outputs = {{"OUTPUT0", "FP32", {-1, 3}}, {"OUTPUT1", "FP32", {-1, 3}}};
        return {};
    }

    Failure model_config_json(const std::string& name, const std::string& version,
                              std::string& out) const override {
        if (name == "bad_config") {
            out = R"({"name": "bad_config", "max_batch_size": "many"})";
            return {};
        }
        if (!known(name)) return unknown(name);
        out = R"({"name": ")" + name + R"(", "platform": "onnxruntime_onnx", "max_batch_size": 8,
            "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1, 3]}],
            "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1, 3]}],
            "dynamic_batching": {"preferred_batch_size": [4, 8],
                                 "max_queue_delay_microseconds": 100},
            "instance_group": [{"count": 2, "kind": "KIND_CPU"}],
            "parameters": {"sla_ms": {"string_value": "50"}})";
        // A field Kiln's ModelConfig message does not have: dropped, not a failure.
        if (name == "echo") out += R"(, "kiln_unknown_field": {"x": 1})";
        out += "}";
        return {};
    }

    void infer(InferRequest request, InferCallback done) override {
        ++received;
        {
            std::lock_guard lock(mu_);
            last_ = request;
        }
        const std::string& m = request.model;
        if (!known(m)) return done(unknown(m), {});
        if (m == "failing") return done({Code::kInternal, "model 'failing': the kernel failed"}, {});
        if (m == "full") return done({Code::kUnavailable, "model 'full': the queue is full (4)"}, {});
        if (m == "expired") {
            return done({Code::kDeadlineExceeded, "model 'expired': timed out in the queue"}, {});
        }
        if (m == "echo") {
            spawn([request = std::move(request), done = std::move(done)] {
                InferResponse r{request.model, "1", request.id, request.inputs};
                done({}, std::move(r));
            });
            return;
        }
        if (m == "slow") {
            int now = ++in_flight;
            int seen = max_in_flight;
            while (now > seen && !max_in_flight.compare_exchange_weak(seen, now)) {}
            spawn([this, request = std::move(request), done = std::move(done)]() mutable {
                std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms));
                InferResponse r;
                Failure f = add_one(request, r);
                --in_flight;
                done(f, std::move(r));
            });
            return;
        }
        InferResponse r;
        Failure f = add_one(request, r);
        done(f, std::move(r));
    }

    std::vector<RepositoryEntry> repository_index(bool ready_only) const override {
        std::vector<RepositoryEntry> all = {{"add_one", "1", "READY", ""},
                                            {"broken", "1", "UNAVAILABLE", "compile error: x"}};
        if (ready_only) all.pop_back();
        return all;
    }

    Failure load_model(const std::string& name) override {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a compile takes time
        if (!known(name)) return unknown(name);
        std::lock_guard lock(mu_);
        loads_.push_back(name);
        return {};
    }
    Failure unload_model(const std::string& name) override {
        if (!known(name)) return unknown(name);
        std::lock_guard lock(mu_);
        loads_.push_back("-" + name);
        return {};
    }

    Failure statistics(const std::string& name, const std::string& version,
                       std::vector<ModelStatistics>& out) const override {
        if (!name.empty() && !known(name)) return unknown(name);
        for (const char* n : {"add_one", "echo"}) {
            if (!name.empty() && name != n) continue;
            ModelStatistics s;
            s.name = n;
            s.version = "1";
            s.last_inference_ms = 1700000000000;
            s.inference_count = 12;
            s.execution_count = 3;
            s.success = {12, 12000};
            s.queue = {12, 3400};
            s.compute_infer = {3, 9000};
            s.batch_stats = {{4, {3, 30}, {3, 9000}, {3, 60}}};
            out.push_back(s);
        }
        return {};
    }

    std::string metrics_text() const override { return ""; }
    void shutdown() override {}

private:
    static bool known(const std::string& name) {
        for (const char* n : {"add_one", "echo", "slow", "failing", "full", "expired"}) {
            if (name == n) return true;
        }
        return false;
    }
    static Failure unknown(const std::string& name) {
        return {Code::kNotFound, "unknown model '" + name + "'"};
    }

    static Failure add_one(const InferRequest& req, InferResponse& out) {
        if (req.inputs.size() != 1 || req.inputs[0].name != "INPUT0") {
            return {Code::kInvalidArgument,
                    "model '" + req.model + "': expected one input 'INPUT0', got " +
                        std::to_string(req.inputs.size()) + " inputs"};
        }
        const Tensor& x = req.inputs[0].tensor;
        if (x.dtype() != DType::kFloat32) {
            return {Code::kInvalidArgument, "model '" + req.model +
                                                "': input 'INPUT0': expected FP32, got " +
                                                dtype_name(x.dtype())};
        }
        Tensor y0(DType::kFloat32, x.shape()), y1(DType::kFloat32, x.shape());
        for (int64_t i = 0; i < x.numel(); ++i) {
            y0.data_as<float>()[i] = x.data_as<float>()[i] + 1;
            y1.data_as<float>()[i] = x.data_as<float>()[i] * 2;
        }
        out = {req.model, "1", req.id, {}};
        for (const auto& [name, t] : {NamedTensor{"OUTPUT0", y0}, NamedTensor{"OUTPUT1", y1}}) {
            bool wanted = req.outputs.empty();
            for (const auto& o : req.outputs) wanted |= o == name;
            if (wanted) out.outputs.push_back({name, t});
        }
        for (const auto& o : req.outputs) {
            if (o != "OUTPUT0" && o != "OUTPUT1") {
                return {Code::kInvalidArgument,
                        "model '" + req.model + "': unknown output '" + o + "'"};
            }
        }
        return {};
    }

    void spawn(std::function<void()> fn) {
        std::lock_guard lock(threads_mu_);
        threads_.emplace_back(std::move(fn));
    }

    mutable std::mutex mu_;
    InferRequest last_;
    std::vector<std::string> loads_;
    std::mutex threads_mu_;
    std::vector<std::thread> threads_;
};

}  // namespace kiln::serve::testing
