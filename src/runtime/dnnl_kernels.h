// oneDNN extern kernels (runtime/extern_kernel.h): convolution and matmul primitives with fused
// post-ops, built from the parameters the compiler wrote (topi/dnnl_match.h documents them).
// Compiled only when Kiln is built with oneDNN (KILN_HAVE_DNNL).
#pragma once

#include "runtime/extern_kernel.h"

namespace kiln::runtime {

#if KILN_HAVE_DNNL
std::unique_ptr<ExternKernel> make_dnnl_conv(const ExternParams& params, const std::vector<ExternArg>& args);
/// oneDNN's implementation name (impl_info_str) for a dnnl_conv step run on one thread, "" when
/// oneDNN rejects the parameters; the compiler's rule reads it (a "ref:" kernel is a cliff).
std::string dnnl_conv_implementation(const ExternParams& params);
std::unique_ptr<ExternKernel> make_dnnl_matmul(const ExternParams& params, const std::vector<ExternArg>& args);
/// Bytes of the constant weights oneDNN kernels of this process hold in oneDNN's layouts, each
/// copy counted once however many kernels share it (kernels reordering the same slice of the
/// same constant into the same layout share one copy).
size_t dnnl_weight_copy_bytes();
#endif

}  // namespace kiln::runtime
