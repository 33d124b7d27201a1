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

long long ns_since_epoch(Clock::time_point t) {
    return static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}

/// The batch's request ids joined by ',' ("-" for a request without one); a space or ',' inside
/// an id becomes '_' so the field stays one token.
std::string batch_ids(const Batch& batch) {
    std::string out;
    for (const auto& r : batch) {
        if (!out.empty()) out += ',';
        std::string id = r && !r->request.id.empty() ? r->request.id : "-";
        for (char& c : id)
            if (c == ',' || c == ' ' || c == '\t' || c == '\n') c = '_';
        out += id;
    }
    return out;
}

}  // namespace

void trace_preemption(const std::string& model, const Batch& batch, Preemption& p, int cores,
                      Clock::time_point returned) {
    FILE* out = trace_file();
    if (!out) return;
    const Preemption::State& ps = *p.state();
    const int64_t asked = ps.requested_at_ns.load(std::memory_order_relaxed);
    std::fprintf(out,
                 "kiln preempt: model=%s cores=%d stop_us=%.1f returned_us=%.1f cut=%d restartable=%d ids=%s "
                 "asked_ns=%lld node=%s kernel=%s\n",
                 model.c_str(), cores, us(std::chrono::nanoseconds(ps.stopped_at_ns - asked)),
                 us(std::chrono::nanoseconds(ns_since_epoch(returned) - asked)), ps.cut_inside_kernel ? 1 : 0,
                 ps.stop_restartable ? 1 : 0, batch_ids(batch).c_str(), static_cast<long long>(asked),
                 ps.stop_node.c_str(), ps.stop_kernel.c_str());
    std::fflush(out);
}

void trace_real_time_run(const std::string& model, const Batch& batch, Clock::duration queued, const RunTimes& t) {
    FILE* out = trace_file();
    if (!out) return;
    Clock::time_point arrived = t.asked;
    for (const auto& r : batch)
        if (r && r->arrival < arrived) arrived = r->arrival;
    const long long t_ms = ns_since_epoch(Clock::now()) / 1000000;
    std::fprintf(out, "kiln rt: model=%s t_ms=%lld queue_us=%.1f acquire_us=%.1f run_us=%.1f ids=%s arrived_ns=%lld "
                 "done_ns=%lld\n",
                 model.c_str(), t_ms, us(queued), us(t.granted - t.asked), us(t.returned - t.granted),
                 batch_ids(batch).c_str(), ns_since_epoch(arrived), ns_since_epoch(t.returned));
    std::fflush(out);
}

void trace_preempted_run_done(const std::string& model, const Batch& batch, int preemptions,
                              Clock::time_point started, Clock::time_point done) {
    FILE* out = trace_file();
    if (!out) return;
    std::fprintf(out, "kiln be: model=%s ids=%s preemptions=%d started_ns=%lld done_ns=%lld\n", model.c_str(),
                 batch_ids(batch).c_str(), preemptions, ns_since_epoch(started), ns_since_epoch(done));
    std::fflush(out);
}

}  // namespace kiln::serve
