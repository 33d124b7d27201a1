// The preemption trace (serve/preemption_trace.h).
#include "serve/preemption_trace.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "runtime/preemption.h"

namespace kiln::serve {
namespace {

/// The file the trace is appended to (null: no trace).
FILE* trace_file() {
    static FILE* const out = [] {
        const char* path = std::getenv("KILN_PREEMPT_TRACE");
        return path && *path ? std::fopen(path, "a") : nullptr;
    }();
    return out;
}

double us(std::chrono::nanoseconds d) { return static_cast<double>(d.count()) / 1e3; }

int64_t ns_since_epoch(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

void trace_preemption(const std::string& model, Preemption& p, int cores, Clock::time_point returned) {
    FILE* out = trace_file();
    if (!out) return;
    const Preemption::State& ps = *p.state();
    const int64_t asked = ps.requested_at_ns.load(std::memory_order_relaxed);
    std::fprintf(out,
                 "kiln preempt: model=%s cores=%d stop_us=%.1f returned_us=%.1f cut=%d restartable=%d node=%s "
                 "kernel=%s\n",
                 model.c_str(), cores, us(std::chrono::nanoseconds(ps.stopped_at_ns - asked)),
                 us(std::chrono::nanoseconds(ns_since_epoch(returned) - asked)), ps.cut_inside_kernel ? 1 : 0,
                 ps.stop_restartable ? 1 : 0, ps.stop_node.c_str(), ps.stop_kernel.c_str());
    std::fflush(out);
}

void trace_real_time_run(const std::string& model, Clock::duration queued, Clock::duration acquire,
                         Clock::duration run) {
    FILE* out = trace_file();
    if (!out) return;
    const long long t_ms = static_cast<long long>(ns_since_epoch(Clock::now()) / 1000000);
    std::fprintf(out, "kiln rt: model=%s t_ms=%lld queue_us=%.1f acquire_us=%.1f run_us=%.1f\n", model.c_str(), t_ms,
                 us(queued), us(acquire), us(run));
    std::fflush(out);
}

}  // namespace kiln::serve
