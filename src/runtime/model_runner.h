// ModelRunner: runs a session's compiled Executables — the thread pools, the executor choice
// (sequential or dataflow) per executable, the session's allocator (with its memory budget), the
// profiler, and one executor per concurrent caller, so several threads may run at once.
//
// A session that holds several executables (one per shape specialization, compiler/session.cc)
// prepares each once (prepare) and runs whichever fits the inputs; the pools, the allocator and
// the profiler are the runner's and shared by all of them. A session with one executable uses
// set_executable and the run overloads without a PreparedExecutable.
//
// Shared by the compiling session (compiler/session.cc) and the artifact session
// (runtime/artifact_session.cc), which is why it lives in the runtime: it knows nothing of
// graphs or compilers.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/session.h"
#include "runtime/caching_allocator.h"
#include "runtime/executable.h"
#include "runtime/executor.h"
#include "runtime/inter_op_thread_pool.h"
#include "runtime/output_ready.h"
#include "runtime/profiler.h"
#include "runtime/sequential_executor.h"
#include "runtime/thread_pool.h"
#include "support/status.h"
#include "support/tensor.h"

namespace kiln::runtime {

class SequentialExecutor;

enum class ExecutorChoice { kAuto, kSequential, kDataflow };

struct RunnerOptions {
    int threads = 0;           // intra-op threads (0 = all cores)
    int inter_op_threads = 0;  // dataflow executor's inter-op threads (0 = one)
    ExecutorChoice executor = ExecutorChoice::kAuto;
    bool use_global_thread_pools = false;
    size_t memory_limit = 0;   // bytes (0 = unlimited)
    std::string profile_path;  // Chrome trace written here ("" = off)
    bool profile = false;      // per-kernel timings (implied by profile_path)
};

/// The runner options of a public SessionOptions (one place for the compiling, artifact and
/// training sessions).
inline RunnerOptions runner_options(const SessionOptions& o) {
    RunnerOptions r;
    r.threads = o.threads;
    r.inter_op_threads = o.inter_op_threads;
    r.executor = o.executor == ExecutorKind::kSequential ? ExecutorChoice::kSequential
                 : o.executor == ExecutorKind::kDataflow ? ExecutorChoice::kDataflow
                                                         : ExecutorChoice::kAuto;
    r.use_global_thread_pools = o.use_global_thread_pools;
    r.memory_limit = o.memory_limit;
    r.profile_path = o.profile_path;
    r.profile = o.profile;
    return r;
}

/// Per-run controls (kiln::RunOptions).
struct RunControls {
    /// When set, the run stops at the next step boundary with a kCancelled Status.
    const std::atomic<bool>* terminate = nullptr;
    /// When set, the run is preemptible (kiln::Preemption): it runs on a sequential executor
    /// (its resumable state is one step index), stops once preempt->requested() and keeps its
    /// state in preempt->state() (an ok Status, no outputs, preempt->suspended() true); the next
    /// run with the same object resumes it.
    Preemption* preempt = nullptr;
    /// Kernels use at most this many intra-op threads (0 = all).
    int max_threads = 0;
    /// Per executable output, a tensor the run writes that output into (null: a fresh tensor);
    /// the session checked names, dtypes and shapes (runtime/output_binding.h). Not with preempt.
    const std::vector<const Tensor*>* outputs_into = nullptr;
    /// Told each output as soon as the run has finally written it, while later steps still run
    /// (runtime/output_ready.h; data-parallel training starts allreduces from it). Not with preempt.
    const OutputReadyFn* on_output_ready = nullptr;
};

/// The controls of a public RunOptions.
inline RunControls run_controls(const RunOptions& o) {
    RunControls c;
    c.terminate = o.terminate;
    c.preempt = o.preempt;
    c.max_threads = o.max_threads;
    return c;
}

struct RunnerStats {
    std::string executor;  // "sequential" or "dataflow" ("" before set_executable)
    int intra_op_threads = 0;
    int inter_op_threads = 0;
    int parallel_width = 0;  // most substantial steps at one dependency level
};

/// An executable ready to run in one runner: its executor kind and the executors not running
/// now (each binds its own intermediates at its first run). Made by ModelRunner::prepare; runs
/// in flight keep it alive, so a session may drop it at any time.
struct PreparedExecutable : std::enable_shared_from_this<PreparedExecutable> {
    std::shared_ptr<Executable> exe;
    bool dataflow = false;
    int parallel_width = 0;  // most substantial steps at one dependency level
    // Declared before the executors, so the allocator outlives them.
    std::shared_ptr<CachingAllocator> memory;
    std::mutex mu;  // guards idle
    std::vector<std::unique_ptr<Executor>> idle;
};

class ModelRunner {
public:
    /// Validates the thread counts (kInvalidArgument) and makes the pools.
    explicit ModelRunner(const RunnerOptions& opts);
    /// Writes the profile when runs were recorded since the last write (best effort).
    ~ModelRunner();
    ModelRunner(const ModelRunner&) = delete;
    ModelRunner& operator=(const ModelRunner&) = delete;

