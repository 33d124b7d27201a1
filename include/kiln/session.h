// Session: load a model, compile it for the given input shapes, run it.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/datum.h"
#include "kiln/error.h"
#include "kiln/tensor.h"

namespace kiln {

/// Which executor runs the compiled steps.
enum class ExecutorKind { kAuto, kSequential, kDataflow };

struct SessionOptions {
    /// Intra-op threads (0 = all cores). `threads` is the historical name of intra_op_threads.
    int threads = 0;
    /// Inter-op threads for the dataflow executor (0 = one: kernels run one at a time, so a run
    /// uses exactly `threads` threads; give 2 or more to run independent kernels at once).
    int inter_op_threads = 0;
    /// kAuto picks dataflow when the graph has enough parallel width.
    ExecutorKind executor = ExecutorKind::kAuto;
    /// Share the process-wide thread pools with other sessions (false: this session owns its pools).
    bool use_global_thread_pools = false;
    /// Runs of this session will be preempted (RunControls::preempt; `kiln serve` sets it, Python
    /// "kiln.preemptible", C kiln_session_options_set_preemptible): kernels
    /// are compiled so that a stop waits at most a short parallel iteration (a matmul's holds at
    /// most ~4 M multiply-adds, about 30 us of a core), which costs a few percent of speed
    /// (BERT-base 3.5% at 2 threads). Off: the fastest kernels, stopped between longer iterations.
    bool preemptible = false;
    /// Memory budget in bytes for this session's tensors (0 = unlimited); exceeding it is an
    /// OutOfMemory error naming the tensor.
    size_t memory_limit = 0;
    /// Write a Chrome trace (chrome://tracing, Perfetto) of every run to this path ("" = off).
    std::string profile_path;
    /// Record per-kernel timings of every run (implied by profile_path): Session::profile_summary.
    bool profile = false;
    /// Values for symbolic input dimensions: every run must agree with them.
    std::map<std::string, int64_t> dims;
    /// Shapes to compile at load (docs/dynamic_shapes.md): every combination of the listed values
    /// of symbolic dims not bound in `dims` ({"seq": {16, 32, 64}} compiles three
    /// specializations), so that first runs at those shapes are warm. A name that is no symbolic
    /// dim of the model, or is bound in `dims`, is a kInvalidArgument error.
    std::map<std::string, std::vector<int64_t>> specialize;
    /// Declared ranges of symbolic input dimensions, inclusive ({"seq": {1, 512}}): a run whose
    /// inputs give a dim outside its range is a kInvalidArgument error naming the input, the dim,
    /// its value and the range, and a `.kiln` artifact compiled with them checks them too. A name
    /// that is no symbolic dim of the model, a range with min < 0 or min > max, and a value of
    /// `dims` or `specialize` outside its range are kInvalidArgument errors at load.
    std::map<std::string, std::pair<int64_t, int64_t>> dim_ranges;
    /// How many compiled specializations (one per binding of the symbolic dims and values of
    /// shape-deciding inputs) the session keeps (>= 1); past it the least recently used one is
    /// dropped, and compiled again if a run needs it.
    int max_specializations = 16;
    /// Compile once for every value of the symbolic dims (docs/dynamic_shapes.md): kernels take
    /// the dims as parameters and each run binds them from its inputs, so a first run at a new
    /// shape compiles nothing. Models with an op outside the supported subset (or whose inputs
    /// decide shapes), and sessions asked to `specialize`, compile per shape as without it;
    /// SessionStats::symbolic_reason says why. On by default: for the subset, warm symbolic runs
    /// measured 0.74-1.03x the per-shape kernels' time (docs/dynamic_shapes.md), and a first run
    /// at a new shape compiles nothing.
    bool symbolic_shapes = true;
    /// A compile that would run the C compiler on more kernels than it runs processes at once (a
    /// cold kernel cache) first builds them quickly (-O1 with the vectorizer: about 0.7x the
    /// compile time, calls about 1.1x slower) and runs on those, while the same kernels compile
    /// at -O3 in the background at a lower priority; each kernel switches to its -O3 build when
    /// that is done, and the cache then holds the -O3 build for the next process. Off (or the
    /// environment's KILN_TIERED_COMPILE=0): -O3 from the first call, whose results then never
    /// change in the last bits (docs/dynamic_shapes.md, "Tiered compiles").
    bool tiered_compile = true;
    /// Graph optimization level, 0..3 (docs/passes.md): -O0 runs every node as its own kernel;
    /// -O3 folds, simplifies and fuses.
    int opt_level = 3;
    /// Who computes convolutions and matrix products: "generated" (Kiln's own kernels), "dnnl"
    /// (oneDNN wherever it can), or "auto" (a rule per workload; docs/kernels.md).
    std::string kernels = "auto";
    /// The tuning log (`kiln tune`, docs/tuning.md) whose best records the compile applies:
    /// "" = the default log in the kernel cache directory when it exists, "none" = untuned.
    /// A named file that does not exist is a kInvalidArgument error.
    std::string tuning_log;
    /// Passes after which inspect() shows the IR (pass names as `kiln inspect --print-after`
    /// takes them), or all of them.
    std::vector<std::string> print_after;
    bool print_after_all = false;
};

/// Every combination of the sizes in SessionOptions::specialize, in order ({} when it is empty).
std::vector<std::map<std::string, int64_t>> specialization_combinations(
    const std::map<std::string, std::vector<int64_t>>& sizes);

/// What a model input or output is. Sequences and optionals are run through Session::run_values.
enum class ValueKind { kTensor, kSequence, kOptionalTensor, kOptionalSequence };

struct TensorInfo {
    std::string name;
    ValueKind kind = ValueKind::kTensor;
    DType dtype;  // of the elements, for a sequence or optional
    std::vector<int64_t> shape;        // -1 where symbolic/unknown
    std::vector<std::string> symbols;  // per dim: symbol name or ""
};

struct SessionStats {
    // kernels, compiled and compile_seconds are those of the last whole-model compile.
    int kernels = 0;
    int compiled = 0;        // kernels compiled by the system compiler (cache misses)
    double compile_seconds = 0;
    double load_seconds = 0; // import + compile + load, total
    std::string executor;        // the executor running the model: "sequential", "dataflow", "vm" or "interpreter"
    int intra_op_threads = 0;    // resolved thread counts (0 before the first compile)
    int inter_op_threads = 0;
    int parallel_width = 0;      // most substantial steps at one dependency level
    /// The model runs in the graph interpreter (compiler/graph_interpreter.h), and why.
    bool interpreted = false;
    std::string interpreter_reason;
    /// For a model with If/Loop/Scan run by the VM (executor "vm", docs/control_flow.md): the
    /// last lowering's figures and what of it runs in the graph interpreter, and why.
    std::string control_flow;
    /// Specializations (docs/dynamic_shapes.md): whole-model compiles so far, compiled
    /// specializations held now (at most SessionOptions::max_specializations), and how many were
    /// dropped for that bound. Runs at a shape held need no compile.
    int compiles = 0;
    int specializations = 0;
    int specialization_evictions = 0;
    /// Bytes of the model's constants as imported (its weights), and of the distinct constant
    /// data the held specializations use (weights and what the passes made of them, such as
    /// packed weights), each storage counted once however many specializations share it.
    size_t weight_bytes = 0;
    size_t constant_bytes = 0;
    /// SessionOptions::symbolic_shapes: whether the model runs on one symbolic compile, and if
    /// it was asked for but could not, why ("" otherwise).
    bool symbolic = false;
    std::string symbolic_reason;
    /// SessionOptions::tiered_compile: generated kernels of the last compile first built at the
    /// quick tier, whether their -O3 builds run now, and how long those took (seconds).
    int quick_kernels = 0;
    bool optimized_kernels_running = true;
    double optimize_seconds = 0;
};

/// Stops a run early so that it can be resumed later: the inference server's real-time
/// requests preempt best-effort ones this way (src/serve, docs/serving.md). One object per
/// logical run; use it from one run() call at a time.
class Preemption {
public:
    Preemption();
    ~Preemption();
    Preemption(const Preemption&) = delete;
    Preemption& operator=(const Preemption&) = delete;

