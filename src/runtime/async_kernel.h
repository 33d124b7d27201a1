// Asynchronous kernels: a kernel that starts its work, returns at once, and signals completion
// later through a callback (a host copy on a copy thread now; GPU streams and Send/Recv later).
// The DataflowExecutor keeps running other ready steps meanwhile; the SequentialExecutor (via
// BufferTable::run_step) starts one and waits for it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "support/status.h"

namespace kiln::runtime {

/// Called exactly once when an async kernel is done, on any thread; must not block long.
using AsyncDoneFn = std::function<void(Status)>;

class AsyncKernel {
public:
    virtual ~AsyncKernel() = default;
    /// Starts the kernel on `args` (data pointers, inputs then outputs; `bytes` their sizes) and
    /// returns before it is done; `done` is called once when it is. Never throws.
    virtual void start(std::vector<void*> args, std::vector<size_t> bytes, AsyncDoneFn done) = 0;
};

/// The symbol of the built-in asynchronous host copy (args: src, dst of equal size): the copy
/// runs on a process-wide copy thread, like a copy engine's queue.
inline constexpr const char* kAsyncCopySymbol = "kiln_async_copy";

/// The built-in async kernel named `symbol`, or nullptr.
AsyncKernel* find_async_kernel(const std::string& symbol);

/// Starts `k` and blocks until it is done; returns its Status.
Status run_async_kernel_and_wait(AsyncKernel& k, std::vector<void*> args, std::vector<size_t> bytes);

}  // namespace kiln::runtime
