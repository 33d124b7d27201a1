// DataflowExecutor: TensorFlow's executor loop over the StepGraph.
//
// A run copies the static dependency counts into atomics. The caller runs the first root and
// queues the other roots on the inter-op pool, then helps the pool (run_until) until the
// remaining-step count reaches zero. process(s) runs s, then for each consumer whose count
// drops to zero: cheap steps (0 < flops <= inline_max_flops) and async starts go on the
// thread's local stack (TF's inline_ready), the first expensive one too (the thread continues
// with it, saving a queue round trip), and the other expensive ones to the pool. An async
// kernel's completion runs on the kernel's own thread (the copy thread) and queues everything
// it makes ready, so that thread never runs kernels. A failing step records the first error
// and marks the run failed; later steps are skipped but still counted down, so the run always
// drains (no deadlock, nothing left referencing the run's state) and returns that error.
// NOTE: the run's state lives on run()'s stack; a thread touches it only before the
// remaining-count decrement of the step it holds, and run() returns only after the count
// reached zero.
#include "runtime/dataflow_executor.h"

#include <atomic>
#include <exception>
#include <memory>

#include "runtime/async_kernel.h"
#include "runtime/run_control.h"

namespace kiln::runtime {

struct DataflowExecutor::RunState {
    RunBindings b;
    kiln_kernel_env env{};
    std::unique_ptr<std::atomic<int>[]> pending;
    std::atomic<int> remaining{0};
    std::atomic<bool> done{false};
    std::atomic<bool> failed{false};
    std::mutex error_mu;
    Status error;
    ProfiledRun* prof = nullptr;
    const std::atomic<bool>* terminate = nullptr;
    std::unique_ptr<OutputReadiness> readiness;
};

Status check_concurrency_plan(const Executable& exe) {
    if (exe.planned_for_concurrency) return Status::ok_status();
    return Status(ErrorKind::kInvalidArgument,
                  "the dataflow executor needs an executable whose memory plan was made for concurrent "
                  "steps (compile with CompileOptions::plan_for_concurrency); this one was planned for "
                  "sequential execution: use the sequential executor or recompile");
}

DataflowExecutor::DataflowExecutor(std::shared_ptr<Executable> exe, ThreadPool* intra, InterOpThreadPool* inter,
                                   Allocator* alloc, DataflowOptions opts)
    : exe_(exe), table_(exe, alloc), intra_(intra), inter_(inter), opts_(opts) {
    if (exe_) {
        graph_ = build_step_graph(*exe_);
        plan_error_ = check_concurrency_plan(*exe_);
    }
}

DataflowExecutor::~DataflowExecutor() = default;

bool DataflowExecutor::is_cheap(int step) const {
    double f = exe_->steps[step].flops;
    return f > 0 && f <= opts_.inline_max_flops;
}

void DataflowExecutor::fail(RunState& st, Status s) {
    std::lock_guard<std::mutex> lock(st.error_mu);
    if (!st.failed.load(std::memory_order_relaxed)) {
        st.error = std::move(s);
        st.failed.store(true, std::memory_order_release);
    }
}

void DataflowExecutor::complete(int step, RunState& st, std::vector<int>* local) {
    int keep = -1;
    for (int c : graph_.consumers[step]) {
        if (st.pending[c].fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
        bool async = exe_->kernels[exe_->steps[c].kernel].is_async;
        if (local && (async || is_cheap(c))) {
            local->push_back(c);
        } else if (local && keep < 0) {
            keep = c;
        } else if (inter_) {
            inter_->schedule([this, c, &st] { process(c, st); });
        } else if (local) {
            local->push_back(c);
        } else {
            // No pool and no local stack (an async completion): run on this thread.
            process(c, st);
        }
    }
    // The kept expensive step runs after this thread's cheap ones (LIFO stack).
    if (keep >= 0) local->insert(local->begin(), keep);
    if (st.remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        st.done.store(true, std::memory_order_release);
        if (inter_) inter_->notify();
    }
}

void DataflowExecutor::start_async(int step, RunState& st) {
    const StepDesc& sd = exe_->steps[step];
    AsyncKernel* k = find_async_kernel(exe_->kernels[sd.kernel].symbol);
    if (!k) {
        fail(st, Status(ErrorKind::kInternal, "bug in Kiln: node '" + sd.node_name + "' names unknown async kernel '" +
                                                  exe_->kernels[sd.kernel].symbol + "'"));
        complete(step, st, nullptr);
        return;
    }
    std::vector<void*> args;
    std::vector<size_t> bytes;
    for (int id : sd.args) {
        args.push_back(st.b.ptrs[id]);
        bytes.push_back(exe_->buffers[id].nbytes());
    }
    int64_t t0 = st.prof ? profiler_->now_ns() : 0;
    int tid = st.prof ? Profiler::thread_id() : -1;
    k->start(std::move(args), std::move(bytes), [this, step, &st, t0, tid](Status s) {
        if (st.prof) st.prof->steps[step] = {tid, t0, profiler_->now_ns() - t0};
        if (!s.ok()) fail(st, std::move(s));
        else st.readiness->step_done(static_cast<size_t>(step));
        complete(step, st, nullptr);
    });
}

void DataflowExecutor::process(int step, RunState& st) {
    std::vector<int> local{step};
    while (!local.empty()) {
        int s = local.back();
        local.pop_back();
        if (st.terminate && st.terminate->load(std::memory_order_relaxed) && !st.failed.load(std::memory_order_acquire))
            fail(st, cancelled_status(exe_->steps[s].node_name));
        if (!st.failed.load(std::memory_order_acquire)) {
            if (exe_->kernels[exe_->steps[s].kernel].is_async) {
                start_async(s, st);
                continue;  // completes on the kernel's thread
            }
            Status r;
            {
                StepTimer timer(profiler_, st.prof, s);
                try {
                    r = table_.run_step(static_cast<size_t>(s), st.b, st.env);
                } catch (const std::exception& e) {
                    r = Status(ErrorKind::kInternal, "node '" + exe_->steps[s].node_name + "': " + e.what());
                }
            }
            if (!r.ok()) fail(st, std::move(r));
            else st.readiness->step_done(static_cast<size_t>(s));
        }
        complete(s, st, &local);
    }
}

Status DataflowExecutor::run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                             const std::atomic<bool>* terminate, int max_threads,
                             const std::vector<const Tensor*>* into, const OutputReadyFn* ready) {
    if (!plan_error_.ok()) return plan_error_;
    std::lock_guard<std::mutex> run_lock(run_mu_);
    RunState st;
    st.terminate = terminate;
    Status s = table_.bind(inputs, st.b, into);
    if (!s.ok()) return s;
    if (ready && !ready_plan_) ready_plan_ = std::make_unique<OutputReadyPlan>(OutputReadyPlan::build(*exe_));
    st.readiness = std::make_unique<OutputReadiness>(ready_plan_.get(), st.b, exe_->outputs, ready);
    const int n = static_cast<int>(exe_->steps.size());
    // The cap applies to each kernel's loops; concurrent kernels (inter-op threads) still add up.
    RunControl control(intra_, max_threads);
    st.env = control.env(false);
    st.pending.reset(new std::atomic<int>[n]);
    for (int i = 0; i < n; ++i) st.pending[i].store(graph_.num_deps[i], std::memory_order_relaxed);
    st.remaining.store(n, std::memory_order_relaxed);
    st.prof = profiler_ ? profiler_->begin_run(exe_) : nullptr;
    if (n > 0) {
        const std::vector<int>& roots = graph_.roots;
        for (size_t i = 1; i < roots.size(); ++i) {
            int r = roots[i];
            if (inter_)
                inter_->schedule([this, r, &st] { process(r, st); });
        }
        process(roots[0], st);
        if (!inter_) {
            for (size_t i = 1; i < roots.size(); ++i) process(roots[i], st);
        }
        if (inter_) {
            inter_->run_until(st.done);
        } else {
            // Without a pool only async completions are outstanding: wait for them.
            while (!st.done.load(std::memory_order_acquire)) std::this_thread::yield();
        }
    }
    if (st.failed.load(std::memory_order_acquire)) return st.error;
    table_.collect_outputs(st.b, outputs);
    st.readiness->finish(outputs);
    return Status::ok_status();
}

}  // namespace kiln::runtime