    /// Whether executables for this runner should be planned for concurrent steps
    /// (CompileOptions::plan_for_concurrency): the dataflow executor may be used.
    bool plans_for_concurrency() const;

    /// Picks the executor for `exe` (dataflow or sequential, by options and parallel width) and
    /// makes the executor a lone caller uses (its memory is bound at its first run).
    std::shared_ptr<PreparedExecutable> prepare(std::shared_ptr<Executable> exe);
    /// Runs `p` (inputs in its executable's input order); safe from several threads at once, as
    /// run() below. A run with controls.preempt holding a suspended run resumes that run instead.
    Status run(PreparedExecutable& p, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
               const RunControls& controls);

    /// Makes `exe` the executable later runs use (prepare). Runs in flight finish on the
    /// executable they started with.
    void set_executable(std::shared_ptr<Executable> exe);
    bool has_executable() const;

    /// Runs the executable (inputs in its input order). Safe to call from several threads at
    /// once: each caller takes an idle executor (its own intermediates arena) or makes one.
    /// `terminate`, when set, stops the run at the next step boundary (a kCancelled Status).
    Status run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
               const std::atomic<bool>* terminate = nullptr);
    /// As above, with the run's controls. A suspended run resumes on the executable it started
    /// with, even when set_executable replaced it since. A Preemption holding a run suspended
    /// in another runner is a kInvalidArgument error (reset() it).
    Status run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs, const RunControls& controls);
    /// Whether `p` holds a run suspended in this runner (resuming it needs no executable).
    bool holds_suspended(Preemption& p) const;

    ThreadPool* intra_pool() const { return intra_; }
    /// The session's allocator (caching, over the memory budget) that the executors use.
    Allocator* allocator() const { return memory_.get(); }
    /// The executor and thread figures of the executable set_executable set.
    RunnerStats stats() const;
    /// The same figures for `p`.
    RunnerStats stats(const PreparedExecutable& p) const;
    /// "allocator: N bytes in use, ..." (one line), with the budget when one is set.
    std::string allocator_report() const;
    std::string profile_summary(int top) const;
    /// Writes the Chrome trace to RunnerOptions::profile_path (no-op when unset). Throws kIOError.
    void write_profile() const;

private:
    std::unique_ptr<Executor> make_executor(const PreparedExecutable& p);
    /// `p` may be null when c.preempt holds a suspended run of this runner (it resumes that).
    Status run_preemptible(PreparedExecutable* p, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                           const RunControls& c);
    const uint64_t id_;  // tells a Preemption's suspended run which runner it belongs to
    InterOpThreadPool* inter_pool();

    RunnerOptions opts_;
    std::unique_ptr<ThreadPool> own_intra_;
    std::unique_ptr<InterOpThreadPool> own_inter_;
    ThreadPool* intra_ = nullptr;
    InterOpThreadPool* inter_ = nullptr;
    int inter_threads_ = 1;
    std::unique_ptr<Profiler> profiler_;
    mutable size_t written_runs_ = 0;
    // Declared before the prepared executables, so the allocator outlives their executors.
    std::shared_ptr<CachingAllocator> memory_;
    std::mutex inter_mu_;    // guards the lazy creation of inter_
    mutable std::mutex mu_;  // guards current_
    std::shared_ptr<PreparedExecutable> current_;  // set_executable's
    int intra_threads_ = 0;
};

}  // namespace kiln::runtime

namespace kiln::runtime {

/// A preemptible run between its calls (kept in Preemption::State). Members are destroyed in
/// reverse order: the outputs and the executor give memory back to an allocator still alive,
/// even when the runner (the session) is gone.
struct SuspendedRun {
    uint64_t runner_id = 0;
    std::shared_ptr<CachingAllocator> memory;
    std::shared_ptr<PreparedExecutable> prepared;  // the executable the run started on
    std::unique_ptr<SequentialExecutor> executor;
    ResumePoint at;
};

}  // namespace kiln::runtime
