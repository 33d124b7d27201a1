// kernel_probe (see the header): classify, look the verdict up, else measure both candidates
// in-process through the tuner's measurement worker and remember the outcome.
#include "compiler/kernel_probe.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "codegen/compile_driver.h"
#include "compiler/workload.h"
#include "runtime/extern_kernel.h"
#include "support/hash64.h"
#include "tune/measure.h"

namespace kiln::compiler {
namespace {

constexpr int kRounds = 2;  // each candidate's time: the best of this many measurements
// A verdict against the rule is confirmed by further rounds (the best of this many in all,
// the candidates' order alternating) before it is taken: on a loaded machine one candidate's
// few milliseconds of measurement can both fall into descheduled slices (ShuffleNetV2's
// 464->1024 1x1 conv at batch 8: oneDNN 7.2 ms against generated 2.0 ms on one thread, where
// the two kernels take 1.2 and 1.8 ms in the model on two threads).
constexpr int kConfirmRounds = 6;
// The probe overrides the rule only when the other kernel is this much faster: a near tie is
// measurement noise, and the rule's choice is the one its figures back.
constexpr double kMargin = 1.1;

bool probing_enabled() {
    const char* v = std::getenv("KILN_KERNEL_PROBE");
    return !(v && std::string(v) == "0");
}

int64_t product_from(const std::vector<int64_t>& v, size_t first) {
    int64_t p = 1;
    for (size_t i = first; i < v.size(); ++i) p *= v[i];
    return p;
}

std::string hex_hash(const std::string& s) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(hash64(s.data(), s.size())));
    return buf;
}

struct Verdict {
    double generated_s = 0, dnnl_s = 0;
    bool dnnl = false;  // the faster (for the record; decide() applies the margin)
    int rounds = 0;     // measurement rounds the two minima cover (lines without it: kRounds)
};

bool decide(const Verdict& v, bool rule_dnnl) {
    return rule_dnnl ? !(v.generated_s * kMargin < v.dnnl_s) : v.dnnl_s * kMargin < v.generated_s;
}

std::string verdicts_path() { return codegen::cache_dir() + "/kernel_probe.jsonl"; }

// The verdicts on disk (lines that do not parse are skipped: a torn write costs a re-measurement).
std::map<std::string, Verdict> read_verdicts(const std::string& path) {
    std::map<std::string, Verdict> out;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
        nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.is_object() || !j.contains("key")) continue;
        Verdict v;
        v.generated_s = j.value("generated_s", 0.0);
        v.dnnl_s = j.value("dnnl_s", 0.0);
        v.dnnl = j.value("choice", std::string()) == "dnnl";
        v.rounds = j.value("rounds", kRounds);
        out[j.value("key", std::string())] = v;  // a later line (a confirmation) replaces an earlier
    }
    return out;
}

void append_verdict(const std::string& path, const std::string& key, const std::string& what, const Verdict& v) {
    std::ofstream out(path, std::ios::app);
    nlohmann::json j = {{"key", key},           {"workload", what},     {"generated_s", v.generated_s},
                        {"dnnl_s", v.dnnl_s}, {"choice", v.dnnl ? "dnnl" : "generated"},
                        {"rounds", v.rounds}};
    out << j.dump() << "\n";  // one write per line; a failure only loses the cache entry
}

// Both candidates timed on the same inputs until `v` covers `rounds` rounds, each candidate's
// time the minimum over them (a time cannot be measured below the kernel's own, so earlier
// minima stay valid); the candidates' order alternates by round. nullopt when either fails.
std::optional<Verdict> measure(const KernelUnit& unit, const topi::ExternChoice& c, const std::string& source,
                               Verdict v, int rounds) {
    std::vector<codegen::CompileOutcome> built = codegen::compile_c_each({source});
    if (built.size() != 1 || !built[0].error.empty()) return std::nullopt;
    tune::MeasureTask task;
    task.workload = workload_description(unit);
    task.args = workload_args(unit);
    task.flops = unit_flops(unit);
    tune::Candidate generated, dnnl;
    generated.source = source;
    generated.library = built[0].library.path;
    dnnl.extern_name = c.name;
    dnnl.extern_params = runtime::ExternParams::format(c.params);
    tune::MeasureOptions opts;
    opts.threads = 1;
    opts.repeats = 3;
    opts.min_repeat_ms = 1;
    opts.flush_cache = false;
    for (; v.rounds < rounds; ++v.rounds) {
        const bool swapped = v.rounds % 2 == 1;
        task.candidates = swapped ? std::vector<tune::Candidate>{dnnl, generated}
                                  : std::vector<tune::Candidate>{generated, dnnl};
        std::istringstream in(tune::task_to_json(task, opts));
        std::ostringstream out;
        tune::run_measure_worker(in, out);
        std::istringstream lines(out.str());
        int ok = 0;
        for (std::string line; std::getline(lines, line);) {
            nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
            if (j.is_discarded() || !j.contains("i") || !j.value("ok", false)) continue;
            double& best = (j.at("i").get<size_t>() == 0) != swapped ? v.generated_s : v.dnnl_s;
            best = std::min(best, j.value("seconds", 1e30));
            ++ok;
        }
        if (ok != 2) return std::nullopt;
    }
    v.dnnl = v.dnnl_s < v.generated_s;
    return v;
}

