// MaxPool's data gradient as a runtime kernel ("kiln_maxpool_grad", matched for
// KilnMaxPoolGrad by topi/pool_grad_match.cc under every kernel source): dX = 0, then per
// (n, c) plane dX[Indices[o]] += dY[o] over the plane's outputs. The forward's Indices name one
// input per window, so this is one pass over dY and a zeroing pass over dX; planes run in
// parallel (their indices stay inside the plane). The op's TE compute (a gather over the
// windows holding each input, op/defs/pool_grad.cc) is the reference; generated, it ran 155 ms
// on ResNet-18's pool at batch 16 (112x112, 2 threads) where this kernel's work is one dY pass.
//
// Parameters: dy, indices, out (argument indices), planes (N * C), in_plane and out_plane
// (elements of an input / output plane). float32 and float64. An index outside its plane fails
// the step with kInvalidArgument naming it.
#pragma once

#include <memory>
#include <vector>

#include "runtime/extern_kernel.h"

namespace kiln::runtime {

std::unique_ptr<ExternKernel> make_maxpool_grad_kernel(const ExternParams& p, const std::vector<ExternArg>& args);

}  // namespace kiln::runtime