    /// From any thread: the run using this object stops at its next kernel boundary, or inside a
    /// long kernel at its next parallel-chunk boundary. A run() started while the request is
    /// set stops before its first kernel.
    void request();
    /// Withdraws the request (the scheduler calls it before resuming the run).
    void clear_request();
    bool requested() const;
    /// Whether the last run() with this object stopped early: it returned no outputs, and
    /// calling run() again with the same inputs and this object resumes where it stopped (the
    /// result is identical to an unpreempted run).
    bool suspended() const;
    /// Drops a suspended run's state (its intermediates); the next run() starts afresh.
    void reset();

    /// The runtime's state of the suspended run (opaque to users).
    struct State;
    State* state() { return state_.get(); }

private:
    std::unique_ptr<State> state_;
};

/// Per-run options (ONNX Runtime's RunOptions).
struct RunOptions {
    /// When set (from any thread, before or during the run), the run stops at the next kernel
    /// boundary and throws kCancelled.
    const std::atomic<bool>* terminate = nullptr;
    /// When set, the run may be preempted and resumed (see Preemption). A preempted run()
    /// returns an empty vector with preempt->suspended() true; it never throws for preemption.
    Preemption* preempt = nullptr;
    /// Use at most this many of the session's intra-op threads for this run (0 = all). A resumed
    /// run may use a different number than the run it resumes (the result is the same).
    int max_threads = 0;
    /// Outputs into the caller's memory (ONNX Runtime's IOBinding): output name -> a tensor of
    /// that output's dtype and shape at this run (Tensor::borrow of the caller's buffer, say) that
    /// the run writes the output into; the run returns that tensor (same storage) for it. A
    /// compiled model's kernels write there directly, no copy; a model run by the graph
    /// interpreter or the VM, and an output that is an input or a constant of the model, is
    /// copied in. A name that is no output, a non-tensor output, or a tensor of another dtype or
    /// shape is kInvalidArgument naming the output, expected vs got. The memory must stay alive,
    /// and must not overlap an input, until the run returns. Not with `preempt`.
    const std::map<std::string, Tensor>* outputs_into = nullptr;
};

/// A loaded model. run() and run_values() may be called from several threads at once; each call
/// gets its own intermediates and its own correct result.
class Session {
public:
    /// Loads an ONNX model (imports and compiles it: static shapes are known once dims are
    /// bound; inputs whose values shape the graph, such as a Reshape target fed by a graph input,
    /// compile at first run), or a compiled `.kiln` artifact (`kiln compile`, docs/deploy.md).
    static std::unique_ptr<Session> load(const std::string& path, const SessionOptions& opts = {});
    virtual ~Session() = default;

