// The server's metric families (Prometheus names and labels) over a MetricsRegistry.
#pragma once

#include <chrono>
#include <string>

#include "kiln/session.h"
#include "serve/metrics.h"
#include "serve/types.h"

namespace kiln::serve {

const char* priority_name(Priority p);  // "realtime" | "best_effort"
/// "success" or the code's name in lower case ("deadline_exceeded", "unavailable", ...).
std::string outcome_name(Code code);

class ServerMetrics {
public:
    ServerMetrics();
    MetricsRegistry& registry() { return registry_; }
    const MetricsRegistry& registry() const { return registry_; }

    void request_done(const std::string& model, const std::string& version, Code code);
    void queued(const std::string& model, Priority p, std::chrono::nanoseconds wait);
    void computed(const std::string& model, Priority p, std::chrono::nanoseconds run);
    void batch(const std::string& model, int64_t rows);
    void preempted(std::chrono::nanoseconds latency);
    void queue_depth(const std::string& model, const std::string& version, size_t depth);
    void cores_in_use(Priority p, int cores);
    /// Sets a model version's session gauges from its session's statistics.
    void session(const std::string& model, const std::string& version, const SessionStats& stats);
    /// Refreshes the memory gauge (process RSS from /proc/self/statm).
    void refresh_memory();

private:
    MetricsRegistry registry_;
};

}  // namespace kiln::serve
