#include "compiler/model_compile_options.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "compiler/tune_model.h"
#include "pass/pass_manager.h"
#include "support/error.h"
#include "tune/measure.h"
#include "tune/tuning_log.h"

namespace kiln::compiler {
namespace {

std::string pass_names() {
    std::set<std::string> names;
    for (const pass::Pass& p : pass::all_passes()) names.insert(p.name);
    std::string s;
    for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
    return s;
}

/// A log whose records were all measured on other machines is not applied: say so, once per log
/// (a schedule tuned for another CPU's caches and ISA can be slower here than the default).
void warn_foreign_log(const std::string& path, const std::vector<std::string>& targets) {
    static std::mutex mu;
    static std::set<std::string> warned;
    std::lock_guard<std::mutex> lock(mu);
    const std::string host = tune::host_target();
    if (targets.empty() || std::find(targets.begin(), targets.end(), host) != targets.end() ||
        !warned.insert(path).second)
        return;
    std::fprintf(stderr, "kiln: tuning log '%s' holds records for %zu other machine(s) (e.g. '%s'), none for this one "
                 "('%s'): not applied\n", path.c_str(), targets.size(), targets[0].c_str(), host.c_str());
}

}  // namespace

int resolve_intra_op_threads(int threads) {
    return threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::string resolve_tuning_log(const std::string& tuning_log) {
    if (tuning_log == "none") return "";
    if (tuning_log.empty()) {
        std::string path = tune::default_tuning_log_path();
        return std::filesystem::exists(path) ? path : "";
    }
    KILN_CHECK(std::filesystem::exists(tuning_log), kInvalidArgument) << "tuning log '" << tuning_log << "' does not exist";
    return tuning_log;
}

CompileOptions compile_options_for(const SessionOptions& o, int intra_op_threads) {
    CompileOptions copts;
    copts.dims = o.dims;
    copts.opt_level = o.opt_level;
    copts.kernels = parse_kernel_source(o.kernels);
    copts.intra_op_threads = intra_op_threads;
    copts.preemptible = o.preemptible;
    const char* tiers = std::getenv("KILN_TIERED_COMPILE");
    copts.tiered = o.tiered_compile && !(tiers && std::string(tiers) == "0");
    if (std::string path = resolve_tuning_log(o.tuning_log); !path.empty()) {
        const tune::TuningLog log = tune::TuningLog::read(path);
        copts.tuned = log.best_knobs(tune::host_target(), intra_op_threads);
        if (copts.tuned.empty()) warn_foreign_log(path, log.targets());
    }
    copts.passes.print_after.insert(o.print_after.begin(), o.print_after.end());
    copts.passes.print_after_all = o.print_after_all;
    for (const std::string& name : o.print_after) {
        bool known = name == "*";
        for (const pass::Pass& p : pass::all_passes()) known |= p.name == name;
        KILN_CHECK(known, kInvalidArgument) << "--print-after: no pass named '" << name << "' (passes: " << pass_names()
                                            << ")";
    }
    return copts;
}

}  // namespace kiln::compiler
