// The tir interpreter: the reference semantics of a kernel (STYLE rule 8). Runs a PrimFunc on
// host tensors, ignoring loop kinds (everything serial). Used for constant folding of small
// tensors and as the oracle for generated kernels and schedules.
#pragma once

#include <memory>
#include <vector>

#include "support/tensor.h"
#include "tir/stmt.h"

namespace kiln::tir {

/// `args` match `f.params` in order (dtype and element count are checked); outputs are written
/// in place.
void interpret(const PrimFunc& f, std::vector<Tensor>& args);
/// A kernel with symbolic dims (PrimFunc::dims): `dims` holds their values, in order. Bad dims
/// (count, negative, a buffer too large) and arguments of the wrong size are kInvalidArgument
/// (tir/kernel_dims.h).
void interpret(const PrimFunc& f, std::vector<Tensor>& args, const std::vector<int64_t>& dims);

/// A PrimFunc compiled once into the interpreter's closures, to run many times (the graph
/// interpreter's small nodes run every call; compiling the closures cost as much as running them).
class PreparedFunc {
public:
    PreparedFunc() = default;
    explicit PreparedFunc(const PrimFunc& f);
    bool defined() const { return impl_ != nullptr; }
    /// As interpret(f, args). Runs may not overlap (the closures are shared, the frame is not).
    void run(std::vector<Tensor>& args) const;
    void run(std::vector<Tensor>& args, const std::vector<int64_t>& dims) const;

private:
    struct Impl;
    std::shared_ptr<const Impl> impl_;
};

}  // namespace kiln::tir
