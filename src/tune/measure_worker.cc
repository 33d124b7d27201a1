// The measurement process (tune/measure.h): builds a one-step executable per candidate over the
// same random inputs, checks each candidate's outputs against the reference's, then times it.
// One JSON line per candidate goes to `out` as soon as it is known, so that the parent learns
// which candidate was running when this process died or hung.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <iterator>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/buffer_table.h"
#include "runtime/executable.h"
#include "runtime/thread_pool.h"
#include "support/error.h"
#include "tune/measure.h"

namespace kiln::tune {
namespace {

using Clock = std::chrono::steady_clock;

/// Inputs of every candidate: floats uniform in [-1, 1] from a fixed seed; integers and the
/// rest zero (always in range where an integer operand is an index).
Tensor random_tensor(const ArgSpec& a, std::mt19937& rng) {
    Tensor t(a.dtype, a.shape);
    std::memset(t.data(), 0, t.nbytes());
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    if (!a.values.empty()) {
        for (int64_t i = 0; i < t.numel(); ++i) {
            const double v = a.values[static_cast<size_t>(i)];
            switch (a.dtype) {
                case DType::kFloat32: t.data_as<float>()[i] = static_cast<float>(v); break;
                case DType::kFloat64: t.data_as<double>()[i] = v; break;
                case DType::kInt64: t.data_as<int64_t>()[i] = static_cast<int64_t>(v); break;
                case DType::kInt32: t.data_as<int32_t>()[i] = static_cast<int32_t>(v); break;
                default: break;
            }
        }
        return t;
    }
    if (a.dtype == DType::kFloat32)
        for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = u(rng);
    else if (a.dtype == DType::kFloat64)
        for (int64_t i = 0; i < t.numel(); ++i) t.data_as<double>()[i] = u(rng);
    return t;
}

Tensor zeros(const ArgSpec& a) {
    Tensor t(a.dtype, a.shape);
    std::memset(t.data(), 0, t.nbytes());
    return t;
}

/// One candidate ready to call: its executable (kernel 0, step 0) and its argument pointers.
struct Prepared {
    std::unique_ptr<runtime::Executable> exe;
    std::vector<Tensor> outputs;
    std::vector<void*> ptrs;
};

Prepared prepare(const MeasureTask& task, const Candidate& c, const std::vector<Tensor>& inputs) {
    Prepared p;
    p.exe = std::make_unique<runtime::Executable>();
    runtime::StepDesc step;
    step.kernel = 0;
    step.node_name = task.workload;
    step.flops = task.flops;
    size_t in = 0;
    for (size_t i = 0; i < task.args.size(); ++i) {
        const ArgSpec& a = task.args[i];
        runtime::BufferDesc b;
        b.name = "arg" + std::to_string(i);
        b.dtype = a.dtype;
        b.shape = a.shape;
        if (a.is_output) {
            b.role = runtime::BufferRole::kOutput;
            p.outputs.push_back(zeros(a));
            p.ptrs.push_back(p.outputs.back().data());
        } else {
            const Tensor& t = inputs.at(in++);
            b.role = a.is_constant ? runtime::BufferRole::kConstant : runtime::BufferRole::kInput;
            if (a.is_constant) b.constant = t;
            p.ptrs.push_back(const_cast<void*>(t.data()));
        }
        step.args.push_back(static_cast<int>(i));
        p.exe->buffers.push_back(std::move(b));
    }
    step.num_inputs = static_cast<int>(in);
    runtime::KernelDesc k;
    k.description = task.workload;
    if (!c.extern_name.empty()) {
        k.extern_name = c.extern_name;
        k.extern_params = c.extern_params;
    } else {
        KILN_CHECK(!c.library.empty(), kInvalidArgument) << "candidate '" << c.knobs << "' has no compiled library";
        k.library = c.library;
        k.symbol = "kiln_kernel";
    }
    p.exe->kernels.push_back(std::move(k));
    p.exe->steps.push_back(std::move(step));
    p.exe->load();
    return p;
}

void call(const Prepared& p, const kiln_kernel_env& env) {
    Status st = p.exe->run_kernel(0, p.ptrs.data(), env);
    KILN_CHECK(st.ok(), kInternal) << "kernel failed: " << st.message();
}

/// "" when `got` matches `want`; else what differs (output, element, values).
std::string compare(const std::vector<Tensor>& want, const std::vector<Tensor>& got, double rtol, double atol) {
    for (size_t o = 0; o < want.size(); ++o) {
        const Tensor& w = want[o];
        const Tensor& g = got[o];
        if (w.dtype() == DType::kFloat32 || w.dtype() == DType::kFloat64) {
            const bool f32 = w.dtype() == DType::kFloat32;
            auto at = [&](const Tensor& t, int64_t i) {
                return f32 ? static_cast<double>(t.data_as<float>()[i]) : t.data_as<double>()[i];
            };
            double scale = 0;
            for (int64_t i = 0; i < w.numel(); ++i) scale = std::max(scale, std::abs(at(w, i)));
            for (int64_t i = 0; i < w.numel(); ++i) {
                const double a = at(w, i), b = at(g, i);
                if (std::isnan(a) && std::isnan(b)) continue;
                if (!(std::abs(a - b) <= atol + rtol * std::max(std::abs(a), scale))) {
                    std::ostringstream os;
                    os << "wrong result: output " << o << " element " << i << " is " << b << ", the reference gives " << a;
                    return os.str();
                }
            }
        } else if (std::memcmp(w.data(), g.data(), w.nbytes()) != 0) {
            return "wrong result: output " + std::to_string(o) + " differs from the reference";
        }
    }
    return "";
}

/// Bytes of the last-level cache (sysfs; 32 MiB when unknown).
size_t last_level_cache_bytes() {
    size_t best = 0;
    for (int i = 0; i < 8; ++i) {
        std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/size");
        std::string s;
        if (!(f >> s) || s.empty()) continue;
        size_t v = std::strtoull(s.c_str(), nullptr, 10);
        if (s.back() == 'K') v <<= 10;
        if (s.back() == 'M') v <<= 20;
        best = std::max(best, v);
    }
    return best ? best : size_t(32) << 20;
}

/// Evicts the caches by reading a buffer of twice the last-level cache, then reads `warm`.
class CacheFlusher {
public:
    CacheFlusher() : buf_(std::min<size_t>(2 * last_level_cache_bytes(), size_t(256) << 20) / sizeof(int64_t), 1) {}
    void run(const std::vector<Tensor>& warm) {
        int64_t sum = 0;
        for (size_t i = 0; i < buf_.size(); i += 8) sum += buf_[i];
        for (const Tensor& t : warm) {
            const auto* b = static_cast<const unsigned char*>(t.data());
            for (size_t i = 0; i < t.nbytes(); i += 64) sum += b[i];
        }
        sink_ = sink_ + sum;
    }

private:
    std::vector<int64_t> buf_;
    volatile int64_t sink_ = 0;
};

/// Median seconds per call. With cache flushing: `repeats` calls each timed alone after a
/// flush; without: `repeats` repeats of enough calls to last min_repeat_ms each.
double time_candidate(const Prepared& p, runtime::ThreadPool* pool, const MeasureOptions& opts, CacheFlusher* flusher,
                      const std::vector<Tensor>& warm_inputs) {
    const kiln_kernel_env env = runtime::make_kernel_env(pool);
    // Warm-up: the given number of calls, and at least two repeats' worth of time (the first
    // calls in a fresh process pay page faults, cold caches and sleeping pool threads).
    auto w0 = Clock::now();
    for (int i = 0; i < opts.warmup || std::chrono::duration<double, std::milli>(Clock::now() - w0).count() < 2 * opts.min_repeat_ms; ++i)
        call(p, env);
    std::vector<double> per_call;
    if (flusher) {
        for (int r = 0; r < opts.repeats; ++r) {
            flusher->run(warm_inputs);
            // The pool's workers fell asleep during the flush; inside a model the previous
            // kernel just kept them spinning. Wake them so a parallel kernel is not charged.
            pool->parallel_for(pool->num_threads(), [](int64_t, int64_t) {});
            auto s = Clock::now();
            call(p, env);
            per_call.push_back(std::chrono::duration<double>(Clock::now() - s).count());
        }
        std::nth_element(per_call.begin(), per_call.begin() + per_call.size() / 2, per_call.end());
        return per_call[per_call.size() / 2];
    }
    auto t0 = Clock::now();
    call(p, env);
    const double once = std::max(1e-7, std::chrono::duration<double>(Clock::now() - t0).count());
    const int calls = std::max(1, static_cast<int>(std::ceil(opts.min_repeat_ms * 1e-3 / once)));
    for (int r = 0; r < opts.repeats; ++r) {
        auto s = Clock::now();
        for (int i = 0; i < calls; ++i) call(p, env);
        per_call.push_back(std::chrono::duration<double>(Clock::now() - s).count() / calls);
    }
    std::nth_element(per_call.begin(), per_call.begin() + per_call.size() / 2, per_call.end());
    return per_call[per_call.size() / 2];
}

void emit(std::ostream& out, size_t i, const MeasureResult& r) {
    out << nlohmann::json{{"i", i}, {"ok", r.ok}, {"seconds", r.seconds}, {"error", r.error}}.dump() << "\n";
    out.flush();
}

}  // namespace

int run_measure_worker(std::istream& in, std::ostream& out) {
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    MeasureTask task;
    MeasureOptions opts;
    size_t first = 1;
    task_from_json(text, task, opts, first);
    std::mt19937 rng(20261123);
    std::vector<Tensor> inputs;
    for (const ArgSpec& a : task.args)
        if (!a.is_output) inputs.push_back(random_tensor(a, rng));
    std::vector<Tensor> warm_inputs;  // what the previous kernel of a model just wrote
    for (size_t i = 0, in = 0; i < task.args.size(); ++i)
        if (!task.args[i].is_output) {
            if (!task.args[i].is_constant) warm_inputs.push_back(inputs[in]);
            ++in;
        }
    std::unique_ptr<CacheFlusher> flusher;
    if (opts.flush_cache) flusher = std::make_unique<CacheFlusher>();
    runtime::ThreadPool pool(opts.threads);
    const kiln_kernel_env env = runtime::make_kernel_env(&pool);

    std::vector<Tensor> reference;
    for (size_t i = 0; i < task.candidates.size(); ++i) {
        if (i != 0 && i < first) continue;
        MeasureResult r;
        try {
            Prepared p = prepare(task, task.candidates[i], inputs);
            call(p, env);
            std::string diff = i == 0 ? "" : compare(reference, p.outputs, opts.rtol, opts.atol);
            if (i == 0) reference = p.outputs;
            if (diff.empty()) {
                r.seconds = time_candidate(p, &pool, opts, flusher.get(), warm_inputs);
                r.ok = true;
            } else {
                r.error = diff;
            }
        } catch (const Error& e) {
            r.error = e.what();
        }
        emit(out, i, r);
        if (i == 0 && !r.ok) return 0;  // nothing to compare against: the parent fails the rest
    }
    return 0;
}

}  // namespace kiln::tune
