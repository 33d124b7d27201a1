// Which oneDNN algorithm and activation layout a convolution's backward primitive
// (dnnl_conv_backward.cc) asks for, by the layer's shape: measured per backward conv of
// ResNet-18 (batch 16, 112x112, oneDNN 2.6 on one thread; docs/kernels.md, "Convolution
// backward"), reorders from and to Kiln's plain NCHW buffers included.
//
// - Winograd (jit_wino_4x3: backward data and weights) for 3x3 stride-1 undilated ungrouped
//   2-D convs of at least 32 input and output channels on output planes of at least 14x14
//   (data gradient) or 7x7 (weight gradient); direct elsewhere (on 7x7 the Winograd data
//   gradient lost 0.8-0.9x, on 4x4 both lost 2-3x).
// - Strided 2-D data gradients on NHWC activations (oneDNN's jit kernel reads them there
//   without the nChw16c kernel's strided gathers), strided 1x1 ones on plain NCHW (oneDNN's
//   gemm-based kernel: with Kiln's cropped input the 1x1 jit kernel does not apply and the
//   generic one ran at a third of the speed); oneDNN's own pick (format any) elsewhere.
//
// KILN_CONV_BWD_ALGO=auto|direct|winograd and KILN_CONV_BWD_LAYOUT=auto|any|nhwc|nchw|nChw16c
// force a choice for A/B measurements (read when a kernel is made; a choice oneDNN rejects falls
// back to direct on format any, so forcing winograd changes only the layers it supports).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::runtime {

enum class ConvBwdLayout { kAny, kNhwc, kNchw, kNChw16c };

struct ConvBwdGeometry {
    bool data = true;                          // data gradient (else weight gradient)
    int64_t in_channels = 0, out_channels = 0;  // C, M of the forward conv
    int64_t groups = 1;
    std::vector<int64_t> kernel, strides, dilates, out_plane;  // per spatial dim; dilates oneDNN's (0 = dense)
};

struct ConvBwdChoice {
    bool winograd = false;
    ConvBwdLayout layout = ConvBwdLayout::kAny;
};

/// The algorithm and layout to ask oneDNN for first (the kernel falls back to direct on format
/// any where oneDNN rejects it); the environment switches above override the measured rule.
ConvBwdChoice choose_conv_backward(const ConvBwdGeometry& g);

/// Throws a kInvalidArgument kiln::Error naming the variable when either switch above holds an
/// unknown value (dnnl_conv_backward_implementation calls it first, so a typo stops the compile
/// instead of reading as "oneDNN rejects the conv").
void check_conv_backward_switches();

/// Whether oneDNN 2.6's Winograd kernel can run the conv at all (3x3, stride 1, no dilation,
/// one group, 2-D).
bool winograd_applies(const ConvBwdGeometry& g);

std::string layout_name(ConvBwdLayout l);

}  // namespace kiln::runtime
