// BufferTable: see buffer_table.h. prepare() validates the executable once (ids in range,
// constant sizes), loads kernels and allocates intermediates; bind() validates inputs per run.
#include "runtime/buffer_table.h"

#include <cstring>

#include "runtime/async_kernel.h"
#include "runtime/index_check.h"
#include "support/huge_pages.h"

namespace kiln::runtime {

BufferTable::BufferTable(std::shared_ptr<Executable> exe, Allocator* alloc) : exe_(std::move(exe)), alloc_(alloc) {}

BufferTable::~BufferTable() { release(); }

void BufferTable::release() {
    if (!exe_) return;
    for (size_t i = 0; i < storage_.size() && i < exe_->buffers.size() && i < owned_.size(); ++i)
        if (storage_[i] && owned_[i]) alloc_->deallocate(storage_[i], exe_->buffers[i].nbytes());
    if (arena_) alloc_->deallocate(arena_, arena_capacity_);
    arena_ = nullptr;
    arena_capacity_ = 0;
    dims_planned_ = false;
    owned_.clear();
    storage_.clear();
}

// Planned intermediates (arena_offset >= 0) are bound inside one arena allocated through the
// allocator under one name; an unplanned one gets an allocation of its own. Throws kiln::Error.
Status BufferTable::allocate_intermediates() {
    const auto& bufs = exe_->buffers;
    owned_.assign(bufs.size(), false);
    if (exe_->is_symbolic()) return Status::ok_status();  // placed per run: place_at_dims
    size_t planned = 0;
    for (const BufferDesc& d : bufs)
        if (d.role == BufferRole::kIntermediate && d.arena_offset >= 0) ++planned;
    if (planned > 0 && exe_->arena_bytes > 0) {
        arena_ = alloc_->allocate(exe_->arena_bytes,
                                  "arena for " + std::to_string(planned) + " model intermediates");
        arena_capacity_ = exe_->arena_bytes;
    }
    for (size_t i = 0; i < bufs.size(); ++i) {
        const BufferDesc& d = bufs[i];
        if (d.role != BufferRole::kIntermediate) continue;
        if (d.arena_offset < 0) {
            storage_[i] = alloc_->allocate(d.nbytes(), d.name);
            owned_[i] = true;
            continue;
        }
        KILN_ICHECK(static_cast<size_t>(d.arena_offset) <= exe_->arena_bytes &&
                    d.nbytes() <= exe_->arena_bytes - static_cast<size_t>(d.arena_offset))
            << "intermediate '" << d.name << "' at offset " << d.arena_offset << " (" << d.nbytes()
            << " bytes) is outside the arena of " << exe_->arena_bytes << " bytes";
        if (d.nbytes() > 0) storage_[i] = static_cast<char*>(arena_) + d.arena_offset;
    }
    return Status::ok_status();
}

Status BufferTable::prepare() {
    if (prepared_) return Status::ok_status();
    if (!exe_) return Status(ErrorKind::kInvalidArgument, "executor has no executable");
    const auto& bufs = exe_->buffers;
    for (const KernelDesc& k : exe_->kernels)
        if (k.is_control())
            return Status(ErrorKind::kInvalidArgument, "the executable has TF1 control-flow steps (" + k.control +
                                                           "): only the frames executor runs it (control_flow=frames)");
    try {
        if (!exe_->loaded()) exe_->load();
        for (size_t s = 0; s < exe_->steps.size(); ++s) {
            const StepDesc& st = exe_->steps[s];
            KILN_ICHECK(st.kernel >= 0 && static_cast<size_t>(st.kernel) < exe_->kernels.size())
                << "step " << s << " (" << st.node_name << ") names kernel " << st.kernel;
            for (int b : st.args)
                KILN_ICHECK(b >= 0 && static_cast<size_t>(b) < bufs.size())
                    << "step " << s << " (" << st.node_name << ") names buffer " << b;
            for (int d : st.dims)
                KILN_ICHECK(d >= 0 && static_cast<size_t>(d) < exe_->dims.size())
                    << "step " << s << " (" << st.node_name << ") names dim " << d;
        }
        for (int b : exe_->inputs) KILN_ICHECK(b >= 0 && static_cast<size_t>(b) < bufs.size()) << "input buffer " << b;
        for (int b : exe_->outputs) KILN_ICHECK(b >= 0 && static_cast<size_t>(b) < bufs.size()) << "output buffer " << b;
        storage_.assign(bufs.size(), nullptr);
        for (size_t i = 0; i < bufs.size(); ++i) {
            const BufferDesc& d = bufs[i];
            if (d.role == BufferRole::kConstant) {
                KILN_ICHECK(d.constant.defined() && d.constant.nbytes() == d.nbytes())
                    << "constant '" << d.name << "' has " << d.constant.nbytes() << " bytes of data, expected "
                    << d.nbytes();
                storage_[i] = const_cast<void*>(d.constant.data());
            }
        }
        Status st = allocate_intermediates();
        if (!st.ok()) {
            release();
            return st;
        }
    } catch (const Error& e) {
        // Give back what was allocated so a later attempt (e.g. with a larger budget) starts clean.
        release();
        return Status::from(e);
    }
    prepared_ = true;
    return Status::ok_status();
}

Status BufferTable::place_at_dims(const std::vector<int64_t>& dims) {
    if (dims_planned_ && dims_plan_.dims == dims) {
        if (!arena_huge_) {  // a second run at these dims: the arena's pages exist now
            advise_huge_pages(arena_, arena_capacity_);
            arena_huge_ = true;
        }
        return Status::ok_status();
    }
    dims_planned_ = false;
    Status st = plan_at_dims(*exe_, dims, dims_plan_);
    if (!st.ok()) return st;
    try {
        if (dims_plan_.arena_bytes > arena_capacity_) {
            if (arena_) alloc_->deallocate(arena_, arena_capacity_);
            arena_ = nullptr;
            arena_capacity_ = 0;
            arena_ = alloc_->allocate(dims_plan_.arena_bytes, "arena for the model intermediates at these dimensions");
            arena_capacity_ = dims_plan_.arena_bytes;
            // A first call at new dims writes it: 4 KB pages, not a synchronous compaction for
            // 2 MB ones (support/huge_pages.h; MiniLM at 8x256: first / warm 1.55 -> 1.16).
            advise_small_pages(arena_, arena_capacity_);
            arena_huge_ = false;
        }
    } catch (const Error& e) {
        return Status::from(e);
    }
    for (size_t i = 0; i < exe_->buffers.size(); ++i)
        if (exe_->buffers[i].role == BufferRole::kIntermediate)
            storage_[i] = dims_plan_.offset[i] >= 0 ? static_cast<char*>(arena_) + dims_plan_.offset[i] : nullptr;
    dims_planned_ = true;
    return Status::ok_status();
}

size_t BufferTable::run_bytes(int id, const RunBindings& b) const {
    const BufferDesc& d = exe_->buffers[static_cast<size_t>(id)];
    if (!d.is_symbolic()) return d.nbytes();
    return static_cast<size_t>(shape_numel(d.shape_at(b.dims))) * dtype_size(d.dtype);
}

Status BufferTable::check_inputs(const std::vector<Tensor>& inputs) const {
    if (!exe_) return Status(ErrorKind::kInvalidArgument, "executor has no executable");
    if (exe_->is_symbolic()) {
        std::vector<int64_t> dims;
        return bind_run_dims(*exe_, inputs, dims);
    }
    const auto& bufs = exe_->buffers;
    if (inputs.size() != exe_->inputs.size()) {
        return Status(ErrorKind::kInvalidArgument, "expected " + std::to_string(exe_->inputs.size()) +
                                                       " inputs, got " + std::to_string(inputs.size()));
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
        int id = exe_->inputs[i];
        if (id < 0 || static_cast<size_t>(id) >= bufs.size())
            return Status(ErrorKind::kInternal, "bug in Kiln: input " + std::to_string(i) + " names buffer " + std::to_string(id));
        const BufferDesc& d = bufs[id];
        const Tensor& t = inputs[i];
        if (t.dtype() != d.dtype || t.shape() != d.shape) {
            return Status(ErrorKind::kInvalidArgument, "input '" + d.name + "': expected " + dtype_name(d.dtype) +
                                                           shape_str(d.shape) + ", got " + dtype_name(t.dtype()) +
                                                           shape_str(t.shape()));
        }
        if (t.data() == nullptr && t.numel() > 0)
            return Status(ErrorKind::kInvalidArgument, "input '" + d.name + "': tensor has no data");
    }
    return Status::ok_status();
}

Status BufferTable::rebind_inputs(const std::vector<Tensor>& inputs, RunBindings& b) const {
    Status st = check_inputs(inputs);
    if (!st.ok()) return st;
    if (b.ptrs.size() != exe_->buffers.size())
        return Status(ErrorKind::kInternal, "bug in Kiln: rebind_inputs before bind");
    if (exe_->is_symbolic()) {
        std::vector<int64_t> dims;
        st = bind_run_dims(*exe_, inputs, dims);
        if (!st.ok()) return st;
        if (dims != b.dims)
            return Status(ErrorKind::kInvalidArgument, "a resumed run must be given inputs of the shapes it started with");
    }
    for (size_t i = 0; i < inputs.size(); ++i) b.ptrs[exe_->inputs[i]] = const_cast<void*>(inputs[i].data());
    return Status::ok_status();
}

std::vector<bool> BufferTable::restartable_steps(const RunBindings& b) const {
    const auto& bufs = exe_->buffers;
    std::vector<bool> out(exe_->steps.size(), false);
    auto overlap = [&](int x, int y) {
        const char* px = static_cast<const char*>(b.ptrs[x]);
        const char* py = static_cast<const char*>(b.ptrs[y]);
        const size_t nx = run_bytes(x, b), ny = run_bytes(y, b);
        return px && py && nx && ny && px < py + ny && py < px + nx;
    };
    for (size_t s = 0; s < exe_->steps.size(); ++s) {
        const StepDesc& st = exe_->steps[s];
        if (st.num_inputs < 0 || static_cast<size_t>(st.num_inputs) > st.args.size()) continue;
        bool ok = true;
        for (size_t o = st.num_inputs; o < st.args.size() && ok; ++o)
            for (int i = 0; i < st.num_inputs && ok; ++i) ok = !overlap(st.args[o], st.args[i]);
        out[s] = ok;
    }
    return out;
}

// The caller's tensors as the output buffers they are bound to (the first output naming a
// buffer gets it; an output that is an input, a constant or a buffer listed earlier is copied
// into its tensor by collect_outputs).
Status BufferTable::bind_outputs_into(const std::vector<const Tensor*>& into, RunBindings& b) const {
    const auto& bufs = exe_->buffers;
    if (into.size() != exe_->outputs.size())
        return Status(ErrorKind::kInternal, "bug in Kiln: " + std::to_string(into.size()) + " bound outputs for " +
                                                std::to_string(exe_->outputs.size()));
    for (size_t j = 0; j < into.size(); ++j) {
        if (!into[j]) continue;
        const BufferDesc& d = bufs[exe_->outputs[j]];
        const Tensor& t = *into[j];
        const Shape want = d.is_symbolic() ? d.shape_at(b.dims) : d.shape;  // b.dims: bound by bind()
        if (t.dtype() != d.dtype || t.shape() != want || (t.data() == nullptr && t.numel() > 0))
            return Status(ErrorKind::kInvalidArgument, "output " + std::to_string(j) + " ('" + d.name +
                                                           "'): bound tensor expected " + dtype_name(d.dtype) +
                                                           shape_str(want) + ", got " + dtype_name(t.dtype()) +
                                                           shape_str(t.shape()));
        const int id = exe_->outputs[j];
        if (d.role != BufferRole::kOutput || b.fresh_outputs.count(id)) continue;
        b.ptrs[id] = const_cast<void*>(t.data());
        b.fresh_outputs.emplace(id, t);  // shares the caller's storage
    }
    b.into = into;
    return Status::ok_status();
}

Status BufferTable::bind(const std::vector<Tensor>& inputs, RunBindings& b, const std::vector<const Tensor*>* into) {
    Status st = check_inputs(inputs);
    if (!st.ok()) return st;
    const auto& bufs = exe_->buffers;
    st = prepare();
    if (!st.ok()) return st;
    b.dims.clear();
    if (exe_->is_symbolic()) {
        st = bind_run_dims(*exe_, inputs, b.dims);
        b.new_dims = !(dims_planned_ && dims_plan_.dims == b.dims);
        if (st.ok()) st = place_at_dims(b.dims);
        if (!st.ok()) return st;
    }

    b.ptrs = storage_;
    b.fresh_outputs.clear();
    b.into.clear();
    for (size_t i = 0; i < inputs.size(); ++i) b.ptrs[exe_->inputs[i]] = const_cast<void*>(inputs[i].data());
    if (into && !into->empty()) {
        st = bind_outputs_into(*into, b);
        if (!st.ok()) return st;
    }
    try {
        for (size_t i = 0; i < bufs.size(); ++i) {
            if (bufs[i].role != BufferRole::kOutput || b.fresh_outputs.count(static_cast<int>(i))) continue;
            // From the allocator (a session's is a caching pool: after the first runs, outputs reuse
            // the blocks of outputs the caller has dropped).
            Tensor t = alloc_->allocate_tensor(bufs[i].dtype, bufs[i].is_symbolic() ? bufs[i].shape_at(b.dims) : bufs[i].shape,
                                               bufs[i].name);
            b.ptrs[i] = t.data();
            b.fresh_outputs.emplace(static_cast<int>(i), std::move(t));
        }
    } catch (const Error& e) {
        return Status::from(e);
    }
    for (size_t i = 0; i < bufs.size(); ++i) {
        const size_t bytes = exe_->is_symbolic() ? dims_plan_.bytes[i] : bufs[i].nbytes();
        if (b.ptrs[i] == nullptr && bytes > 0 && bufs[i].role != BufferRole::kInput)
            return Status(ErrorKind::kInternal, "bug in Kiln: buffer '" + bufs[i].name + "' is not bound");
    }
    return Status::ok_status();
}

Status BufferTable::run_step(size_t s, const RunBindings& b, const kiln_kernel_env& env) const {
    const StepDesc& step = exe_->steps[s];
    void* args[64];
    std::vector<void*> many;
    void** argv = args;
    if (step.args.size() > 64) {
        many.resize(step.args.size());
        argv = many.data();
    }
    for (size_t i = 0; i < step.args.size(); ++i) argv[i] = b.ptrs[step.args[i]];
    if (!exe_->index_checks.empty())
        if (Status st = check_step_indices(*exe_, s, argv, b.dims); !st.ok()) return st;
    if (exe_->kernels[step.kernel].is_async) return run_async_step(s, b);
    Status st;
    if (exe_->kernels[step.kernel].takes_dims) {
        int64_t dims[16];
        if (step.dims.size() > 16) return Status(ErrorKind::kInternal, "bug in Kiln: a kernel with over 16 dims");
        for (size_t d = 0; d < step.dims.size(); ++d) dims[d] = b.dims.at(static_cast<size_t>(step.dims[d]));
        st = exe_->run_kernel(step.kernel, argv, dims, env);
    } else {
        st = exe_->run_kernel(step.kernel, argv, env);
    }
    if (st.ok()) return st;
    const KernelDesc& k = exe_->kernels[step.kernel];
    return Status(st.kind(), "kernel '" + (k.is_extern() ? k.extern_name : k.symbol) + "' for node '" + step.node_name +
                                 "'" + (k.description.empty() ? "" : " (" + k.description + ")") + " failed: " +
                                 st.message());
}

// Async kernels (async_kernel.h) run synchronously here: started, then waited for.
Status BufferTable::run_async_step(size_t s, const RunBindings& b) const {
    const StepDesc& step = exe_->steps[s];
    const KernelDesc& k = exe_->kernels[step.kernel];
    AsyncKernel* ak = find_async_kernel(k.symbol);
    if (!ak)
        return Status(ErrorKind::kInternal, "bug in Kiln: node '" + step.node_name + "' names unknown async kernel '" +
                                                k.symbol + "'");
    std::vector<void*> args;
    std::vector<size_t> bytes;
    for (int id : step.args) {
        args.push_back(b.ptrs[id]);
        bytes.push_back(run_bytes(id, b));
    }
    return run_async_kernel_and_wait(*ak, std::move(args), std::move(bytes));
}

namespace {

// Whether `t` is one of the caller's tensors (RunBindings::into): an unbound output sharing its
// buffer gets a copy, not the caller's memory.
bool given_to(const RunBindings& b, const Tensor& t) {
    for (const Tensor* g : b.into)
        if (g && g->data() == t.data()) return true;
    return false;
}

}  // namespace

void BufferTable::collect_outputs(RunBindings& b, std::vector<Tensor>& outputs) const {
    const auto& bufs = exe_->buffers;
    outputs.clear();
    outputs.reserve(exe_->outputs.size());
    for (size_t j = 0; j < exe_->outputs.size(); ++j) {
        const int id = exe_->outputs[j];
        const Tensor* bound = j < b.into.size() ? b.into[j] : nullptr;
        auto it = b.fresh_outputs.find(id);
        if (bound) {
            // The caller's tensor: written by the kernels, or (an output that is an input, a
            // constant or a buffer bound to another output) copied in.
            Tensor t = *bound;
            if (t.nbytes() && t.data() != b.ptrs[id]) std::memcpy(t.data(), b.ptrs[id], t.nbytes());
            outputs.push_back(std::move(t));
            if (it != b.fresh_outputs.end() && it->second.data() == bound->data()) b.fresh_outputs.erase(it);
        } else if (it != b.fresh_outputs.end() && !given_to(b, it->second)) {
            // Handed out once; the same buffer listed again as an output is copied below (its
            // data stays alive in the first output).
            outputs.push_back(std::move(it->second));
            b.fresh_outputs.erase(it);
        } else {
            // An output that is an input or a constant (an identity model), or a buffer already
            // handed out as an earlier output: copy it out.
            Tensor t(bufs[id].dtype, bufs[id].is_symbolic() ? bufs[id].shape_at(b.dims) : bufs[id].shape);
            if (t.nbytes()) std::memcpy(t.data(), b.ptrs[id], t.nbytes());
            outputs.push_back(std::move(t));
        }
    }
}

kiln_kernel_env make_kernel_env(ThreadPool* pool) {
    if (pool) return pool->kernel_env();
    kiln_kernel_env env{};
    env.pool = nullptr;
    env.parallel_for = [](void*, int64_t n, kiln_task_fn fn, void* ctx) {
        if (n > 0) fn(0, n, ctx);
    };
    return env;
}

}  // namespace kiln::runtime
