// kiln::tune_model (include/kiln/tune.h) over compiler::tune_graph.
#include <iostream>
#include <thread>

#include "compiler/tune_confirm.h"
#include "compiler/tune_model.h"
#include "frontend/onnx/importer.h"
#include "kiln/tune.h"
#include "support/error.h"
#include "tune/measure.h"
#include "tune/rpc.h"
#include "tune/tuning_log.h"

namespace kiln {

TuneReport tune_model(const std::string& onnx_path, const TuneOptions& opts) {
    ir::Graph g = frontend::import_onnx_file(onnx_path);
    compiler::TuneOptions t;
    t.compile.dims = opts.dims;
    t.compile.opt_level = opts.opt_level;
    t.compile.kernels = compiler::parse_kernel_source(opts.kernels);
    t.measure.threads = opts.threads > 0 ? opts.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    t.measure.timeout_s = opts.timeout_seconds;
    t.measure.repeats = opts.repeats;
    t.measure.worker = opts.worker;
    t.budget_seconds = opts.budget_seconds;
    t.max_trials = opts.max_trials;
    t.batch = opts.batch;
    t.resume = opts.resume;
    t.seed = opts.seed;
    t.log_path = opts.log_path.empty() ? tune::default_tuning_log_path() : opts.log_path;
    if (opts.progress)
        t.progress = [&](const compiler::TuneProgress& p) {
            opts.progress({p.workload, p.workloads, p.description, p.trials, p.best_gflops, p.elapsed, p.budget});
        };
    std::unique_ptr<tune::Measurer> measurer = opts.rpc.empty() ? tune::make_local_measurer() : tune::make_rpc_measurer(opts.rpc);
    compiler::TuneResult r = compiler::tune_graph(g, t, *measurer);
    TuneReport out;
    out.seconds = r.seconds;
    out.target = r.target;
    out.log_path = t.log_path;
    for (const compiler::WorkloadResult& w : r.workloads)
        out.workloads.push_back({w.key, w.description, w.count, w.flops, w.default_seconds, w.best_seconds, w.default_knobs,
                                 w.best_knobs, w.trials, w.failures, w.first_failure});
    if (opts.confirm_runs > 0 && opts.rpc.empty()) {  // (measured elsewhere: this machine cannot judge)
        std::vector<const TunedWorkload*> changed;
        for (const TunedWorkload& w : out.workloads)
            if (w.tuned_knobs != w.default_knobs) changed.push_back(&w);
        TuneOptions confirm_opts = opts;
        confirm_opts.threads = t.measure.threads;
        compiler::ModelConfirmation c = compiler::confirm_at_model_level(onnx_path, confirm_opts, out, changed);
        out.confirmed = c.ran;
        out.model_untuned_ms = c.untuned_ms;
        out.model_tuned_ms = c.tuned_ms;
        out.tuning_kept = c.kept;
        out.confirmation_note = c.note;
    }
    return out;
}

int run_tune_worker() { return tune::run_measure_worker(std::cin, std::cout); }

}  // namespace kiln
