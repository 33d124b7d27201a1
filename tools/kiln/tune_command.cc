// `kiln tune MODEL.onnx [--budget S] [--trials N] [--threads T] [--log FILE] [--resume] [--rpc H:P]`:
// searches each workload's fastest kernel (include/kiln/tune.h), shows progress on stderr, and
// ends with a table per workload (untuned and tuned time) and the model-level check: the whole
// model before and after, interleaved; the tuned choices are kept only if the model is faster
// (compiler/tune_confirm.h).
// `kiln tune-worker` (hidden) is the measurement process the tuner starts.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>
#include <unistd.h>

#include "commands.h"
#include "kiln/kiln.h"
#include "kiln/tune.h"
#include "name_value_args.h"
#include "support/error.h"

namespace kiln::cli {
namespace {

struct TuneArgs {
    std::string model;
    TuneOptions opts;
    std::vector<std::string> dims;
};

std::string progress_line(const TuneStatus& s) {
    const double left = std::max(0.0, s.budget_seconds - s.elapsed_seconds);
    std::string d = s.description.size() > 48 ? s.description.substr(0, 45) + "..." : s.description;
    return fmt::format("\r[{:>3}/{}] {:<48} trials {:>3}  best {:>6.1f} GFLOP/s  time left {:>4.0f} s", s.workload,
                       s.workloads, d, s.trials, s.best_gflops, left);
}

int tune(TuneArgs& a) {
    KILN_CHECK(std::filesystem::is_regular_file(a.model), kIOError) << "cannot open model '" << a.model << "': no such file";
    a.opts.dims = parse_dims(a.dims);
    const bool tty = isatty(fileno(stderr));
    a.opts.progress = [tty](const TuneStatus& s) {
        std::fputs(progress_line(s).c_str(), stderr);
        if (!tty) std::fputc('\n', stderr);
        std::fflush(stderr);
    };
    TuneReport r = tune_model(a.model, a.opts);
    if (tty) std::fputc('\n', stderr);
    fmt::print("tuned {} workloads in {:.1f} s on {} ({} threads); log: {}\n", r.workloads.size(), r.seconds, r.target,
               a.opts.threads, r.log_path);
    fmt::print("{:<60} {:>3} {:>10} {:>10} {:>7} {:>6} {:>5}  {}\n", "workload", "n", "default ms", "tuned ms", "speedup",
               "trials", "fail", "choice");
    double total_before = 0, total_after = 0;
    for (const TunedWorkload& w : r.workloads) {
        std::string d = w.description.size() > 60 ? w.description.substr(0, 57) + "..." : w.description;
        const double speedup = w.tuned_seconds > 0 ? w.default_seconds / w.tuned_seconds : 0;
        fmt::print("{:<60} {:>3} {:>10.4f} {:>10.4f} {:>6.2f}x {:>6} {:>5}  {}\n", d, w.count, w.default_seconds * 1e3,
                   w.tuned_seconds * 1e3, speedup, w.trials, w.failures, w.tuned_knobs.empty() ? "(default)" : w.tuned_knobs);
        total_before += w.default_seconds * w.count;
        total_after += w.tuned_seconds * w.count;
    }
    fmt::print("sum over tuned kernels: {:.3f} ms -> {:.3f} ms\n", total_before * 1e3, total_after * 1e3);
    for (const TunedWorkload& w : r.workloads)
        if (!w.first_failure.empty())
            fmt::print("failed candidates of {} ({} of {}), the first: {}\n", w.description, w.failures, w.trials,
                       w.first_failure.substr(0, 300));
    if (r.confirmed) {
        fmt::print("model latency (median of {} interleaved runs, {} threads): untuned {:.3f} ms, tuned {:.3f} ms ({:.2f}x)\n",
                   a.opts.confirm_runs, a.opts.threads, r.model_untuned_ms, r.model_tuned_ms,
                   r.model_untuned_ms / r.model_tuned_ms);
        fmt::print("{}\n", r.tuning_kept ? "kept: the tuned choices are applied by later compiles"
                                         : "rejected: " + r.confirmation_note);
    } else if (!r.confirmation_note.empty()) {
        fmt::print("model-level check: {}\n", r.confirmation_note);
    }
    return 0;
}

}  // namespace

void add_tune_command(CLI::App& app, CommandAction& action) {
    auto a = std::make_shared<TuneArgs>();
    CLI::App* sub = app.add_subcommand("tune", "Search each workload's fastest kernel and append it to the tuning log");
    sub->add_option("model", a->model, "ONNX model file")->required();
    sub->add_option("--budget", a->opts.budget_seconds, "Wall-time budget of the search in seconds")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--trials", a->opts.max_trials, "Most candidates measured per workload")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    sub->add_option("--threads", a->opts.threads, "Intra-op threads to tune for (0 = all cores)")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--log", a->opts.log_path, "Tuning log to append to (default: tuning.jsonl in the kernel cache)")
        ->type_name("FILE.jsonl");
    sub->add_flag("--resume", a->opts.resume, "Continue the log's search: its measured points seed the search");
    sub->add_option("--rpc", a->opts.rpc, "Measure on a `kiln rpc-server` at HOST:PORT")->type_name("HOST:PORT");
    sub->add_option("--dim", a->dims, "Value of a symbolic dimension (repeatable)")
        ->type_name("NAME=VALUE")
        ->allow_extra_args(false)
        ->check(name_value_check(true));
    add_opt_level_option(sub, a->opts.opt_level);
    add_kernels_option(sub, a->opts.kernels);
    sub->add_option("--batch", a->opts.batch, "Candidates per measurement round")->capture_default_str()->check(CLI::PositiveNumber);
    sub->add_option("--timeout", a->opts.timeout_seconds, "Seconds a candidate may take before it counts as hung")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    sub->add_option("--compare-runs", a->opts.confirm_runs,
                    "Model runs per variant of the model-level check: tuned choices are kept only if the whole "
                    "model is faster (0 = skip the check)")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--seed", a->opts.seed, "Seed of the search")->capture_default_str();
    sub->callback([a, &action] {
        if (a->opts.threads == 0) a->opts.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
        action = [a] { return tune(*a); };
    });

    CLI::App* worker = app.add_subcommand("tune-worker", "The tuner's measurement process (reads a task on stdin)");
    worker->group("");  // hidden from --help
    worker->callback([&action] { action = [] { return run_tune_worker(); }; });
}

}  // namespace kiln::cli
