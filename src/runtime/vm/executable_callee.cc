// ExecutableCallee (see executable_callee.h).
#include "runtime/vm/executable_callee.h"

#include <cstring>
#include <set>

namespace kiln::runtime::vm {

ExecutableCallee::ExecutableCallee(std::shared_ptr<Executable> exe, std::string name, ThreadPool* pool,
                                   Allocator* alloc)
    : exe_(exe), name_(std::move(name)), table_(std::move(exe), alloc), alloc_(alloc), env_(make_kernel_env(pool)) {}

std::string ExecutableCallee::describe() const {
    return "executable '" + name_ + "' (" + std::to_string(exe_->steps.size()) + " steps, " +
           std::to_string(exe_->inputs.size()) + " in, " + std::to_string(exe_->outputs.size()) + " out)";
}

Status ExecutableCallee::prepare() {
    Status st = table_.prepare();
    if (!st.ok()) return st;
    b_.ptrs = table_.prepared_ptrs();
    for (int id : exe_->inputs) {
        const BufferDesc& d = exe_->buffers[static_cast<size_t>(id)];
        in_slots_.push_back({d.dtype, &d.shape, static_cast<size_t>(id)});
    }
    std::set<int> seen;
    for (int id : exe_->outputs) {
        const bool own = exe_->buffers[static_cast<size_t>(id)].role == BufferRole::kOutput && seen.insert(id).second;
        copy_out_.push_back(own ? 0 : 1);
    }
    prepared_ = true;
    return Status::ok_status();
}

// Output k's register keeps its buffer when reusable with the same dtype and shape; otherwise it
// gets a fresh tensor. A copied output (copy_out_) is bound after the steps.
Status ExecutableCallee::bind_output(size_t k, Tensor& out, bool reusable) {
    const BufferDesc& d = exe_->buffers[static_cast<size_t>(exe_->outputs[k])];
    const bool fits = reusable && out.defined() && out.dtype() == d.dtype && same_shape(out.shape(), d.shape);
    if (!fits) {
        try {
            out = alloc_->allocate_tensor(d.dtype, d.shape, d.name);
        } catch (const Error& e) {
            return Status::from(e);
        }
    }
    if (!copy_out_[k]) b_.ptrs[static_cast<size_t>(exe_->outputs[k])] = out.data();
    return Status::ok_status();
}

Status ExecutableCallee::call(const Tensor* const* ins, size_t num_ins, Tensor* const* outs, const char* reusable,
                              size_t num_outs) {
    if (!prepared_) {
        Status st = prepare();
        if (!st.ok()) return st;
    }
    if (num_ins != exe_->inputs.size() || num_outs != exe_->outputs.size())
        return Status(ErrorKind::kInternal, "bug in Kiln: " + describe() + " called with " + std::to_string(num_ins) +
                                                " inputs and " + std::to_string(num_outs) + " outputs");
    for (size_t i = 0; i < num_ins; ++i) {
        const InputSlot& slot = in_slots_[i];
        const Tensor& t = *ins[i];
        if (t.dtype() != slot.dtype || !same_shape(t.shape(), *slot.shape)) {
            const BufferDesc& d = exe_->buffers[slot.ptr];
            return Status(ErrorKind::kInvalidArgument, name_ + ": input '" + d.name + "': expected " +
                                                           dtype_name(d.dtype) + shape_str(d.shape) + ", got " +
                                                           dtype_name(t.dtype()) + shape_str(t.shape()));
        }
        b_.ptrs[slot.ptr] = const_cast<void*>(t.data());
    }
    for (size_t k = 0; k < num_outs; ++k) {
        Status st = bind_output(k, *outs[k], reusable[k]);
        if (!st.ok()) return st;
    }
    for (size_t s = 0; s < exe_->steps.size(); ++s) {
        Status st = exe_->kernels[static_cast<size_t>(exe_->steps[s].kernel)].is_async ? table_.run_async_step(s, b_)
                                                                                      : table_.run_step(s, b_, env_);
        if (!st.ok()) return st;
    }
    // Outputs that are inputs, constants or repeated buffers: copied out of where they live.
    for (size_t k = 0; k < num_outs; ++k)
        if (copy_out_[k] && outs[k]->nbytes())
            std::memcpy(outs[k]->data(), b_.ptrs[static_cast<size_t>(exe_->outputs[k])], outs[k]->nbytes());
    return Status::ok_status();
}

}  // namespace kiln::runtime::vm
