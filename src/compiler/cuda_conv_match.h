// cuDNN for convolutions (the vendor candidate on the GPU, as oneDNN's convolution is on the
// CPU): which Conv nodes cuDNN takes, and taking them out of their fusion groups so that the
// convolution runs on cuDNN while its bias and what follows it (ReLU, a residual Add) stay one
// generated epilogue kernel.
//
// Taken: FP32 or FP16 Conv with static shapes, 1-D or 2-D, any strides, dilations and groups, with
// symmetric pads (cuDNN's 2-D descriptor has one pad per axis; auto_pad resolved first).
#pragma once

#include <optional>

#include "ir/graph.h"
#include "runtime/cuda/cuda_program.h"

namespace kiln::compiler {

/// The cuDNN form of Conv node `n` without its bias, or nullopt when cuDNN does not take it.
std::optional<runtime::cuda::CudaConvDesc> cudnn_conv_geometry(const ir::Node& n);

/// The cuDNN step for `n`: a Conv that cuDNN takes and that has no bias (split_cudnn_convs
/// moved it out), else nullopt.
std::optional<runtime::cuda::CudaConvDesc> cudnn_conv_choice(const ir::Node& n);

/// For every Conv that cuDNN takes and that no member of its group feeds: the Conv leaves its
/// group (group -1) without its bias, and an Add of the bias (a constant reshaped to [C, 1, 1])
/// takes its place in the group, so the epilogue kernel adds it. Returns how many were split.
int split_cudnn_convs(ir::Graph& g);

}  // namespace kiln::compiler
