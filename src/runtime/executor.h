// Executor: what every executor of an Executable offers (sequential, dataflow, later the VM).
#pragma once

#include <vector>

#include "runtime/profiler.h"
#include "support/status.h"
#include "support/tensor.h"

namespace kiln::runtime {

class Executor {
public:
    virtual ~Executor() = default;
    /// inputs match the executable's inputs in order (dtype and shape are checked: a mismatch is
    /// a kInvalidArgument Status naming the input, expected vs got); outputs are fresh tensors.
    virtual Status run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) = 0;
    /// Records per-step timings of every later run into `p` (nullptr: off).
    virtual void set_profiler(Profiler* p) = 0;
    /// "sequential" or "dataflow".
    virtual const char* name() const = 0;
};

}  // namespace kiln::runtime
