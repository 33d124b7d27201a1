// MaxPool with its Indices output as a runtime kernel ("kiln_maxpool", matched for a MaxPool
// node with both outputs, row-major indices, static shapes and float32 / float64 X by
// topi/pool_grad_match.cc under every kernel source). A training step needs the Indices: the
// gradient (runtime/maxpool_grad_kernel.h) routes dY back through them. The op's TE compute
// (op/defs/pool.cc: a padded copy, a max pass, then an index pass comparing each window with its
// max) is the reference; on ResNet-18's stem pool at batch 16 (112x112, 2 threads) it took
// 15 ms beside the separable values-only pool's 6 ms, where this kernel is one pass over X.
//
// Per output: the window clipped to X (no padded copy: per output position the in-bounds
// window range is precomputed per axis), scanned in row-major order keeping the first strict
// maximum (float32 windows inside X along W: 8 or 16 neighbouring outputs at once in SSE2 or
// AVX2 vectors, chosen at run time), so Indices is the smallest flat index among the window's
// maxima, as ONNX's reference and PyTorch pick on ties. NaN propagates (Kiln's max elsewhere does): the first NaN of a
// window is its value and index. A window with no element inside X (not made by ONNX's
// geometry) gives the lowest value and index numel(X), as the reference does.
//
// Parameters: x, y (-1: the values are not written, only Indices), indices (argument indices),
// planes (N * C), and per spatial axis (1 to 3, comma-separated) in, out, kernel, strides,
// dilations, pads (begin); optional step (tests): float32 outputs per vector scan, 8 (SSE2) or
// 16 (AVX2, the default where the CPU has it). The indices are flat over all of X
// ((n * C + c) * plane + spatial offset), as ONNX defines them.
#pragma once

#include <memory>
#include <vector>

#include "runtime/extern_kernel.h"

namespace kiln::runtime {

std::unique_ptr<ExternKernel> make_maxpool_kernel(const ExternParams& p, const std::vector<ExternArg>& args);

}  // namespace kiln::runtime
