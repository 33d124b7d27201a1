// Helpers shared by the quantization op definitions (quantize.cc: Q/DQ and
// DynamicQuantizeLinear; qlinear.cc: MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv).
#pragma once

#include "ir/graph.h"
#include "op/registry.h"
#include "te/expr.h"

namespace kiln::op {

/// The saturation range of quantized integer dtype t; false if t is not one (i8 u8 i16 u16 i4 u4).
bool quant_range(DType t, double* lo, double* hi);
/// A float type QuantizeLinear / DequantizeLinear quantize to: f8e4m3fn f8e4m3fnuz f8e5m2
/// f8e5m2fnuz f4e2m1.
bool is_quant_float(DType t);
/// Throws kUnsupported naming node, op and dtype unless quant_range(t) holds (or, with
/// allow_float, is_quant_float(t)).
void check_quant_type(const ir::Node& n, const char* what, DType t, bool allow_float = false);

/// cast<compute_dtype(t)>(clamp(rint(v) + zp, lo, hi)) in v's dtype, rint rounding half to even;
/// with zp_first: clamp(rint(v + zp), lo, hi). zp may be null.
te::Expr saturate_round(te::Expr v, te::Expr zp, DType t, bool zp_first = false);

/// A scalar or a 1-D tensor of one element (a per-tensor scale / zero point).
bool is_single_element(const ir::TensorType& t);

/// MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv (qlinear.cc); called by
/// register_quantize_ops.
void register_qlinear_ops(OpRegistry& r);

}  // namespace kiln::op
