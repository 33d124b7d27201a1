// Pool computes shared by the NCHW pools (defs/pool.cc) and the blocked NCHW{c} pools
// (defs/blocked_ops.cc). A pooled tensor is [N, C, spatial..., trailing...]: the windows slide
// over the spatial dims; the `trailing` dims after them (the channel block c of a blocked
// tensor: trailing = 1) are indexed like N and C. Semantics (window geometry in window.h):
//  - padding: a copy of X whose extent covers every window (ceil_mode can reach past the end
//    pad), `fill` outside X (MaxPool: the lowest value, the sums: 0);
//  - AveragePool divides by a closed-form count per output element: the number of window
//    positions inside [0, in) (count_include_pad=0) or inside [-pad_begin, in + pad_end)
//    (count_include_pad=1: pad positions count, positions ceil_mode adds beyond them do not).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "op/op_def.h"
#include "op/window.h"

namespace kiln::op {

/// Attributes of the windowed pools: auto_pad, ceil_mode, dilations, kernel_shape (required),
/// pads, strides.
std::vector<AttrSpec> pool_window_attrs();

/// Window geometry of pool node `n` over X of shape `x` (rank >= 3 + trailing, static spatial
/// dims); throws kInvalidModel naming the node for inconsistent attributes.
WindowGeometry pool_geometry(const ir::Node& n, const std::vector<ir::Dim>& x, int trailing = 0);

/// X's shape with the spatial dims replaced by the window counts.
std::vector<ir::Dim> pool_out_shape(const std::vector<ir::Dim>& x, const WindowGeometry& g, int trailing = 0);

/// The padded source (x itself when no window reaches outside it); `fill` outside x.
te::Tensor padded_source(const te::Tensor& x, const WindowGeometry& g, te::Expr fill, const std::string& name,
                         int trailing = 0);

/// The source a MaxPool's windows read: where the windows are undilated and each holds an input
/// position, a padded position reads the input clamped to its edge (one of the window's own
/// positions, so the maximum is the same) and no select guards the reads; otherwise
/// padded_source filled with the lowest value.
te::Tensor max_pool_source(const te::Tensor& x, const WindowGeometry& g, const std::string& name, int trailing = 0);

/// One reduce axis per spatial dim, over the kernel.
std::vector<te::IterVar> window_axes(const WindowGeometry& g);

/// Position in the padded source of window element rk for output index o along dim d.
te::Expr window_pos(const WindowGeometry& g, int d, const te::Var& o, const te::IterVar& rk);

/// The padded-source index output index `i` reads at window offsets `rk`:
/// [i0, i1, i_s * stride + rk_s * dilation ..., trailing indices of i].
std::vector<te::Expr> window_index(const WindowGeometry& g, const std::vector<te::Var>& i,
                                   const std::vector<te::IterVar>& rk);

/// Max over each window of `src` (a padded source), shape `out`.
te::Tensor max_pool_tensor(const te::Tensor& src, const WindowGeometry& g, const Shape& out, DType dtype,
                           const std::string& name);

/// MaxPool of unpadded NC + spatial x as one pass per spatial dim ("maxpool_sep<d>" stages, the
/// last named `name`): each output reads the window's positions clamped into the input, which
/// for dilation 1 repeats a position the window holds anyway, so no padded copy and no select;
/// each position is an explicit term (the clamp folds away where it cannot bind) and the
/// contiguous axis stays unit-stride. nullopt where that does not hold (a dilation, a window
/// wholly in the padding, a window over 16 wide): use max_pool_tensor.
std::optional<te::Tensor> separable_max_pool(const te::Tensor& x, const WindowGeometry& g, DType dtype,
                                             const std::string& name);

/// AveragePool of x: the window sums ("avgpool_sum", compute dtype) divided by the count.
te::Tensor average_pool_tensor(const te::Tensor& x, const WindowGeometry& g, const Shape& out, DType dtype,
                               bool count_include_pad, const std::string& name, int trailing = 0);

/// GlobalAveragePool (the spatial sum "gap_sum" over the element count) or GlobalMaxPool of x;
/// on NC + spatial x (trailing 0) each plane reduces in the flat lane form (flat_reduce.h).
/// Output dims of window pool node `n` (MaxPool, AveragePool) over x's dims when some spatial
/// dim is symbolic (a symbolic compile): dim expressions (op/window.h window_out_dims).
std::vector<ir::Dim> sym_pool_out_shape(const ir::Node& n, const std::vector<ir::Dim>& x, int trailing = 0);

/// A symbolic compile's MaxPool (is_max) or AveragePool of a.node's input over symbolic
/// spatial dims: each output reads its window directly, taps outside the input skipped (the
/// max's lowest value, the average's count: count_include_pad as ONNX).
te::Tensor sym_window_pool(const ComputeArgs& a, bool is_max, int trailing = 0);

/// A symbolic compile's global average pool (docs/dynamic_shapes.md) of node a.node's input:
/// the sum over the symbolic spatial dims in symbolic loops, then / their count (a run-time
/// product of dims); `trailing` dims after the spatial ones as in global_pool_tensor.
te::Tensor sym_global_average_pool(const ComputeArgs& a, int trailing = 0);

te::Tensor global_pool_tensor(const te::Tensor& x, const Shape& out, DType dtype, bool is_max,
                              const std::string& name, int trailing = 0);

}  // namespace kiln::op
