// Order-dependent ops as runtime kernels: TopK (a partial sort per line), CumSum (a running sum per
// line) and ScatterND (a copy, then the updates in order). Tensor expressions can only say them
// as O(n^2) reductions with selects (op/defs/scan.cc, index_ops.cc): a TopK over 1000 scores took
// 63 ms where ONNX Runtime takes 0.06, a CumSum over 4096 0.9 s. Matched by topi/index_match.cc
// for every kernel source; the generated forms stay the reference of the op tests.
//
// Parameters (ExternParams; shapes and dtypes come from the step's arguments):
//   kiln_topk:      x, values, indices (argument indices), axis, k, largest
//   kiln_cumsum:    x, y, axis, exclusive, reverse
//   kiln_scatternd: data, indices, updates, out, reduction (none | add | mul | max | min)
// An index out of range at run time (ScatterND) fails the step with kInvalidArgument naming it.
#pragma once

#include <memory>
#include <vector>

#include "runtime/extern_kernel.h"

namespace kiln::runtime {

std::unique_ptr<ExternKernel> make_topk_kernel(const ExternParams& p, const std::vector<ExternArg>& args);
std::unique_ptr<ExternKernel> make_cumsum_kernel(const ExternParams& p, const std::vector<ExternArg>& args);
std::unique_ptr<ExternKernel> make_scatternd_kernel(const ExternParams& p, const std::vector<ExternArg>& args);

}  // namespace kiln::runtime
