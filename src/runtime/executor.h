// Executor: what every executor of an Executable offers (sequential, dataflow, later the VM).
#pragma once

#include <atomic>
#include <vector>

#include "runtime/output_ready.h"
#include "runtime/profiler.h"
#include "support/status.h"
#include "support/tensor.h"

namespace kiln::runtime {

class Executor {
public:
    virtual ~Executor() = default;
    /// inputs match the executable's inputs in order (dtype and shape are checked: a mismatch is
    /// a kInvalidArgument Status naming the input, expected vs got); outputs are fresh tensors.
    /// When `terminate` is set (from any thread), the run stops before its next step with a
    /// kCancelled Status. Kernels use at most `max_threads` of the intra-op pool's threads
    /// (0 = all; extern kernels plan their parts for that many). `into`, when set, holds per
    /// output a tensor of its dtype and shape to write it into (null: fresh), returned for it.
    /// `ready`, when set, is told each output as soon as it is final (runtime/output_ready.h).
    virtual Status run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                       const std::atomic<bool>* terminate = nullptr, int max_threads = 0,
                       const std::vector<const Tensor*>* into = nullptr, const OutputReadyFn* ready = nullptr) = 0;
    /// Records per-step timings of every later run into `p` (nullptr: off).
    virtual void set_profiler(Profiler* p) = 0;
    /// "sequential" or "dataflow".
    virtual const char* name() const = 0;
};

/// The Status of a run stopped by its terminate flag before `node_name`'s step.
Status cancelled_status(const std::string& node_name);

}  // namespace kiln::runtime
