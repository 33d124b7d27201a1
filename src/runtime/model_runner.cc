// ModelRunner (model_runner.h): pools, executor choice, allocator, profiler, and a free list
// of executors so that concurrent runs each bind their own intermediates.
#include "runtime/model_runner.h"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <thread>

#include "runtime/dataflow_executor.h"
#include "runtime/preemption.h"
#include "runtime/sequential_executor.h"
#include "runtime/step_graph.h"
#include "support/error.h"

namespace kiln::runtime {
namespace {

/// A step below this many FLOPs does not count towards the parallel width.
constexpr double kMinWidthFlops = 1e5;

int cores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

uint64_t next_runner_id() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

ModelRunner::ModelRunner(const RunnerOptions& opts) : id_(next_runner_id()), opts_(opts) {
    KILN_CHECK(opts_.threads >= 0, kInvalidArgument) << "intra-op threads must be >= 0, got " << opts_.threads;
    KILN_CHECK(opts_.inter_op_threads >= 0, kInvalidArgument)
        << "inter-op threads must be >= 0, got " << opts_.inter_op_threads;
    const int intra = opts_.threads > 0 ? opts_.threads : cores();
    if (opts_.use_global_thread_pools) {
        intra_ = global_thread_pool(intra);
    } else {
        own_intra_ = std::make_unique<ThreadPool>(intra);
        intra_ = own_intra_.get();
    }
    // Default one: inter-op threads add to the intra-op ones (a run may use J + I - 1), so only
    // an explicit request runs kernels concurrently and `threads` stays exact.
    inter_threads_ = opts_.inter_op_threads > 0 ? opts_.inter_op_threads : 1;
    intra_threads_ = intra;
    if (opts_.profile || !opts_.profile_path.empty()) profiler_ = std::make_unique<Profiler>();
    memory_ = make_session_allocator(opts_.memory_limit);
}

ModelRunner::~ModelRunner() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        current_.reset();  // executors give their arenas back (the allocator is shared, kept alive)
    }
    if (profiler_ && !opts_.profile_path.empty() && profiler_->num_runs() != written_runs_)
        (void)profiler_->write_chrome_trace(opts_.profile_path);  // best effort: no throw here
}

bool ModelRunner::plans_for_concurrency() const {
    return opts_.executor == ExecutorChoice::kDataflow || (opts_.executor == ExecutorChoice::kAuto && inter_threads_ > 1);
}

InterOpThreadPool* ModelRunner::inter_pool() {
    std::lock_guard<std::mutex> lock(inter_mu_);
    if (inter_) return inter_;
    if (opts_.use_global_thread_pools) {
        inter_ = global_inter_op_thread_pool(inter_threads_);
    } else {
        own_inter_ = std::make_unique<InterOpThreadPool>(inter_threads_);
        inter_ = own_inter_.get();
    }
    return inter_;
}

std::shared_ptr<PreparedExecutable> ModelRunner::prepare(std::shared_ptr<Executable> exe) {
    KILN_ICHECK(exe != nullptr);
    auto p = std::make_shared<PreparedExecutable>();
    StepGraph g = build_step_graph(*exe);
    p->parallel_width = parallel_width(*exe, g, kMinWidthFlops);
    // kAuto: dataflow when at least two substantial steps may run at once and there are
    // inter-op threads to run them.
    p->dataflow = opts_.executor == ExecutorChoice::kDataflow ||
                  (opts_.executor == ExecutorChoice::kAuto && p->parallel_width >= 2 && inter_threads_ > 1);
    // The dataflow executor sizes buffers from their static shapes: an executable with symbolic
    // dims runs on the sequential one (its memory is placed per run's dims, runtime/dims_plan.h).
    if (exe->is_symbolic()) p->dataflow = false;
    if (p->dataflow) (void)inter_pool();
    p->exe = std::move(exe);
    p->memory = memory_;
    p->idle.push_back(make_executor(*p));  // the one a lone caller uses (memory bound at its first run)
    return p;
}

