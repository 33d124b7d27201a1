// serve::Server: the repository, the core scheduler, the metrics and a deadline reaper behind
// the interface of server.h. Requests are routed to a ready ModelVersion, which validates,
// queues, batches, runs and answers them.
#include "serve/server.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <thread>

#include "kiln/error.h"
#include "serve/core_scheduler.h"
#include "serve/model_repository.h"
#include "serve/triton_metrics.h"
#include "serve/server_metrics.h"

namespace kiln::serve {
namespace {

/// ServerOptions::be_nice, checked.
int checked_be_nice(int nice) {
    KILN_CHECK(nice >= 0 && nice <= 19, kInvalidArgument)
        << "ServerOptions::be_nice: expected a nice value from 1 to 19 (0: off), got " << nice;
    return nice;
}

class ServerImpl final : public Server {
public:
    explicit ServerImpl(const ServerOptions& opts)
        : opts_(opts),
          cores_({opts.threads > 0 ? opts.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency())),
                  opts.be_padding, opts.preemption}),
          repo_(opts.model_repository, ServingContext{&cores_, &metrics_, [this](Clock::time_point d) { wake_reaper(d); },
                                                      checked_be_nice(opts.be_nice), opts.preemption}) {
        cores_.on_preempted = [this](std::chrono::nanoseconds latency) { metrics_.preempted(latency); };
        cores_.on_cores_in_use = [this](Priority p, int cores) { metrics_.cores_in_use(p, cores); };
        reaper_ = std::thread(&ServerImpl::reap, this);
    }

    ~ServerImpl() override { shutdown(); }

    void start(const ServerOptions& opts) {
        std::vector<std::string> names = list_model_folders(opts.model_repository);
        if (opts.model_control == "all") {
            for (const std::string& n : names) repo_.load_async(n);
        } else if (opts.model_control == "explicit") {
            for (const std::string& n : opts.load_models) {
                KILN_CHECK(std::find(names.begin(), names.end(), n) != names.end(), kInvalidArgument)
                    << "model '" << n << "' (to load at start) is not in the repository " << opts.model_repository;
                repo_.load_async(n);
            }
        } else {
            KILN_CHECK(opts.model_control == "none", kInvalidArgument)
                << "model_control: expected 'all', 'none' or 'explicit', got '" << opts.model_control << "'";
        }
    }

    bool live() const override { return true; }
    bool ready() const override { return !stopping() && repo_.settled(); }

    bool model_ready(const std::string& name, const std::string& version) const override {
        Failure why;
        return !stopping() && repo_.find(name, version, why) != nullptr;
    }

    ServerMetadata metadata() const override {
        ServerMetadata m;
        m.version = KILN_VERSION;
        m.extensions = {"model_repository", "statistics", "binary_tensor_data", "model_configuration", "schedule_policy"};
        return m;
    }

    Failure model_metadata(const std::string& name, const std::string& version, ModelMetadata& out) const override {
        Failure why;
        auto v = repo_.find(name, version, why);
        if (!v) return why;
        out = {};
        out.name = name;
        for (const auto& other : repo_.versions())
            if (other->model() == name && other->state() == ModelVersion::State::kReady) out.versions.push_back(other->version());
        const auto& c = v->config();
        out.platform = c.platform();
        bool batching = c.max_batch_size() > 0;
        auto describe = [&](const std::string& n, inference::DataType t, const auto& dims) {
            TensorMetadata m{n, "", {}};
            auto d = dtype_from_config(t);
            m.datatype = d ? kserve_datatype(*d).value_or("") : "";
            if (batching) m.shape.push_back(-1);
            m.shape.insert(m.shape.end(), dims.begin(), dims.end());
            return m;
        };
        for (const auto& i : c.input()) out.inputs.push_back(describe(i.name(), i.data_type(), i.dims()));
        for (const auto& o : c.output()) out.outputs.push_back(describe(o.name(), o.data_type(), o.dims()));
        return Failure::none();
    }

    Failure model_config_json(const std::string& name, const std::string& version, std::string& out) const override {
        Failure why;
        auto v = repo_.find(name, version, why);
        if (!v) return why;
        out = model_config_to_json(v->config());
        return Failure::none();
    }

