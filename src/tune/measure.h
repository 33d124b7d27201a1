// Measuring tuning candidates: each candidate kernel of one workload is compiled (in parallel,
// through the compile driver's job pool), then timed in a separate measurement process, so a
// candidate that crashes or hangs costs only itself (it is recorded as failed, the process is
// restarted for the rest). Within the process every candidate first runs on the same random
// inputs as the reference kernel (candidates[0], the untuned one) and must match its outputs;
// only then is it timed: warm-up runs, then `repeats` timed repeats of enough calls to last
// `min_repeat_ms`, the median of the repeats.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "support/tensor.h"

namespace kiln::tune {

/// One kernel argument: inputs first, then outputs (the kernel ABI's order).
struct ArgSpec {
    DType dtype = DType::kFloat32;
    Shape shape;
    bool is_output = false;
    /// A constant in the model (weights): extern kernels prepare it once at load.
    bool is_constant = false;
    /// A small constant's real values (row-major), used instead of random data: oneDNN's matcher
    /// folds scalars such as an attention scale or GELU's constants into its parameters, so the
    /// kernels only agree on the model's own values. Empty: random data.
    std::vector<double> values;
};

/// One kernel to time: generated C source, or an extern kernel (runtime/extern_kernel.h).
struct Candidate {
    std::string knobs;  // te::ScheduleConfig::format of its knob values (for the record)
    std::string source;
    std::string extern_name, extern_params;
    /// Filled by the measurer after compiling `source`: the shared library's path.
    std::string library;
};

/// Candidates of one workload; candidates[0] is the reference every other output must match.
struct MeasureTask {
    std::string workload;  // for messages
    std::vector<ArgSpec> args;
    double flops = 0;
    std::vector<Candidate> candidates;
};

struct MeasureOptions {
    int threads = 1;            // the intra-op pool the kernels run on
    int warmup = 1;             // untimed calls after the correctness check
    int repeats = 5;            // timed repeats; the median is reported
    double min_repeat_ms = 2;   // each repeat runs the kernel until this much time passed
    double timeout_s = 10;      // per candidate (its check plus its timing)
    /// Before each timed call, evict the caches (read a buffer of twice the last-level cache) and
    /// touch the non-constant inputs: in a model, a kernel's weights were last read a whole
    /// inference ago while its inputs were just written. Each call is then timed on its own and
    /// the median of `repeats` calls reported (min_repeat_ms applies only without flushing).
    bool flush_cache = true;
    int compile_jobs = 0;       // parallel compiler processes (0 = cores)
    /// The measurement program: runs `WORKER tune-worker` (reads a task on stdin, writes one
    /// result line per candidate on stdout). Empty: this process's own executable.
    std::string worker;
    double rtol = 1e-3, atol = 1e-4;  // the output check (relative to the reference's magnitude)
};

struct MeasureResult {
    bool ok = false;
    double seconds = 0;   // median time of one call
    std::string error;    // when !ok: "compile error: ...", "wrong result: ...", "crashed: ...",
                          // "timed out after 10 s"
};

/// Measures tasks somewhere: in a local process or on an rpc server (tune/rpc.h).
class Measurer {
public:
    virtual ~Measurer() = default;
    /// One result per candidate, in order. Never throws for a candidate's failure; throws
    /// kiln::Error only when measuring is impossible (no worker program, lost connection).
    virtual std::vector<MeasureResult> measure(MeasureTask task, const MeasureOptions& opts) = 0;
    /// The machine the times are taken on ("cpu model | isa"), for the tuning log's target.
    virtual std::string target() = 0;
};

/// Compiles on this machine and times in a child process running `opts.worker tune-worker`.
std::unique_ptr<Measurer> make_local_measurer();

/// The measurement process's side: reads one task (JSON, with libraries compiled) from `in`,
/// writes one JSON line per candidate to `out` as it finishes ({"i":k,"ok":..,"seconds":..,
/// "error":..}). Candidates before `first` are skipped except the reference. Returns 0.
int run_measure_worker(std::istream& in, std::ostream& out);

/// This machine's target string: the CPU model name and its vector ISA ("AMD EPYC 9B45 | avx512").
std::string host_target();

/// JSON (de)serialization of tasks, options and results (the worker's stdin, the rpc protocol).
/// The parsers throw kInvalidArgument naming the missing or malformed field.
std::string task_to_json(const MeasureTask& task, const MeasureOptions& opts, size_t first = 1);
void task_from_json(const std::string& json, MeasureTask& task, MeasureOptions& opts, size_t& first);
std::string results_to_json(const std::vector<MeasureResult>& results);
std::vector<MeasureResult> results_from_json(const std::string& json);

}  // namespace kiln::tune
