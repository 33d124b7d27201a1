// The server's Prometheus families (server_metrics.h).
#include "serve/server_metrics.h"

#include <cctype>
#include <fstream>
#include <unistd.h>

namespace kiln::serve {
namespace {

double us(std::chrono::nanoseconds d) { return static_cast<double>(d.count()) / 1e3; }

}  // namespace

const char* priority_name(Priority p) { return p == Priority::kRealTime ? "realtime" : "best_effort"; }

std::string outcome_name(Code code) {
    if (code == Code::kOk) return "success";
    std::string s = code_name(code);
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

ServerMetrics::ServerMetrics() {
    // 10 us .. ~84 s, doubling.
    auto durations = exponential_buckets(10, 2, 24);
    registry_.declare_counter("kiln_inference_requests_total", "Inference requests answered, by model, version and outcome.");
    registry_.declare_histogram("kiln_queue_duration_us", "Time requests waited in the queue (microseconds).", durations);
    registry_.declare_histogram("kiln_compute_duration_us", "Time of model runs, a batch counted once (microseconds).", durations);
    registry_.declare_histogram("kiln_batch_size", "Rows per model execution.", exponential_buckets(1, 2, 10));
    registry_.declare_counter("kiln_preemptions_total", "Best-effort runs preempted by real-time work.");
    registry_.declare_histogram("kiln_preemption_latency_us",
                                "From a real-time run asking a best-effort run to stop to that run returning (microseconds).",
                                exponential_buckets(1, 2, 24));
    registry_.declare_gauge("kiln_memory_bytes", "Resident memory of the server process (bytes).");
    registry_.declare_gauge("kiln_queue_depth", "Requests waiting in a model version's queues.");
    registry_.declare_gauge("kiln_cores_in_use", "Cores held by running model runs, by priority class.");
    registry_.declare_gauge("kiln_model_sessions", "Compiled sessions of a model version (one, whatever the batch sizes).");
    registry_.declare_gauge("kiln_model_specializations",
                            "Compiled specializations (batch sizes, shapes) a model version's session holds.");
    registry_.declare_gauge("kiln_model_compiles", "Whole-model compiles a model version's session has run.");
    registry_.declare_gauge("kiln_model_weight_bytes", "Bytes of a model version's constants as imported (its weights).");
    registry_.declare_gauge("kiln_model_constant_bytes",
                            "Bytes of distinct constant data a model version's specializations use, shared data counted once.");
}

void ServerMetrics::request_done(const std::string& model, const std::string& version, Code code) {
    registry_.add("kiln_inference_requests_total", {{"model", model}, {"version", version}, {"outcome", outcome_name(code)}});
}

void ServerMetrics::queued(const std::string& model, Priority p, std::chrono::nanoseconds wait) {
    registry_.observe("kiln_queue_duration_us", {{"model", model}, {"priority", priority_name(p)}}, us(wait));
}

void ServerMetrics::computed(const std::string& model, Priority p, std::chrono::nanoseconds run) {
    registry_.observe("kiln_compute_duration_us", {{"model", model}, {"priority", priority_name(p)}}, us(run));
}

void ServerMetrics::batch(const std::string& model, int64_t rows) {
    registry_.observe("kiln_batch_size", {{"model", model}}, static_cast<double>(rows));
}

void ServerMetrics::preempted(std::chrono::nanoseconds latency) {
    registry_.add("kiln_preemptions_total", {});
    registry_.observe("kiln_preemption_latency_us", {}, us(latency));
}

void ServerMetrics::cores_in_use(Priority p, int cores) {
    registry_.set("kiln_cores_in_use", {{"priority", priority_name(p)}}, static_cast<double>(cores));
}

void ServerMetrics::queue_depth(const std::string& model, const std::string& version, size_t depth) {
    registry_.set("kiln_queue_depth", {{"model", model}, {"version", version}}, static_cast<double>(depth));
}

void ServerMetrics::session(const std::string& model, const std::string& version, const SessionStats& stats) {
    const Labels labels{{"model", model}, {"version", version}};
    registry_.set("kiln_model_sessions", labels, 1);
    registry_.set("kiln_model_specializations", labels, stats.specializations);
    registry_.set("kiln_model_compiles", labels, stats.compiles);
    registry_.set("kiln_model_weight_bytes", labels, static_cast<double>(stats.weight_bytes));
    registry_.set("kiln_model_constant_bytes", labels, static_cast<double>(stats.constant_bytes));
}

void ServerMetrics::refresh_memory() {
    std::ifstream statm("/proc/self/statm");
    long pages_total = 0, pages_resident = 0;
    if (statm >> pages_total >> pages_resident)
        registry_.set("kiln_memory_bytes", {}, static_cast<double>(pages_resident) * static_cast<double>(sysconf(_SC_PAGESIZE)));
}

}  // namespace kiln::serve
