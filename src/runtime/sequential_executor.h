// SequentialExecutor: runs an Executable's steps in their static order on the calling thread;
// kernels use the intra-op pool for their parallel loops. Intermediate buffers are allocated
// once (first run) and reused by every later run.
#pragma once

#include <memory>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/buffer_table.h"
#include "runtime/executable.h"
#include "runtime/executor.h"
#include "runtime/thread_pool.h"
#include "support/status.h"

namespace kiln::runtime {

class SequentialExecutor final : public Executor {
public:
    SequentialExecutor(std::shared_ptr<Executable> exe, ThreadPool* pool, Allocator* alloc);
    ~SequentialExecutor() override;
    SequentialExecutor(const SequentialExecutor&) = delete;
    SequentialExecutor& operator=(const SequentialExecutor&) = delete;

    /// inputs match exe->inputs in order (dtype and shape are checked: a mismatch is a
    /// kInvalidArgument Status naming the input, expected vs got). outputs are (re)allocated
    /// by the executor as fresh tensors.
    Status run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
               const std::atomic<bool>* terminate = nullptr) override;
    void set_profiler(Profiler* p) override { profiler_ = p; }
    const char* name() const override { return "sequential"; }

private:
    std::shared_ptr<Executable> exe_;
    BufferTable table_;
    ThreadPool* pool_;
    Profiler* profiler_ = nullptr;
};

}  // namespace kiln::runtime
