// Which int8 kernels oneDNN computes: a unit of one QLinearConv (what pass/fuse_qdq.h makes of
// a QDQ Conv) on 2-D NCHW u8/s8 activations, constant s8 weights with zero zero points (per
// tensor or per output channel), constant scales and zero points and an optional constant int32
// bias -> runtime extern kernel "dnnl_qconv" (runtime/dnnl_int8_kernels.h lists the
// parameters); a QLinearMatMul of A [..., M, K] by a constant s8 B [K, N] (zero zero points,
// per-tensor or per-column scales) -> "dnnl_qmatmul"; dynamic quantization's MatMulInteger (u8/s8
// A, constant s8 B, zero B zero point) -> Cast -> Mul(a_s * B_s) with its float epilogue (bias,
// activations, a residual add) -> "dnnl_dqmatmul". Anything else (u8 weights, non-zero
// weight zero points, 1-D / 3-D, dynamic shapes) stays with the generated integer kernel.
#pragma once

#include <optional>

#include "topi/dnnl_match.h"

namespace kiln::topi {

/// A quantized residual add, DequantizeLinear x2 -> Add -> QuantizeLinear (-> DequantizeLinear),
/// on 8-bit tensors of one shape with one-element constant scales and zero points -> runtime
/// kernel "kiln_qadd" (runtime/qadd_kernel.h). Not oneDNN: matched for every kernel source.
std::optional<ExternChoice> match_qadd(const std::vector<ir::Node*>& nodes, const std::vector<ir::Value*>& inputs,
                                       const std::vector<ir::Value*>& outputs);

/// A 2-D MaxPool of a static 8-bit x (its Indices unread) -> runtime kernel "kiln_qmaxpool"
/// (runtime/qmaxpool_kernel.h), which compiler/int8_layout.h may give NHWC operands. Not oneDNN:
/// matched for every kernel source but generated.
std::optional<ExternChoice> match_qmaxpool(const std::vector<ir::Node*>& nodes, const std::vector<ir::Value*>& inputs,
                                           const std::vector<ir::Value*>& outputs);

/// DynamicQuantizeLinear of a static float32 x -> runtime kernel "kiln_dql" (runtime/dql_kernel.h).
/// Not oneDNN: matched for every kernel source but generated.
std::optional<ExternChoice> match_dynamic_quantize(const std::vector<ir::Node*>& nodes,
                                                   const std::vector<ir::Value*>& inputs,
                                                   const std::vector<ir::Value*>& outputs);

/// A QLinearConv whose output only a quantized residual add reads (QLinearConv -> DequantizeLinear,
/// with the conv's own scale and zero point, + DequantizeLinear(r) -> Add -> QuantizeLinear, one
/// unit: compiler/qconv_add_fusion.h) -> "dnnl_qconv" with the add fused as post-ops: the conv's
/// rounding and saturation to its own 8-bit type exactly (round, clip), then
/// y = saturate(rint(c * (s_c / s_y) + (r - r_zp) * (s_r / s_y)) + y_zp), ONNX Runtime's
/// QLinearAdd formula (the file's ((c * s_c + (r - r_zp) * s_r) / s_y) up to the last bit of
/// the quotient). Parameters beyond dnnl_qconv's: c_zp, c_type (the conv's own output), sum,
/// sum_s (argument indices of r and its scale), sum_zp, sum_type, qs (the sum's scale).
std::optional<ExternChoice> match_qconv_add(const std::vector<ir::Node*>& nodes, const std::vector<ir::Value*>& inputs,
                                            const std::vector<ir::Value*>& outputs);

std::optional<ExternChoice> match_dnnl_int8(const std::vector<ir::Node*>& nodes, const std::vector<ir::Value*>& inputs,
                                            const std::vector<ir::Value*>& outputs);

}  // namespace kiln::topi