void ModelRunner::set_executable(std::shared_ptr<Executable> exe) {
    std::shared_ptr<PreparedExecutable> p = prepare(std::move(exe));
    std::lock_guard<std::mutex> lock(mu_);
    current_.swap(p);  // the old one dies outside the lock, or when its last run ends
}

bool ModelRunner::has_executable() const {
    std::lock_guard<std::mutex> lock(mu_);
    return current_ != nullptr;
}

std::unique_ptr<Executor> ModelRunner::make_executor(const PreparedExecutable& p) {
    std::unique_ptr<Executor> e;
    if (p.dataflow)
        e = std::make_unique<DataflowExecutor>(p.exe, intra_, inter_, memory_.get());
    else
        e = std::make_unique<SequentialExecutor>(p.exe, intra_, memory_.get());
    e->set_profiler(profiler_.get());
    return e;
}

Status ModelRunner::run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                        const std::atomic<bool>* terminate) {
    RunControls c;
    c.terminate = terminate;
    return run(inputs, outputs, c);
}

Status ModelRunner::run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs, const RunControls& c) {
    std::shared_ptr<PreparedExecutable> p;
    {
        std::lock_guard<std::mutex> lock(mu_);
        p = current_;
    }
    if (!p && c.preempt && holds_suspended(*c.preempt)) return run_preemptible(nullptr, inputs, outputs, c);
    KILN_ICHECK(p != nullptr) << "run before set_executable";
    return run(*p, inputs, outputs, c);
}

Status ModelRunner::run(PreparedExecutable& p, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                        const RunControls& c) {
    if (c.max_threads < 0)
        return Status(ErrorKind::kInvalidArgument, "RunOptions::max_threads must be >= 0, got " + std::to_string(c.max_threads));
    if (c.preempt && c.outputs_into)
        return Status(ErrorKind::kInvalidArgument, "RunOptions: outputs_into cannot be used with preempt");
    if (c.preempt && c.on_output_ready)
        return Status(ErrorKind::kInvalidArgument, "RunControls: on_output_ready cannot be used with preempt");
    if (c.preempt) return run_preemptible(&p, inputs, outputs, c);
    std::unique_ptr<Executor> e;
    {
        std::lock_guard<std::mutex> lock(p.mu);
        if (!p.idle.empty()) {
            e = std::move(p.idle.back());
            p.idle.pop_back();
        }
    }
    if (!e) e = make_executor(p);
    Status st = e->run(inputs, outputs, c.terminate, c.max_threads, c.outputs_into, c.on_output_ready);
    std::lock_guard<std::mutex> lock(p.mu);
    p.idle.push_back(std::move(e));
    return st;
}

namespace {

/// Records when a run stopped and the step that held the stop up (Preemption::State's trace
/// fields).
void note_stop(Preemption::State& ps, const SuspendedRun& r) {
    ps.stopped_at_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now().time_since_epoch()).count();
    const Executable& exe = *r.prepared->exe;
    ps.stop_kernel.clear();
    ps.stop_restartable = false;
    if (!r.at.cut_inside_kernel && r.at.next_step == 0) {  // stopped before its first step
        ps.stop_node.clear();
        return;
    }
    // The step that ran when the request came: the one cut, else the last one finished.
    const size_t s = r.at.cut_inside_kernel ? r.at.next_step : r.at.next_step - 1;
    ps.stop_node = s < exe.steps.size() ? exe.steps[s].node_name : "";
    const int k = s < exe.steps.size() ? exe.steps[s].kernel : -1;
    if (k >= 0 && static_cast<size_t>(k) < exe.kernels.size()) {
        const KernelDesc& kd = exe.kernels[k];
        ps.stop_kernel = kd.description + (kd.is_extern() ? "[" + kd.extern_name + "]" : "");
    }
    ps.stop_restartable = s < r.at.restartable.size() && r.at.restartable[s];
}

}  // namespace

bool ModelRunner::holds_suspended(Preemption& p) const {
    const Preemption::State* ps = p.state();
    return ps->suspended && ps->run && ps->run->runner_id == id_;
}