// A verdict, measured now or continued from the cached one `cached`: kRounds rounds, and
// kConfirmRounds in all where it would override the rule.
std::optional<Verdict> measure_verdict(const KernelUnit& unit, const topi::ExternChoice& c, const std::string& source,
                                       bool rule_dnnl, const Verdict* cached) {
    std::optional<Verdict> v = cached ? *cached : measure(unit, c, source, Verdict{1e30, 1e30, false, 0}, kRounds);
    if (v && decide(*v, rule_dnnl) != rule_dnnl && v->rounds < kConfirmRounds)
        v = measure(unit, c, source, *v, kConfirmRounds);
    return v;
}

}  // namespace

bool rule_unsure(const KernelUnit& unit, const topi::ExternChoice& c) {
    if (c.name != "dnnl_conv" || unit_flops(unit) < kProbeMinFlops) return false;
    const runtime::ExternParams p(runtime::ExternParams::format(c.params));
    const std::vector<int64_t> src = p.ints("src"), dst = p.ints("dst"), kernel = p.ints("kernel");
    if (src.size() < 3 || dst.size() < 3) return false;
    const int64_t groups = p.integer_or("groups", 1);
    if (groups > 1 && groups != src[1]) return true;  // grouped, not depthwise
    if (kernel.size() != 2) return true;              // 1-D or 3-D
    for (int64_t d : p.has("dilations") ? p.ints("dilations") : std::vector<int64_t>{})
        if (d > 1) return true;
    if (product_from(dst, 2) <= 14 * 14) return true;
    if (src[1] % 16 != 0 || dst[1] % 16 != 0) return true;
    const std::string post = p.has("post") ? p.str("post") : "";
    return post.find("swish") != std::string::npos;  // swish and hardswish
}

std::optional<bool> probe_prefers_dnnl(const KernelUnit& unit, const topi::ExternChoice& c, bool rule_dnnl) {
    if (!probing_enabled() || !rule_unsure(unit, c)) return std::nullopt;
    std::string source;
    try {
        source = lower_unit(unit, false, {}).source;
    } catch (const Error&) {
        return std::nullopt;
    }
    // A verdict holds for the oneDNN kernel it timed: plain 1x1 convs moved from a reordered
    // brgemm conv to the GEMM conv, 3x3 convs to Winograd (runtime/dnnl_kernels.cc), so a GEMM
    // or Winograd verdict keys on the implementation.
    const std::string params = runtime::ExternParams::format(c.params);
    const std::string impl = runtime::dnnl_implementation(c.name, params);
    const std::string key = hex_hash(source + "\n" + c.name + ":" + params + "\n" + tune::host_target() +
                                     (impl.find("gemm") != std::string::npos || impl.find("wino") != std::string::npos ? "\n" + impl : ""));
    static std::mutex mu;
    static auto* known = new std::map<std::string, std::map<std::string, Verdict>>();  // by file
    std::lock_guard<std::mutex> lock(mu);  // one measurement at a time: probes must not overlap
    const std::string path = verdicts_path();
    auto file = known->find(path);
    if (file == known->end()) file = known->emplace(path, read_verdicts(path)).first;
    const auto it = file->second.find(key);
    const Verdict* cached = it != file->second.end() ? &it->second : nullptr;
    // A cached verdict stands unless it overrides the rule unconfirmed (written before confirmation).
    if (cached && (decide(*cached, rule_dnnl) == rule_dnnl || cached->rounds >= kConfirmRounds))
        return decide(*cached, rule_dnnl);
    std::optional<Verdict> v = measure_verdict(unit, c, source, rule_dnnl, cached);
    if (!v) return std::nullopt;
    file->second[key] = *v;
    append_verdict(path, key, workload_description(unit), *v);
    return decide(*v, rule_dnnl);
}

}  // namespace kiln::compiler
