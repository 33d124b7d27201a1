// ONNX DynamicQuantizeLinear as a runtime kernel, "kiln_dql": x f32 -> y u8, y_scale, y_zero_point
//   lo = min(0, min x), hi = max(0, max x), scale = (hi - lo) / 255 (1 when hi == lo, as ONNX
//   Runtime), zp = rint(clamp(-lo / scale, 0, 255)), y = clamp(rint(x / scale) + zp, 0, 255)
// in float32 with rint half to even: the formulas of the generated kernel (op/defs/quantize.cc),
// as two vectorized passes over x across the intra-op pool. The generated form reduced and
// quantized in one thread at ~17 M elements/s (25 ms for BERT-base's 128x3072 FFN activation);
// dynamic quantization runs one per quantized MatMul input. Matched by topi/dnnl_int8_match.h
// (match_dynamic_quantize) unless --kernels generated.
//
// Parameters: x, y, ys, yz (argument indices; ys / yz may be absent when nothing reads them).
#pragma once

#include <memory>
#include <vector>

#include "runtime/extern_kernel.h"

namespace kiln::runtime {

std::unique_ptr<ExternKernel> make_dql_kernel(const ExternParams& p, const std::vector<ExternArg>& args);

}  // namespace kiln::runtime
