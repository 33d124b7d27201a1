// Sliding-window geometry shared by Conv and the pools: kernel, strides, dilations, begin/end
// pads and output sizes per spatial dimension, from the ONNX attributes (auto_pad, pads,
// strides, dilations) and ceil_mode.
//
// Output size (ONNX): NOTSET: floor_or_ceil((in + pb + pe - ((k-1)*d + 1)) / s) + 1, where with
// ceil_mode a last window that would start in the end padding (or beyond) is dropped;
// VALID: no pads, floor((in - ((k-1)*d + 1)) / s) + 1; SAME_UPPER / SAME_LOWER: ceil(in / s),
// total pad max(0, (out-1)*s + (k-1)*d + 1 - in) split with the extra on the end / begin.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"
#include "op/op_def.h"

namespace kiln::op {

struct WindowGeometry {
    std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end, out;
    int spatial() const { return static_cast<int>(kernel.size()); }
    /// Extent of a padded input that covers every window (>= in + pb + pe with ceil_mode).
    int64_t padded_extent(int i, int64_t in) const;
    bool any_padding(const std::vector<int64_t>& in) const;
};

/// Reads the window attributes of `n` for the given input spatial sizes and kernel sizes.
/// Throws kInvalidModel naming the node for inconsistent attributes or an empty output.
WindowGeometry window_geometry(const ir::Node& n, const std::vector<int64_t>& in, const std::vector<int64_t>& kernel,
                               bool ceil_mode);

/// The output dims of window node `n` (Conv, a pool) over input spatial dims `in`, some of them
/// symbolic (a symbolic compile: docs/dynamic_shapes.md): a static dim as window_geometry gives
/// it; a symbolic one as a dim expression, floor((in + pads - ext) / s) + 1 (SAME: ceil(in / s));
/// "?" where no expression says it (an unknown input dim; ceil_mode with a stride, whose last
/// window may be dropped).
std::vector<ir::Dim> window_out_dims(const ir::Node& n, const std::vector<ir::Dim>& in,
                                     const std::vector<int64_t>& kernel, bool ceil_mode);

/// The geometry of ConvTranspose node `n` (op/defs/conv_transpose.cc) for input spatial sizes
/// `in` and kernel `kernel`: strides, dilations, begin pads and output sizes as ONNX defines
/// them, and pads_end such that out = s*(in-1) + (k-1)*d + 1 - pb - pe, i.e. ONNX's end pad less
/// output_padding (negative where output_padding exceeds it). Throws kInvalidModel naming the
/// node for inconsistent attributes.
WindowGeometry conv_transpose_geometry(const ir::Node& n, const std::vector<int64_t>& in,
                                       const std::vector<int64_t>& kernel);

/// The attribute specs of a convolution's window (auto_pad, dilations, kernel_shape, pads,
/// strides), and `group` (default 1) when `with_group`: Conv, the quantized convs and the
/// blocked convs share them.
std::vector<AttrSpec> conv_window_attrs(bool with_group);

}  // namespace kiln::op
