// Scale and zero point choice, and weight / bias quantization, with ONNX Runtime's rules
// (onnxruntime/python/tools/quantization/quant_utils.py: compute_scale_zp, quantize_nparray),
// so a model quantized by Kiln and one quantized by ORT from the same ranges agree.
#pragma once

#include <cstdint>

#include "support/tensor.h"

namespace kiln::compiler {

/// The integer range of a quantized type: u8 [0, 255], s8 [-128, 127], symmetric s8 [-127, 127].
struct QRange {
    int32_t qmin, qmax;
};
QRange quant_range(DType t, bool symmetric);

struct ScaleZero {
    float scale = 1;
    int32_t zero_point = 0;
};

/// ORT's compute_scale_zp, in float32 as ORT computes it: the range is widened to include 0
/// (symmetric: to [-m, m], m = max |r|); scale = (rmax - rmin) / (qmax - qmin) (1 when the
/// range is empty); zero_point = round_half_even(qmin - rmin / scale) (0 when symmetric).
ScaleZero scale_zero_point(float rmin, float rmax, QRange q, bool symmetric);

/// A float weight quantized symmetric int8: per channel along `axis`, or per tensor (axis -1).
struct QuantizedWeight {
    Tensor values;  // int8, the weight's shape
    Tensor scale;   // f32 [C] per channel, [] per tensor
};
QuantizedWeight quantize_weight(const Tensor& w, int axis, QRange q);

/// A float bias [C] (or scalar) quantized to int32 with scale x_scale * w_scale (per channel when
/// w_scale has C entries): round_half_even(b / scale). Also returns that scale.
QuantizedWeight quantize_bias(const Tensor& b, float x_scale, const Tensor& w_scale);

}  // namespace kiln::compiler
