// ConvTranspose with kernel == stride as oneDNN's matmul and a pixel shuffle
// (runtime/dnnl_deconv_shuffle.cc); make_dnnl_conv takes it for such dnnl_conv deconv steps.
#pragma once

#include "runtime/extern_kernel.h"

namespace kiln::runtime {

#if KILN_HAVE_DNNL
/// Whether a dnnl_conv step (topi/dnnl_match.h's parameters) is a 2-D deconv of one group whose
/// kernel equals its stride, without pads, dilation, post-ops or left-out taps, and constant weights.
bool dnnl_deconv_is_shuffle(const ExternParams& params, const std::vector<ExternArg>& args);
std::unique_ptr<ExternKernel> make_dnnl_deconv_shuffle(const ExternParams& params, const std::vector<ExternArg>& args);
#endif

}  // namespace kiln::runtime
