// How long a preemptible run takes to stop once asked, without the server around it (issue 29's
// preemption latency, whose server figure also holds the HTTP and worker threads' scheduling).
//
//   build/bin/kiln-bench-preempt MODEL.onnx [--threads 2] [--stops 300] [--gap-ms 0.5,3] [--busy-us 0]
//
// One thread runs MODEL in a loop as `kiln serve` runs best-effort work (SessionOptions::
// preemptible, RunOptions::preempt; a suspended run is resumed at once); another asks it to stop
// after a random gap (uniform in --gap-ms), waits until run() has returned, clears the request
// and sleeps again. Per stop: request() -> the executor's stop (the runtime's own stamp) and ->
// run() returned. --busy-us N: the asking thread then computes for N us before it sleeps, as the
// server's real-time worker prepares its batch while the stopping threads share the cores with
// it. Prints their percentiles and, for the slowest tenth, the kernels that held
// the stop up (a kernel cut inside, cut=1, or the last one that finished).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kiln/session.h"
#include "runtime/preemption.h"

using namespace kiln;
using Clock = std::chrono::steady_clock;

namespace {

struct Stop {
    double stop_us = 0, returned_us = 0;
    std::string kernel;
    bool cut = false;
};

double percentile(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

/// Inputs of the model's shapes (symbolic dims as 1), zeros: the run's time does not depend on them.
std::map<std::string, Tensor> zero_inputs(const Session& s) {
    std::map<std::string, Tensor> in;
    for (const TensorInfo& info : s.inputs()) {
        std::vector<int64_t> shape = info.shape;
        for (int64_t& d : shape) d = d < 0 ? 1 : d;
        Tensor t(info.dtype, shape);
        std::fill_n(static_cast<char*>(t.data()), t.nbytes(), 0);
        in.emplace(info.name, std::move(t));
    }
    return in;
}

int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s MODEL.onnx [--threads N] [--stops N] [--gap-ms LO,HI] [--busy-us N]\n", argv[0]);
        return 2;
    }
    int threads = 2, stops = 300;
    double gap_lo = 0.5, gap_hi = 3.0, busy_us = 0;
    for (int i = 2; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--threads") threads = std::atoi(argv[i + 1]);
        else if (a == "--stops") stops = std::atoi(argv[i + 1]);
        else if (a == "--gap-ms") std::sscanf(argv[i + 1], "%lf,%lf", &gap_lo, &gap_hi);
        else if (a == "--busy-us") busy_us = std::atof(argv[i + 1]);
        else {
            std::fprintf(stderr, "unknown flag %s\n", a.c_str());
            return 2;
        }
    }
    try {
        SessionOptions so;
        so.threads = threads;
        so.executor = ExecutorKind::kSequential;
        so.preemptible = true;
        auto session = Session::load(argv[1], so);
        const auto inputs = zero_inputs(*session);
        Preemption p;
        RunOptions ro;
        ro.preempt = &p;
        for (int i = 0; i < 3; ++i) session->run(inputs, ro);  // warm: kernels compiled, buffers placed

        std::atomic<bool> done{false};
        std::atomic<int64_t> returned_ns{0};  // set by the runner when a stopped run() returned
        std::atomic<bool> cleared{false};     // set by the requester once the request is withdrawn
        std::vector<Stop> out;  // written by this (the asking) thread only
        int64_t runs = 0, resumed = 0;
        std::thread runner([&] {
            while (!done.load()) {
                session->run(inputs, ro);
                if (p.suspended()) {
                    returned_ns.store(now_ns());
                    returned_ns.notify_one();
                    cleared.wait(false);  // asleep, as a preempted BE run waits for its cores
                    cleared.store(false);
                    ++resumed;
                } else {
                    ++runs;
                }
            }
        });
        std::mt19937 rng(7);
        std::uniform_real_distribution<double> gap(gap_lo, gap_hi);
        for (int i = 0; i < stops; ++i) {
            std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(gap(rng) * 1000)));
            returned_ns.store(0);
            p.request();
            for (const auto t0 = Clock::now(); std::chrono::duration<double, std::micro>(Clock::now() - t0).count() < busy_us;) {
            }
            returned_ns.wait(0);  // asleep: the requester must not take a core from the stopping threads
            const int64_t r = returned_ns.load();
            const Preemption::State& st = *p.state();
            const int64_t asked = st.requested_at_ns.load();
            Stop s{(st.stopped_at_ns - asked) / 1e3, (r - asked) / 1e3, st.stop_kernel + " at " + st.stop_node, st.cut_inside_kernel};
            p.clear_request();
            cleared.store(true);
            cleared.notify_one();
            out.push_back(s);
        }
        done.store(true);
        p.clear_request();
        cleared.store(true);
        cleared.notify_one();
        runner.join();

        std::vector<double> stop_us, ret_us;
        for (const Stop& s : out) stop_us.push_back(s.stop_us), ret_us.push_back(s.returned_us);
        std::printf("%s, %d threads: %zu stops over %lld whole runs and %lld resumed ones\n", argv[1], threads,
                    out.size(), static_cast<long long>(runs), static_cast<long long>(resumed));
        for (auto [name, v] : {std::pair{"request -> executor stop", &stop_us}, std::pair{"request -> run() returned", &ret_us}})
            std::printf("  %-26s p50 %7.1f  p90 %7.1f  p99 %7.1f  max %7.1f us\n", name, percentile(*v, 0.5),
                        percentile(*v, 0.9), percentile(*v, 0.99), percentile(*v, 1.0));
        const double slow = percentile(stop_us, 0.9);
        std::map<std::string, std::vector<double>> by;
        for (const Stop& s : out)
            if (s.stop_us >= slow) by[s.kernel + (s.cut ? " (cut)" : "")].push_back(s.stop_us);
        std::printf("  the slowest tenth (>= %.1f us), by the kernel that held the stop:\n", slow);
        for (auto& [k, v] : by)
            std::printf("    %3zu x  max %7.1f us  %s\n", v.size(), *std::max_element(v.begin(), v.end()), k.c_str());
    } catch (const Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
