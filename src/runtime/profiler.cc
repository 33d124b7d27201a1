// Profiler output. The Chrome trace format: {"traceEvents": [...]} where a complete event is
// {"ph": "X", "name", "ts" and "dur" in µs, "pid", "tid", "args"}; "M" events name the threads.
// The summary groups events by step (one kernel launch of the executable) over all runs.
#include "runtime/profiler.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace kiln::runtime {
namespace {

std::string json_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\t': out += "\\t"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += c;
                }
        }
    }
    return out;
}

/// "f32[1,64,56,56] f32[64,64,3,3] -> f32[1,64,56,56]" for a step, and its total bytes.
std::string step_shapes(const Executable& exe, const StepDesc& st, size_t* bytes) {
    std::string s;
    *bytes = 0;
    for (size_t i = 0; i < st.args.size(); ++i) {
        const BufferDesc& b = exe.buffers[st.args[i]];
        if (i && static_cast<int>(i) == st.num_inputs) s += " ->";
        if (i) s += " ";
        s += std::string(dtype_name(b.dtype)) + shape_str(b.shape);
        *bytes += b.nbytes();
    }
    return s;
}

/// The kernel's fused ops, and for an extern kernel its name ("KilnConv2dNCHWc+Relu [dnnl_conv]"):
/// a oneDNN step and a generated one of the same unit are told apart in a profile.
std::string step_name(const Executable& exe, const StepDesc& st) {
    const KernelDesc& k = exe.kernels[st.kernel];
    const std::string& d = k.description.empty() ? st.node_name : k.description;
    return k.is_extern() && d.find(k.extern_name) == std::string::npos ? d + " [" + k.extern_name + "]" : d;
}

}  // namespace

Profiler::Profiler() : origin_(std::chrono::steady_clock::now()) {}

int64_t Profiler::now_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - origin_).count();
}

int Profiler::thread_id() {
    static std::atomic<int> next{0};
    thread_local int id = next.fetch_add(1);
    return id;
}

ProfiledRun* Profiler::begin_run(std::shared_ptr<const Executable> exe) {
    auto run = std::make_unique<ProfiledRun>();
    run->steps.resize(exe->steps.size());
    run->exe = std::move(exe);
    std::lock_guard<std::mutex> lock(mu_);
    runs_.push_back(std::move(run));
    return runs_.back().get();
}

size_t Profiler::num_runs() const {
    std::lock_guard<std::mutex> lock(mu_);
    return runs_.size();
}

std::string Profiler::chrome_trace_json() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::ostringstream os;
    os << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
    bool first = true;
    std::set<int> tids;
    char num[64];
    for (size_t r = 0; r < runs_.size(); ++r) {
        const Executable& exe = *runs_[r]->exe;
        for (size_t s = 0; s < runs_[r]->steps.size(); ++s) {
            const StepEvent& e = runs_[r]->steps[s];
            if (e.tid < 0) continue;
            const StepDesc& st = exe.steps[s];
            size_t bytes = 0;
            std::string shapes = step_shapes(exe, st, &bytes);
            tids.insert(e.tid);
            os << (first ? "" : ",") << "\n{\"name\":\"" << json_escape(step_name(exe, st))
               << "\",\"cat\":\"kernel\",\"ph\":\"X\",";
            std::snprintf(num, sizeof num, "\"ts\":%.3f,\"dur\":%.3f,", e.start_ns / 1e3, e.dur_ns / 1e3);
            os << num << "\"pid\":1,\"tid\":" << e.tid << ",\"args\":{\"node\":\"" << json_escape(st.node_name)
               << "\",\"step\":" << s << ",\"run\":" << r << ",\"shapes\":\"" << json_escape(shapes)
               << "\",\"bytes\":" << bytes;
            std::snprintf(num, sizeof num, ",\"flops\":%.0f}}", st.flops);
            os << num;
            first = false;
        }
    }
    for (int t : tids) {
        os << (first ? "" : ",") << "\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" << t
           << ",\"args\":{\"name\":\"kiln thread " << t << "\"}}";
        first = false;
    }
    os << "\n]}\n";
    return os.str();
}

Status Profiler::write_chrome_trace(const std::string& path) const {
    std::ofstream f(path, std::ios::binary);
    if (!f) return Status(ErrorKind::kIOError, "cannot write profile '" + path + "'");
    f << chrome_trace_json();
    f.close();
    if (!f) return Status(ErrorKind::kIOError, "error while writing profile '" + path + "'");
    return Status::ok_status();
}

/// The summary leaves an executable's first run out when it has at least this many runs.
constexpr int kWarmupDropMinRuns = 3;

std::string Profiler::summary(int top) const {
    struct Row {
        std::string name, node;
        int64_t calls = 0, ns = 0;
        double flops = 0;
    };
    std::map<std::pair<const Executable*, size_t>, Row> rows;
    int64_t total_ns = 0;
    size_t dropped = 0;
    {
        std::lock_guard<std::mutex> lock(mu_);
        // An executable's first run is a warm-up (oneDNN makes its primitives and reorders
        // weights, pages are touched): left out once there are enough others, so a kernel's mean
        // is its steady state (kiln run's --repeat timing skips it too).
        std::map<const Executable*, int> runs_of, seen;
        for (const auto& run : runs_) ++runs_of[run->exe.get()];
        for (const auto& run : runs_) {
            const Executable& exe = *run->exe;
            if (seen[&exe]++ == 0 && runs_of[&exe] >= kWarmupDropMinRuns) {
                ++dropped;
                continue;
            }
            for (size_t s = 0; s < run->steps.size(); ++s) {
                const StepEvent& e = run->steps[s];
                if (e.tid < 0) continue;
                Row& row = rows[{&exe, s}];
                if (row.calls == 0) {
                    row.name = step_name(exe, exe.steps[s]);
                    row.node = exe.steps[s].node_name;
                }
                row.calls++;
                row.ns += e.dur_ns;
                row.flops += exe.steps[s].flops;
                total_ns += e.dur_ns;
            }
        }
    }
    std::vector<Row> sorted;
    for (auto& [k, r] : rows) sorted.push_back(r);
    std::stable_sort(sorted.begin(), sorted.end(), [](const Row& a, const Row& b) { return a.ns > b.ns; });
    std::ostringstream os;
    char line[256];
    std::snprintf(line, sizeof line, "%-4s %-44s %-24s %6s %10s %7s %10s %9s\n", "#", "kernel", "node", "calls",
                  "total ms", "share", "mean us", "GFLOP/s");
    os << line;
    int shown = 0;
    for (const Row& r : sorted) {
        if (shown >= top) break;
        double share = total_ns ? 100.0 * r.ns / total_ns : 0.0;
        double gflops = r.ns ? r.flops / r.ns : 0.0;  // flop/ns == GFLOP/s
        std::snprintf(line, sizeof line, "%-4d %-44.44s %-24.24s %6lld %10.3f %6.1f%% %10.1f %9.2f\n", ++shown,
                      r.name.c_str(), r.node.c_str(), static_cast<long long>(r.calls), r.ns / 1e6, share,
                      r.ns / 1e3 / r.calls, gflops);
        os << line;
    }
    std::snprintf(line, sizeof line, "kernel time %.3f ms over %zu kernels, %zu runs%s\n", total_ns / 1e6, rows.size(),
                  num_runs() - dropped, dropped ? " (the warm-up run left out)" : "");
    os << line;
    return os.str();
}

}  // namespace kiln::runtime