    void infer(InferRequest request, InferCallback done) override {
        Clock::time_point arrival = request.arrival.value_or(Clock::now());
        Failure why;
        std::shared_ptr<ModelVersion> v;
        if (stopping()) {
            why = {Code::kUnavailable, "the server is shutting down"};
        } else {
            v = repo_.find(request.model, request.version, why);
        }
        if (!v) {
            // Unknown names are not labels (a client could make the metric grow without bound).
            metrics_.request_done(why.code == Code::kNotFound ? "" : request.model, request.version, why.code);
            InferResponse r{request.model, request.version, request.id, {}};
            try {
                done(std::move(why), std::move(r));
            } catch (...) {
            }
            return;
        }
        v->infer(std::move(request), std::move(done), arrival);
    }

    std::vector<RepositoryEntry> repository_index(bool ready_only) const override { return repo_.index(ready_only); }

    Failure load_model(const std::string& name) override {
        if (stopping()) return {Code::kUnavailable, "the server is shutting down"};
        if (Failure f = repository_control("load"); !f.ok()) return f;
        return repo_.load(name);
    }

    Failure unload_model(const std::string& name) override {
        if (Failure f = repository_control("unload"); !f.ok()) return f;
        return repo_.unload(name);
    }

    Failure statistics(const std::string& name, const std::string& version,
                       std::vector<ModelStatistics>& out) const override {
        out.clear();
        if (!name.empty()) {
            Failure why;
            if (!repo_.find(name, version, why)) return why;
        }
        for (const auto& v : repo_.versions())
            if ((name.empty() || v->model() == name) && (version.empty() || v->version() == version))
                out.push_back(v->statistics());
        return Failure::none();
    }

    std::string metrics_text() const override {
        metrics_.refresh_memory();
        std::vector<ModelStatistics> stats;
        for (const auto& v : repo_.versions()) {
            v->refresh_metrics();
            stats.push_back(v->statistics());
        }
        return metrics_.registry().text() + triton_metrics_text(stats);
    }

    void shutdown() override {
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (stopping_) return;
            stopping_ = true;
        }
        repo_.stop_all(/*drain=*/true);
        {
            std::lock_guard<std::mutex> lock(mu_);
            reaper_stop_ = true;
            reaper_cv_.notify_all();
        }
        if (reaper_.joinable()) reaper_.join();
    }

private:
    /// Triton refuses the repository API outside explicit model control.
    Failure repository_control(const std::string& what) const {
        if (opts_.repository_control) return Failure::none();
        return {Code::kUnavailable, "model " + what +
                                        " is not allowed in model control mode 'none' (start the server with "
                                        "--model-control-mode explicit)"};
    }

    bool stopping() const {
        std::lock_guard<std::mutex> lock(mu_);
        return stopping_;
    }

    void wake_reaper(Clock::time_point deadline) {
        std::lock_guard<std::mutex> lock(mu_);
        if (deadline < reaper_wake_) {
            reaper_wake_ = deadline;
            reaper_cv_.notify_all();
        }
    }

    /// Answers queued requests whose deadline passed, waking at the next deadline (or every
    /// 100 ms, to be safe).
    void reap() {
        std::unique_lock<std::mutex> lock(mu_);
        while (!reaper_stop_) {
            lock.unlock();
            Clock::time_point now = Clock::now(), next = now + std::chrono::milliseconds(100);
            for (const auto& v : repo_.versions())
                if (auto d = v->expire(now)) next = std::min(next, *d);
            lock.lock();
            reaper_wake_ = std::min(reaper_wake_, next);
            // reaper_wake_ may move earlier while waiting (wake_reaper): re-read it each time.
            while (!reaper_stop_ && Clock::now() < reaper_wake_) reaper_cv_.wait_until(lock, reaper_wake_);
            reaper_wake_ = Clock::time_point::max();
        }
    }

    ServerOptions opts_;
    mutable ServerMetrics metrics_;
    CoreScheduler cores_;
    ModelRepository repo_;
    mutable std::mutex mu_;
    bool stopping_ = false;
    std::condition_variable reaper_cv_;
    Clock::time_point reaper_wake_ = Clock::time_point::max();
    bool reaper_stop_ = false;
    std::thread reaper_;
};

}  // namespace

std::unique_ptr<Server> Server::create(const ServerOptions& opts) {
    // Validate before starting any thread.
    (void)list_model_folders(opts.model_repository);
    // The kernel cache is process-wide (KILN_CACHE_DIR); a server decides it for the process.
    if (!opts.kernel_cache_dir.empty()) ::setenv("KILN_CACHE_DIR", opts.kernel_cache_dir.c_str(), 1);
    auto server = std::make_unique<ServerImpl>(opts);
    server->start(opts);
    return server;
}

}  // namespace kiln::serve
