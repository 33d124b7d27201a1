// fuse_qdq: rewrites the QDQ sandwich of a quantized model (ONNX Runtime's quantize_static,
// QDQ format) into ONNX's integer op, so the compiler can run it as one int8 kernel
// (topi/dnnl_int8_match.h, runtime/dnnl_int8_kernels.cc):
//
//   QuantizeLinear(Conv(DequantizeLinear(x_q), DequantizeLinear(W_q), B) [-> Relu], y_s, y_zp)
//     -> QLinearConv(x_q, x_s, x_zp, W_q, W_s, W_zp, y_s, y_zp, B_q) [-> Max(., y_zp)]
//
//   QuantizeLinear(MatMul(DequantizeLinear(a_q), DequantizeLinear(W_q)) [-> Relu], y_s, y_zp)
//     -> QLinearMatMul(a_q, a_s, a_zp, W_q, W_s, W_zp, y_s, y_zp) [-> Max(., y_zp)]
//
// with B_q = int32(round(B / (x_s * W_s))): ONNX Runtime's quantizer writes B as
// DequantizeLinear(B_int32, x_s * W_s), which this recovers exactly; a float bias is rounded
// to the accumulator's step (at most half an accumulator step: far below one output step).
// A Relu between Conv and QuantizeLinear is exact as max(q, y_zp) (quantization is monotone);
// with y_zp at the type's minimum (u8 0, s8 -128) saturation already does it and no Max is
// added.
//
// Also QuantizeLinear(op(DequantizeLinear(x_q))) with equal per-tensor parameters -> op(x_q) for
// MaxPool, Reshape, Transpose, Squeeze, Unsqueeze, Flatten (the max commutes with the monotone
// maps, a move with any elementwise map; Q(DQ(v)) = v): exact. ResNet's stem pool and a static
// QDQ transformer's head split / merge (Reshape, Transpose) stay 8-bit.
//
// A float Gemm (alpha = beta = 1, transA = 0) or a MatMul whose result is not quantized next,
// of DequantizeLinear(x_q) by a DequantizeLinear'd constant s8 weight with zero zero points:
//
//   Gemm(DQ(x_q), DQ(W_q), C) -> Add(Mul(Cast<f32>(MatMulInteger(x_q, W_q', x_zp)), x_s * W_s), C)
//
// (W_q' = W_q, or its transpose for transB; W_s per tensor or per output column): the integer
// product with the scale and bias as its float epilogue (dnnl_dqmatmul), the same real number
// as the float Gemm of the dequantized operands up to f32 rounding.
//
// Preconditions, else the nodes are left as they are (the float path stays correct): x_q and
// W_q 8-bit, W_q a constant (a MatMul's 2-D), every scale and zero point a constant, per-tensor
// except W's (per output channel: a Conv's axis 0, a MatMul's axis 1), the bias a constant
// expression, the Conv's (MatMul's) and Relu's results read only by the next node of the
// sandwich, no block quantization. Runs before constant
// folding (which would fold DequantizeLinear(W_q) into float weights).
#pragma once

#include "pass/pass.h"

namespace kiln::pass {

bool fuse_qdq(ir::Graph& g, const PassContext& ctx);

}  // namespace kiln::pass
