// BufferTable: the memory an executor binds for one Executable, shared by every executor.
// Intermediates are allocated once (prepare), constants are bound to their data, inputs and
// fresh output tensors are bound per run (bind). Nothing here throws: errors are Status.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/dims_plan.h"
#include "runtime/executable.h"
#include "runtime/thread_pool.h"
#include "support/status.h"

namespace kiln::runtime {

/// Per-run bindings: one data pointer per buffer, the output tensors made (or given) for this
/// run, and per model output the caller's tensor to write it into (null: fresh; empty: none).
struct RunBindings {
    std::vector<void*> ptrs;
    /// The values of Executable::dims for this run (empty for a static executable).
    std::vector<int64_t> dims;
    /// The dims differ from the previous run's of this table (their memory was planned anew).
    bool new_dims = false;
    std::map<int, Tensor> fresh_outputs;
    std::vector<const Tensor*> into;
};

class BufferTable {
public:
    BufferTable(std::shared_ptr<Executable> exe, Allocator* alloc);
    ~BufferTable();
    BufferTable(const BufferTable&) = delete;
    BufferTable& operator=(const BufferTable&) = delete;

    const Executable& executable() const { return *exe_; }

    /// First call: loads the kernels, validates step and buffer ids, allocates intermediates
    /// through the allocator (a failure gives everything back and can be retried). Idempotent.
    Status prepare();
    /// After prepare(): per buffer, the bound memory of constants and intermediates (null for
    /// inputs and outputs), for a caller that binds its own inputs and outputs (runtime/vm).
    const std::vector<void*>& prepared_ptrs() const { return storage_; }
    /// Checks inputs against the executable (count, dtype, shape: "input 'x': expected f32[1,3],
    /// got f32[1,4]"), allocates fresh outputs and fills `b`. Calls prepare() if needed. `into`,
    /// when set, gives per model output a tensor (of the output's dtype and shape, else a
    /// kInvalidArgument Status) that the kernels write the output into instead (null: fresh).
    Status bind(const std::vector<Tensor>& inputs, RunBindings& b, const std::vector<const Tensor*>* into = nullptr);
    /// Checks inputs as bind() does and points `b` (bound earlier, by bind) at them, keeping its
    /// outputs: a resumed run (preemption) reads the caller's inputs anew.
    Status rebind_inputs(const std::vector<Tensor>& inputs, RunBindings& b) const;
    /// Per step: whether it may be stopped inside its kernel and run again from its start, i.e.
    /// none of its outputs overlaps memory it reads (not computed in place); with unknown
    /// StepDesc::num_inputs, false.
    std::vector<bool> restartable_steps(const RunBindings& b) const;
    /// Calls step s's kernel on the bound pointers; a non-zero return names the node.
    Status run_step(size_t s, const RunBindings& b, const kiln_kernel_env& env) const;
    /// Runs step s's asynchronous kernel (KernelDesc::is_async) and waits for it.
    Status run_async_step(size_t s, const RunBindings& b) const;
    /// The model outputs in order (an output that is an input or constant is copied, into the
    /// caller's tensor when one is bound).
    void collect_outputs(RunBindings& b, std::vector<Tensor>& outputs) const;

    /// Bytes of buffer `id` in this run (its static size, or at the run's dims).
    size_t run_bytes(int id, const RunBindings& b) const;

private:
    Status check_inputs(const std::vector<Tensor>& inputs) const;
    Status bind_outputs_into(const std::vector<const Tensor*>& into, RunBindings& b) const;
    /// Symbolic executables: places the intermediates for `dims` (kept until the dims change),
    /// growing the arena when the plan needs more.
    Status place_at_dims(const std::vector<int64_t>& dims);
    DimsPlan dims_plan_;
    bool dims_planned_ = false;
    size_t arena_capacity_ = 0;  // bytes of arena_ (a symbolic executable's grows)
    /// A symbolic executable's arena starts in 4 KB pages (its first touch is on a run's path)
    /// and is advised for huge pages at its second run (khugepaged collapses it in the background).
    bool arena_huge_ = true;
    void release();
    std::shared_ptr<Executable> exe_;
    Allocator* alloc_;
    std::vector<void*> storage_;  // per buffer: intermediates and constants
    /// Memory planning (issue 5): the one arena of planned intermediates, and whether each
    /// buffer's storage_ entry is an allocation of its own (given back in release()).
    Status allocate_intermediates();
    void* arena_ = nullptr;
    std::vector<bool> owned_;
    bool prepared_ = false;
};

/// The env generated kernels get: the pool's parallel_for, or a serial one when pool is null.
kiln_kernel_env make_kernel_env(ThreadPool* pool);

}  // namespace kiln::runtime
