// ModelRunner: runs one compiled Executable for a session — the thread pools, the executor
// choice (sequential or dataflow), the session's allocator (with its memory budget), the
// profiler, and one executor per concurrent caller, so several threads may run at once.
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

#include "runtime/caching_allocator.h"
#include "runtime/executable.h"
#include "runtime/executor.h"
#include "runtime/inter_op_thread_pool.h"
#include "runtime/profiler.h"
#include "runtime/thread_pool.h"
#include "support/status.h"
#include "support/tensor.h"

namespace kiln::runtime {

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

struct RunnerStats {
    std::string executor;  // "sequential" or "dataflow" ("" before set_executable)
    int intra_op_threads = 0;
    int inter_op_threads = 0;
    int parallel_width = 0;  // most substantial steps at one dependency level
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

    /// Makes `exe` the executable later runs use and picks the executor for it. Runs in flight
    /// finish on the executable they started with.
    void set_executable(std::shared_ptr<Executable> exe);
    bool has_executable() const;

    /// Runs the executable (inputs in its input order). Safe to call from several threads at
    /// once: each caller takes an idle executor (its own intermediates arena) or makes one.
    /// `terminate`, when set, stops the run at the next step boundary (a kCancelled Status).
    Status run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
               const std::atomic<bool>* terminate = nullptr);

    ThreadPool* intra_pool() const { return intra_; }
    /// The session's allocator (caching, over the memory budget) that the executors use.
    Allocator* allocator() const { return memory_.get(); }
    RunnerStats stats() const;
    /// "allocator: N bytes in use, ..." (one line), with the budget when one is set.
    std::string allocator_report() const;
    std::string profile_summary(int top) const;
    /// Writes the Chrome trace to RunnerOptions::profile_path (no-op when unset). Throws kIOError.
    void write_profile() const;

private:
    std::unique_ptr<Executor> make_executor(const std::shared_ptr<Executable>& exe);
    InterOpThreadPool* inter_pool();

    RunnerOptions opts_;
    std::unique_ptr<ThreadPool> own_intra_;
    std::unique_ptr<InterOpThreadPool> own_inter_;
    ThreadPool* intra_ = nullptr;
    InterOpThreadPool* inter_ = nullptr;
    int inter_threads_ = 1;
    std::unique_ptr<Profiler> profiler_;
    mutable size_t written_runs_ = 0;
    // Declared before the executors, so the allocator outlives them.
    std::shared_ptr<CachingAllocator> memory_;
    mutable std::mutex mu_;  // guards exe_, dataflow_, idle_, stats_
    std::shared_ptr<Executable> exe_;
    bool dataflow_ = false;
    std::vector<std::unique_ptr<Executor>> idle_;  // executors of exe_ not running now
    RunnerStats stats_;
};

}  // namespace kiln::runtime