    virtual const std::vector<TensorInfo>& inputs() const = 0;
    virtual const std::vector<TensorInfo>& outputs() const = 0;

    /// Compiles the specialization for these values of the symbolic dims now (the others from
    /// SessionOptions::dims), so that a first run at that shape is warm; nothing when it is held
    /// already. An unknown or unbound dim is a kInvalidArgument error naming it. Nothing to do
    /// for a session that does not compile (a `.kiln` artifact, a model in the graph
    /// interpreter) or a model whose input values decide shapes (it compiles at run).
    virtual void specialize(const std::map<std::string, int64_t>& dims) { (void)dims; }

    /// Blocks until every kernel runs its -O3 build (SessionOptions::tiered_compile); returns
    /// at once when they already do. Benchmarks call it before timing warm calls.
    virtual void wait_for_optimized_kernels() {}

    /// Runs the model. Every input must be given (kInvalidArgument naming the missing one);
    /// dtypes and shapes are checked (expected vs got). Outputs in model order.
    virtual std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs, const RunOptions& run_options = {}) = 0;

    /// Runs the model on values of any kind the model takes (sequences, optionals: Datum::none()
    /// for an empty one; tensors of any dtype, strings included). Outputs in model order.
    virtual std::vector<Datum> run_values(const std::map<std::string, Datum>& inputs,
                                          const RunOptions& run_options = {}) = 0;

    /// The IR after the pass pipeline (and after the passes of SessionOptions::print_after),
    /// the passes' node counts and timings, and every kernel's loop IR and C source, as text.
    virtual std::string inspect() = 0;
    /// One line per kernel a run launches (its position, fused op list and node), then a line
    /// "N kernels". Compiles first if needed.
    virtual std::string kernel_list() { return ""; }
    virtual SessionStats stats() const = 0;
    /// Facts about the model as strings. For a `.kiln` artifact, what `kiln compile` recorded
    /// (producer, source model, dims, the ONNX model's fields as "model.producer_name",
    /// "model.graph_name", "model.metadata.<key>", ...); empty for an ONNX model.
    virtual std::map<std::string, std::string> metadata() const { return {}; }

    /// The static memory plan, one figure per line in bytes ("arena: N", "naive sum: N",
    /// "lower bound: N", in-place steps, the largest tensors), then the session allocator's
    /// statistics (bytes in use and cached, cache hits and misses). Compiles first if needed.
    virtual std::string memory_report() { return ""; }

    /// A table of the top kernels by total time over the runs so far (share %, GFLOP/s); empty
    /// unless SessionOptions::profile or profile_path is set.
    virtual std::string profile_summary(int top = 15) const { (void)top; return ""; }
    /// Writes the Chrome trace of the runs so far to SessionOptions::profile_path (also done
    /// when the session is destroyed). Throws kIOError if the file cannot be written.
    virtual void write_profile() const {}
};

}  // namespace kiln
