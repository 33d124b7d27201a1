// The quantized residual add of a QDQ model as a runtime kernel, "kiln_qadd":
//   y = saturate(rint(((a - a_zp) * a_s + (b - b_zp) * b_s) / y_s) + y_zp)      (u8 / s8 y)
// and, with out=f32, that y dequantized again ((y - y_zp) * y_s): ONNX's DequantizeLinear x2 ->
// Add -> QuantizeLinear (-> DequantizeLinear) in float32 with its rounding (half to even), as
// the generated kernel computes it, in one vectorizable pass over the bytes. The generated form
// of this unit ran at ~0.2 GFLOP/s (15 ms for ResNet-50's 56x56x256 residual). Matched by
// topi/dnnl_int8_match.h (match_qadd) for every kernel source.
//
// Parameters: a, as, az, b, bs, bz, ys, yz, y (argument indices; scales and zero points are
// one-element constants), out = q8 | f32. a, b and y have one shape (no broadcasting).
#pragma once

#include <memory>
#include <vector>

#include "runtime/extern_kernel.h"

namespace kiln::runtime {

std::unique_ptr<ExternKernel> make_qadd_kernel(const ExternParams& p, const std::vector<ExternArg>& args);

}  // namespace kiln::runtime