// A preemptible run always uses a SequentialExecutor, even when the runner picked dataflow: its
// resumable state is one step index (a dataflow run would have to drain or record a frontier of
// in-flight steps). While suspended, the executor, its intermediates and the executable it
// started on live in the Preemption's state, so a resume is unaffected by set_executable or by
// the session dropping the executable.
Status ModelRunner::run_preemptible(PreparedExecutable* p, const std::vector<Tensor>& inputs,
                                    std::vector<Tensor>& outputs, const RunControls& c) {
    Preemption::State& ps = *c.preempt->state();
    outputs.clear();
    if (ps.run && ps.run->runner_id != id_)
        return Status(ErrorKind::kInvalidArgument,
                      "RunOptions::preempt holds a run suspended in another session: resume it there, or reset() it");
    std::unique_ptr<SuspendedRun> r = std::move(ps.run);
    ps.suspended = false;
    ps.cut_inside_kernel = false;
    if (!r) {
        KILN_ICHECK(p != nullptr) << "a preemptible run with no executable and nothing to resume";
        r = std::make_unique<SuspendedRun>();
        r->runner_id = id_;
        r->memory = memory_;
        r->prepared = p->shared_from_this();
        std::lock_guard<std::mutex> lock(p->mu);
        for (auto it = p->idle.begin(); it != p->idle.end(); ++it) {
            if (auto* seq = dynamic_cast<SequentialExecutor*>(it->get())) {
                it->release();
                p->idle.erase(it);
                r->executor.reset(seq);
                break;
            }
        }
        if (!r->executor) {
            r->executor = std::make_unique<SequentialExecutor>(p->exe, intra_, memory_.get());
            r->executor->set_profiler(profiler_.get());
        }
    }
    bool finished = false;
    Status st = r->executor->run_preemptible(inputs, outputs, r->at, ps.requested, c.terminate, c.max_threads, &finished);
    if (st.ok() && !finished) {
        ps.resume_step = r->at.next_step;
        ps.cut_inside_kernel = r->at.cut_inside_kernel;
        note_stop(ps, *r);
        ++ps.suspensions;
        ps.suspended = true;
        ps.run = std::move(r);
        outputs.clear();
        return st;
    }
    // Finished or failed: the run's state is dropped; its executor serves later runs of its
    // executable when that one runs on the sequential executor.
    PreparedExecutable& done = *r->prepared;
    std::lock_guard<std::mutex> lock(done.mu);
    if (!done.dataflow) done.idle.push_back(std::move(r->executor));
    return st;
}

RunnerStats ModelRunner::stats() const {
    std::shared_ptr<PreparedExecutable> p;
    {
        std::lock_guard<std::mutex> lock(mu_);
        p = current_;
    }
    if (p) return stats(*p);
    RunnerStats s;
    s.intra_op_threads = intra_threads_;
    return s;
}

RunnerStats ModelRunner::stats(const PreparedExecutable& p) const {
    RunnerStats s;
    s.intra_op_threads = intra_threads_;
    s.executor = p.dataflow ? "dataflow" : "sequential";
    s.inter_op_threads = p.dataflow ? inter_threads_ : 1;
    s.parallel_width = p.parallel_width;
    return s;
}

std::string ModelRunner::allocator_report() const {
    CachingStats st = memory_->stats();
    std::ostringstream os;
    os << "allocator: " << st.bytes_in_use << " bytes in use, " << st.bytes_cached << " cached, peak " << st.peak_held
       << " held; " << st.hits << " hits, " << st.misses << " misses";
    if (opts_.memory_limit) os << "; budget " << opts_.memory_limit << " bytes";
    os << "\n";
    return os.str();
}

std::string ModelRunner::profile_summary(int top) const { return profiler_ ? profiler_->summary(top) : ""; }

void ModelRunner::write_profile() const {
    if (!profiler_ || opts_.profile_path.empty()) return;
    profiler_->write_chrome_trace(opts_.profile_path).throw_if_error();
    written_runs_ = profiler_->num_runs();
}

}  // namespace kiln::runtime
