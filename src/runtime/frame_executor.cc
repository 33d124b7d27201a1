// FrameExecutor: TensorFlow's propagation of values through frames and iterations.
//
// One mutex guards the run's frames. Values propagate under it: deliver() stores a value in its
// iteration and hands it to each reader (arrive); a step whose inputs have all arrived fires:
// control steps act at once (Switch picks a side, Enter enters the child frame keyed by (parent,
// frame, parent iteration), Exit returns to the parent, NextIteration feeds the Merge of the next
// iteration, starting it unless parallel_iterations are already live, in which case it waits),
// kernel steps are collected as Ready items and run outside the lock on the inter-op pool; their
// outputs propagate when they finish. A step with a dead input does not run: its outputs are dead.
// An iteration is done when none of its kernels is outstanding, no child frame it entered is
// live and its predecessor is done (iteration 0: every Enter has arrived); then its values are
// released and a waiting iteration starts. A frame is done when its last iteration is: Exits that
// never saw a live value send dead to the parent. The run ends when the root frame is done.
// Errors (a failing kernel, a loop past max_iterations, cancellation) are recorded once; later
// kernels are skipped with dead outputs so that every frame still drains.
#include "runtime/frame_executor.h"

#include <cstring>
#include <exception>
#include <set>

#include "runtime/caching_allocator.h"
#include "runtime/frame_state.h"
#include "runtime/index_check.h"
#include "runtime/run_control.h"

namespace kiln::runtime {
namespace {

struct Ready {
    FrameState* f;
    int64_t iter;
    int step;
    std::vector<std::shared_ptr<void>> ins;
};

}  // namespace

struct FrameExecutor::RunState {
    const Executable& exe;
    const FrameGraph& fg;
    std::shared_ptr<Allocator> alloc;
    int parallel_override = 0;
    kiln_kernel_env env{};
    const std::atomic<bool>* terminate = nullptr;
    std::vector<std::shared_ptr<void>> fixed;  // per buffer: graph inputs and constants
    std::vector<char> is_output;               // per buffer
    std::mutex mu;
    FrameMap frames;  // guarded by mu, as everything below
    std::set<const FrameState*> live;
    std::vector<std::pair<FrameState*, int64_t>> touched;
    std::vector<FrameValue> outputs;  // per buffer: root-frame values of graph outputs
    Status error;
    std::atomic<bool> failed{false};
    bool finished = false;
    FrameRunStats stats;
    std::atomic<bool> done{false};
    std::atomic<int> running{0};
    std::atomic<int> peak_running{0};

    void fail(Status s) {
        if (failed.load()) return;
        error = std::move(s);
        failed.store(true);
    }
    FrameValue input(const Iteration& it, int step, int slot) const {
        int b = exe.steps[step].args[slot];
        return fg.producer[b] < 0 ? FrameValue{fixed[b], false} : it.values[b];
    }
    int out_buffer(int step, int k) const { return exe.steps[step].args[exe.steps[step].num_inputs + k]; }

