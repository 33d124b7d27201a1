// ExecutableCallee: a VM call of a compiled Executable (fused kernels, planned memory) that
// binds the caller's registers directly: inputs are read where they are, outputs are written
// into the out registers' buffers when those fit and are free (a loop's carried values and
// scan slices are updated in place), else into fresh tensors from the allocator. Intermediates
// live in the executable's arena, allocated once. No per-call map, no per-call allocation
// once warm.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/buffer_table.h"
#include "runtime/executable.h"
#include "runtime/thread_pool.h"
#include "runtime/vm/program.h"

namespace kiln::runtime::vm {

class ExecutableCallee final : public Callee {
public:
    /// `pool` (may be null: serial) and `alloc` must outlive the callee.
    ExecutableCallee(std::shared_ptr<Executable> exe, std::string name, ThreadPool* pool, Allocator* alloc);

    Status call(const Tensor* const* ins, size_t num_ins, Tensor* const* outs, const char* reusable,
                size_t num_outs) override;
    std::string describe() const override;
    const Executable& executable() const { return *exe_; }
    const std::shared_ptr<Executable>& shared_executable() const { return exe_; }
    const std::string& name() const { return name_; }

private:
    Status prepare();
    Status bind_output(size_t k, Tensor& out, bool reusable);

    std::shared_ptr<Executable> exe_;
    std::string name_;
    BufferTable table_;
    Allocator* alloc_;
    kiln_kernel_env env_{};
    RunBindings b_;
    // Per output: copied after the steps (an input, a constant, or a buffer listed twice).
    std::vector<char> copy_out_;
    // Per input, from prepare(): what it must be and the pointer slot it binds (a call checks
    // each input against these without walking the executable's buffer table).
    struct InputSlot {
        DType dtype;
        const Shape* shape;
        size_t ptr;
    };
    std::vector<InputSlot> in_slots_;
    bool prepared_ = false;
};

}  // namespace kiln::runtime::vm
