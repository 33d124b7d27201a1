// oneDNN convolution backward as an extern kernel (runtime/extern_kernel.h): "dnnl_conv_bwd",
// the data gradient (convolution_backward_data) or the weight gradient
// (convolution_backward_weights) of a float32 convolution with 1 to 3 spatial dims, plain NC...
// buffers (topi/dnnl_conv_backward_match.h writes the parameters).
//
// Parameters: kind = data | weights; src, wei, dst = the forward conv's X [N, C, I...],
// W [M, C/G, K...] and Y [N, M, O...] dims; groups; strides; dilates (oneDNN's: ONNX's - 1);
// pad_l, pad_r (pad_r: what the last window reaches past the input, >= 0); crop: the input's
// spatial extents the windows read (src's, or less where a stride leaves the last rows unread:
// the primitive sees X / dX cropped through strided descriptors, dX's unread rows are zeroed);
// arguments: data: dy_arg,
// w_arg -> out_arg (dX); weights: x_arg, dy_arg -> out_arg (dW).
//
// Like the forward kernels (dnnl_kernels.cc), oneDNN runs single-threaded and the step is
// split by images into one part per intra-op thread, each a primitive of its own run on Kiln's
// pool. A data gradient's parts write disjoint images; a weight gradient's parts each reduce
// their images, part 0 into the output and the others into buffers added to it after (the
// batch is reduced inside the kernel: no [N, ...] partial products). The algorithm (direct or
// Winograd) and the activation layout oneDNN is asked for (its own pick, NHWC or NCHW) are
// chosen per layer (runtime/conv_backward_choice.h; oneDNN's direct kernel on its own layouts
// where it has nothing for that choice). Buffers stay plain; where the primitive's layout
// differs, each part reorders its slices in and its result out per call, except a data
// gradient's W, which every part reads whole: it is reordered once per call, before the parts.
// Small-plane weight gradients of large layers run as one GEMM instead
// (runtime/conv_weight_gemm.h).
#pragma once

#include "runtime/extern_kernel.h"

namespace kiln::runtime {

#if KILN_HAVE_DNNL
std::unique_ptr<ExternKernel> make_dnnl_conv_backward(const ExternParams& params, const std::vector<ExternArg>& args);
/// oneDNN's implementation name for a dnnl_conv_bwd step on one thread, "" when it rejects it.
std::string dnnl_conv_backward_implementation(const ExternParams& params);
#endif

}  // namespace kiln::runtime