    void deliver(FrameState* f, int64_t iter, int buffer, const FrameValue& v, std::vector<Ready>& ready);
    void arrive(FrameState* f, Iteration& it, int step, const FrameValue& v, std::vector<Ready>& ready);
    void fire(FrameState* f, Iteration& it, int step, std::vector<Ready>& ready);
    void fire_step(FrameState* f, Iteration& it, int step, std::vector<Ready>& ready);
    void release_inputs(Iteration& it, int step);
    void enter(FrameState* f, Iteration& it, int step, const FrameValue& v, std::vector<Ready>& ready);
    void next_iteration(FrameState* f, Iteration& it, int step, const FrameValue& v, std::vector<Ready>& ready);
    Iteration* start_iteration(FrameState* f, int64_t id, int step, std::vector<Ready>& ready);
    FrameState* child_frame(FrameState* f, Iteration& it, int child);
    void finish(FrameState* f, int64_t iter, std::vector<Ready>& ready);
    bool frame_done(FrameState* f, std::vector<Ready>& ready);
    void drain(std::vector<Ready>& ready);
    int parallel_iterations(const FrameState* f) const {
        return parallel_override > 0 ? parallel_override : fg.frames[f->id].parallel_iterations;
    }
};

void FrameExecutor::RunState::deliver(FrameState* f, int64_t iter, int buffer, const FrameValue& v,
                                      std::vector<Ready>& ready) {
    Iteration& it = *f->iterations.at(iter);
    it.values[buffer] = v;
    if (!f->parent && is_output[buffer]) outputs[buffer] = v;
    touched.emplace_back(f, iter);
    for (const auto& [step, slot] : fg.readers[buffer]) {
        (void)slot;
        arrive(f, it, step, v, ready);
    }
}

void FrameExecutor::RunState::arrive(FrameState* f, Iteration& it, int step, const FrameValue& v,
                                     std::vector<Ready>& ready) {
    if (fg.kind[step] == StepKind::kMerge) {  // fires on its first live input, or when all are dead
        if (it.merged[step]) return;
        if (v.dead && ++it.dead_inputs[step] < fg.pending[step]) return;
        it.merged[step] = 1;
        deliver(f, it.id, out_buffer(step, 0), v, ready);
        return;
    }
    if (v.dead) ++it.dead_inputs[step];
    if (--it.pending[step] == 0) fire(f, it, step, ready);
}

void FrameExecutor::RunState::release_inputs(Iteration& it, int step) {
    const StepDesc& sd = exe.steps[step];
    for (int i = 0; i < sd.num_inputs; ++i) {
        const int b = sd.args[i];
        if (fg.producer[b] >= 0 && --it.reads_left[b] == 0) it.values[b].data.reset();
    }
}

void FrameExecutor::RunState::fire(FrameState* f, Iteration& it, int step, std::vector<Ready>& ready) {
    fire_step(f, it, step, ready);
    // The step holds what it still needs (a kernel's Ready, a forwarded value): a value no other
    // step of this iteration reads goes back to the pool now, not when the iteration is done.
    release_inputs(it, step);
}

void FrameExecutor::RunState::fire_step(FrameState* f, Iteration& it, int step, std::vector<Ready>& ready) {
    const bool dead = it.dead_inputs[step] > 0;
    const FrameValue dead_value{nullptr, true};
    switch (fg.kind[step]) {
        case StepKind::kSwitch: {
            FrameValue data = input(it, step, 0), pred = input(it, step, 1);
            const bool taken = !dead && *static_cast<const uint8_t*>(pred.data.get()) != 0;
            deliver(f, it.id, out_buffer(step, 0), dead || taken ? dead_value : data, ready);
            deliver(f, it.id, out_buffer(step, 1), dead || !taken ? dead_value : data, ready);
            return;
        }
        case StepKind::kEnter:
            return enter(f, it, step, dead ? dead_value : input(it, step, 0), ready);
        case StepKind::kExit:
            if (dead) return;  // reported dead to the parent only when the frame is done
            f->exit_live[fg.exit_index[step]] = 1;
            return deliver(f->parent, f->parent_iter, out_buffer(step, 0), input(it, step, 0), ready);
        case StepKind::kNextIteration:
            if (!dead) next_iteration(f, it, step, input(it, step, 0), ready);
            return;  // a dead one ends the loop: no next iteration
        default:
            break;
    }
    const StepDesc& sd = exe.steps[step];
    if (dead) {  // an untaken branch: the kernel does not run
        ++stats.kernels_dead;
        for (size_t k = 0; k + sd.num_inputs < sd.args.size(); ++k)
            deliver(f, it.id, out_buffer(step, static_cast<int>(k)), dead_value, ready);
        return;
    }
    Ready r{f, it.id, step, {}};
    for (int i = 0; i < sd.num_inputs; ++i) r.ins.push_back(input(it, step, i).data);
    ++it.outstanding;
    ++stats.kernels_run;
    ready.push_back(std::move(r));
}

FrameState* FrameExecutor::RunState::child_frame(FrameState* f, Iteration& it, int child) {
    auto& slot = frames[FrameKey{f, child, it.id}];
    if (slot) return slot.get();
    slot = std::make_unique<FrameState>();
    FrameState* c = slot.get();
    c->id = child;
    c->parent = f;
    c->parent_iter = it.id;
    c->pending_enters = fg.frames[child].num_enters;
    c->exit_live.assign(fg.frames[child].exits.size(), 0);
    c->iterations[0] = std::make_unique<Iteration>(0, fg.reads, fg.pending);
    c->outstanding_iterations = 1;
    ++stats.iterations;
    stats.peak_live_iterations = std::max(stats.peak_live_iterations, 1);
    live.insert(c);
    ++it.child_frames;
    return c;
}

void FrameExecutor::RunState::enter(FrameState* f, Iteration& it, int step, const FrameValue& v,
                                    std::vector<Ready>& ready) {
    FrameState* c = child_frame(f, it, fg.child[step]);
    --c->pending_enters;
    const int out = out_buffer(step, 0);
    touched.emplace_back(c, 0);
    if (!fg.constant[step]) return deliver(c, 0, out, v, ready);
    c->invariants.emplace_back(step, v);  // a loop invariant: every iteration, now and later
    std::vector<int64_t> ids;
    for (const auto& [id, iter] : c->iterations) ids.push_back(id);
    for (int64_t id : ids) deliver(c, id, out, v, ready);
}

Iteration* FrameExecutor::RunState::start_iteration(FrameState* f, int64_t id, int step, std::vector<Ready>& ready) {
    const int64_t bound = fg.frames[f->id].max_iterations;
    if (bound > 0 && id >= bound) {
        fail(Status(ErrorKind::kInvalidArgument, "node '" + exe.steps[step].node_name + "': loop frame '" +
                                                     fg.frames[f->id].name + "' exceeded its bound of " +
                                                     std::to_string(bound) + " iterations"));
        return nullptr;
    }
    auto& slot = f->iterations[id];
    slot = std::make_unique<Iteration>(id, fg.reads, fg.pending);
    f->newest = id;
    ++f->outstanding_iterations;
    ++stats.iterations;
    stats.peak_live_iterations = std::max(stats.peak_live_iterations, f->outstanding_iterations);
    touched.emplace_back(f, id);
    for (const auto& [enter_step, v] : f->invariants) deliver(f, id, out_buffer(enter_step, 0), v, ready);
    return slot.get();
}

void FrameExecutor::RunState::next_iteration(FrameState* f, Iteration& it, int step, const FrameValue& v,
                                             std::vector<Ready>& ready) {
    const int merge = fg.merge[step];
    auto next = f->iterations.find(it.id + 1);
    if (next != f->iterations.end()) return arrive(f, *next->second, merge, v, ready);
    if (it.id + 1 <= f->newest) return;  // cannot happen: iterations finish in order
    if (f->outstanding_iterations >= parallel_iterations(f)) {
        f->deferred_next.emplace_back(step, v);  // starts when the oldest iteration is done
        return;
    }
    if (failed.load()) return;
    if (Iteration* n = start_iteration(f, it.id + 1, step, ready)) arrive(f, *n, merge, v, ready);
}

bool FrameExecutor::RunState::frame_done(FrameState* f, std::vector<Ready>& ready) {
    FrameState* parent = f->parent;
    if (!parent) {
        finished = true;
        return false;
    }
    const FrameValue dead_value{nullptr, true};
    const std::vector<int>& exits = fg.frames[f->id].exits;
    for (size_t e = 0; e < exits.size(); ++e)
        if (!f->exit_live[e]) deliver(parent, f->parent_iter, out_buffer(exits[e], 0), dead_value, ready);
    --parent->iterations.at(f->parent_iter)->child_frames;
    touched.emplace_back(parent, f->parent_iter);
    live.erase(f);
    frames.erase(FrameKey{parent, f->id, f->parent_iter});
    return true;
}

void FrameExecutor::RunState::finish(FrameState* f, int64_t iter, std::vector<Ready>& ready) {
    for (;;) {
        auto found = f->iterations.find(iter);
        if (found == f->iterations.end() || found != f->iterations.begin()) return;  // only the oldest finishes
        const Iteration& it = *found->second;
        if (it.outstanding > 0 || it.child_frames > 0 || (iter == 0 && f->pending_enters > 0)) return;
        f->iterations.erase(found);  // releases the iteration's values
        --f->outstanding_iterations;
        if (!f->deferred_next.empty()) {
            std::vector<std::pair<int, FrameValue>> waiting = std::move(f->deferred_next);
            f->deferred_next.clear();
            Iteration* n = failed.load() ? nullptr : start_iteration(f, f->newest + 1, waiting[0].first, ready);
            if (n)
                for (const auto& [step, v] : waiting) arrive(f, *n, fg.merge[step], v, ready);
        }
        if (!f->iterations.empty()) {
            iter = f->iterations.begin()->first;
            continue;
        }
        if (f->pending_enters > 0) return;
        FrameState* parent = f->parent;
        int64_t parent_iter = f->parent_iter;
        if (!frame_done(f, ready)) return;
        f = parent;
        iter = parent_iter;
    }
}

void FrameExecutor::RunState::drain(std::vector<Ready>& ready) {
    while (!touched.empty()) {
        auto [f, iter] = touched.back();
        touched.pop_back();
        if (live.count(f)) finish(f, iter, ready);
    }
}

namespace {

/// Runs a ready kernel step outside the lock; returns its outputs (dead when skipped or failed).
std::vector<FrameValue> execute(FrameExecutor::RunState& st, const Ready& r) {
    const StepDesc& sd = st.exe.steps[r.step];
    const size_t nout = sd.args.size() - static_cast<size_t>(sd.num_inputs);
    std::vector<FrameValue> outs(nout, FrameValue{nullptr, true});
    if (st.terminate && st.terminate->load(std::memory_order_relaxed) && !st.failed.load()) {
        std::lock_guard<std::mutex> lock(st.mu);
        st.fail(cancelled_status(sd.node_name));
    }
    if (st.failed.load()) return outs;
    Status s;
    try {
        std::vector<void*> args;
        for (const auto& p : r.ins) args.push_back(p.get());
        std::shared_ptr<Allocator> alloc = st.alloc;
        for (size_t k = 0; k < nout; ++k) {
            const BufferDesc& b = st.exe.buffers[sd.args[sd.num_inputs + k]];
            size_t bytes = std::max<size_t>(b.nbytes(), 1);
            outs[k].data = std::shared_ptr<void>(alloc->allocate(bytes, b.name),
                                                 [alloc, bytes](void* p) { alloc->deallocate(p, bytes); });
            outs[k].dead = false;
            args.push_back(outs[k].data.get());
        }
        const int now = st.running.fetch_add(1) + 1;
        for (int peak = st.peak_running.load(); now > peak && !st.peak_running.compare_exchange_weak(peak, now);) {
        }
        if (st.fg.kind[r.step] == StepKind::kCopy)
            std::memcpy(args[1], args[0], st.exe.buffers[sd.args[1]].nbytes());
        else if (s = check_step_indices(st.exe, r.step, args.data(), {}); s.ok())
            s = st.exe.run_kernel(sd.kernel, args.data(), st.env);
        st.running.fetch_sub(1);
    } catch (const std::exception& e) {
        s = Status(ErrorKind::kInternal, e.what());
    }
    if (!s.ok()) {
        std::lock_guard<std::mutex> lock(st.mu);
        st.fail(Status(s.kind(), "node '" + sd.node_name + "': " + s.message()));
        for (FrameValue& o : outs) o = FrameValue{nullptr, true};
    }
    return outs;
}

}  // namespace

FrameExecutor::FrameExecutor(std::shared_ptr<Executable> exe, ThreadPool* intra, InterOpThreadPool* inter,
                             std::shared_ptr<Allocator> alloc, FrameOptions opts)
    : exe_(std::move(exe)), intra_(intra), inter_(inter), alloc_(std::move(alloc)), opts_(opts) {
    if (!alloc_) alloc_ = make_session_allocator(0);
    graph_error_ = exe_ ? build_frame_graph(*exe_, fg_) : Status(ErrorKind::kInvalidArgument, "no executable");
}

FrameExecutor::~FrameExecutor() = default;

namespace {

/// Runs `first` and the kernel steps it makes ready: one continues on this thread, the others go
/// to the pool. The thread whose step finishes the root frame sets `done` as its last access.
void process(FrameExecutor::RunState& st, InterOpThreadPool* inter, Ready first) {
    std::vector<Ready> local{std::move(first)};
    while (!local.empty()) {
        Ready r = std::move(local.back());
        local.pop_back();
        std::vector<FrameValue> outs = execute(st, r);
        std::vector<Ready> ready;
        bool finished;
        {
            std::lock_guard<std::mutex> lock(st.mu);
            for (size_t k = 0; k < outs.size(); ++k)
                st.deliver(r.f, r.iter, st.out_buffer(r.step, static_cast<int>(k)), outs[k], ready);
            --r.f->iterations.at(r.iter)->outstanding;
            st.touched.emplace_back(r.f, r.iter);
            st.drain(ready);
            finished = st.finished;
        }
        if (finished) {
            st.done.store(true, std::memory_order_release);
            if (inter) inter->notify();
            return;
        }
        for (size_t i = 0; i < ready.size(); ++i) {
            if (i == 0 || !inter) {
                local.push_back(std::move(ready[i]));
            } else {
                inter->schedule([&st, inter, item = std::move(ready[i])] { process(st, inter, item); });
            }
        }
    }
}

Status check_inputs(const Executable& exe, const std::vector<Tensor>& inputs) {
    if (inputs.size() != exe.inputs.size())
        return Status(ErrorKind::kInvalidArgument, "expected " + std::to_string(exe.inputs.size()) + " inputs, got " +
                                                       std::to_string(inputs.size()));
    for (size_t i = 0; i < inputs.size(); ++i) {
        const BufferDesc& b = exe.buffers[exe.inputs[i]];
        if (inputs[i].dtype() != b.dtype || inputs[i].shape() != b.shape)
            return Status(ErrorKind::kInvalidArgument,
                          "input '" + b.name + "': expected " + dtype_name(b.dtype) + shape_str(b.shape) + ", got " +
                              dtype_name(inputs[i].dtype()) + shape_str(inputs[i].shape()));
    }
    return Status::ok_status();
}

/// The root frame, its first ready steps, and whether it is already done (no kernel at all).
bool start_root(FrameExecutor::RunState& st, std::vector<Ready>& ready) {
    std::lock_guard<std::mutex> lock(st.mu);
    auto& slot = st.frames[FrameKey{nullptr, 0, 0}];
    slot = std::make_unique<FrameState>();
    FrameState* root = slot.get();
    root->iterations[0] = std::make_unique<Iteration>(0, st.fg.reads, st.fg.pending);
    root->outstanding_iterations = 1;
    st.live.insert(root);
    Iteration& it = *root->iterations[0];
    ++it.outstanding;  // held while the roots fire
    for (int s : st.fg.roots) st.fire(root, it, s, ready);
    --it.outstanding;
    st.touched.emplace_back(root, 0);
    st.drain(ready);
    return st.finished;
}

}  // namespace

Status FrameExecutor::run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                          const std::atomic<bool>* terminate, int max_threads,
                          const std::vector<const Tensor*>* into, const OutputReadyFn* on_ready) {
    if (!graph_error_.ok()) return graph_error_;
    if (into) return Status(ErrorKind::kInvalidArgument, "the frame executor does not write outputs into given tensors");
    std::lock_guard<std::mutex> run_lock(run_mu_);
    Status in = check_inputs(*exe_, inputs);
    if (!in.ok()) return in;
    try {
        if (!exe_->loaded()) exe_->load();
    } catch (const Error& e) {
        return Status::from(e);
    }
    RunState st{*exe_, fg_, alloc_};
    st.parallel_override = opts_.parallel_iterations;
    st.terminate = terminate;
    RunControl control(intra_, max_threads);
    st.env = control.env(false);
    const size_t nb = exe_->buffers.size();
    st.fixed.resize(nb);
    st.is_output.assign(nb, 0);
    st.outputs.resize(nb);
    auto borrowed = [](const void* p) { return std::shared_ptr<void>(const_cast<void*>(p), [](void*) {}); };
    for (size_t b = 0; b < nb; ++b)
        if (exe_->buffers[b].role == BufferRole::kConstant) st.fixed[b] = borrowed(exe_->buffers[b].constant.data());
    for (size_t i = 0; i < inputs.size(); ++i) st.fixed[exe_->inputs[i]] = borrowed(inputs[i].data());
    for (int b : exe_->outputs) st.is_output[b] = 1;
    std::vector<Ready> ready;
    if (!start_root(st, ready)) {
        for (size_t i = 1; i < ready.size(); ++i) {
            if (inter_) inter_->schedule([&st, inter = inter_, item = ready[i]] { process(st, inter, item); });
        }
        process(st, inter_, ready.at(0));
        if (!inter_)
            for (size_t i = 1; i < ready.size(); ++i) process(st, nullptr, ready[i]);
        if (inter_) inter_->run_until(st.done);
    }
    stats_ = st.stats;
    stats_.peak_running_kernels = st.peak_running.load();
    if (st.failed.load()) return st.error;
    outputs.clear();
    for (int b : exe_->outputs) {
        const BufferDesc& d = exe_->buffers[b];
        if (!st.outputs[b].data)
            return Status(ErrorKind::kInvalidArgument, "output '" + d.name + "' was not produced (its value is dead)");
        Tensor t(d.dtype, d.shape);
        std::memcpy(t.data(), st.outputs[b].data.get(), d.nbytes());
        outputs.push_back(std::move(t));
    }
    if (on_ready && *on_ready)  // reported at the end: outputs are copied out of the frames here
        for (size_t j = 0; j < outputs.size(); ++j) (*on_ready)(j, outputs[j]);
    return Status::ok_status();
}

}  // namespace kiln::runtime
