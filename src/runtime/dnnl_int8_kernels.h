// oneDNN int8 convolution (ONNX QLinearConv, "dnnl_qconv") and matmul (QLinearMatMul,
// "dnnl_qmatmul") as extern kernels; the compiler writes their parameters (topi/dnnl_int8_match.h documents them). Only with KILN_HAVE_DNNL.
#pragma once

#include "runtime/extern_kernel.h"

namespace kiln::runtime {

#if KILN_HAVE_DNNL
std::unique_ptr<ExternKernel> make_dnnl_qconv(const ExternParams& params, const std::vector<ExternArg>& args);
/// ONNX QLinearMatMul with a constant s8 B [K, N] as oneDNN's int8 matmul, "dnnl_qmatmul".
std::unique_ptr<ExternKernel> make_dnnl_qmatmul(const ExternParams& params, const std::vector<ExternArg>& args);
/// Dynamic quantization's MatMulInteger -> Cast -> Mul(scale) (-> bias, elementwise) with a
/// constant s8 B as one oneDNN int8 matmul writing f32, "dnnl_dqmatmul".
std::unique_ptr<ExternKernel> make_dnnl_dqmatmul(const ExternParams& params, const std::vector<ExternArg>& args);
/// oneDNN's implementation name for a dnnl_qconv step on one thread ("" when oneDNN rejects it).
std::string dnnl_qconv_implementation(const ExternParams& params);
#endif

}  // namespace kiln::runtime
