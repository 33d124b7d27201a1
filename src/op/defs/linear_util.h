// The accumulation cores of Conv and MatMul, shared with the integer and quantized variants
// (ConvInteger, QLinearConv, MatMulInteger, QLinearMatMul in quantize.cc). Each core takes an
// optional element reader per operand so a caller can fold a transform into the read (e.g.
// int32(x) - x_zero_point) without materializing a shifted copy; the accumulation runs in the
// dtype the caller names. Defined in conv.cc and matmul.cc next to the float ops.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace kiln::op {

/// Reads one element of an operand at the given indices (default: te::read of the tensor).
using ElemReader = std::function<te::Expr(const std::vector<te::Expr>& idx)>;

/// Conv's output dims [N, M, O...] for X and W (validates ranks, channels, group, kernel_shape
/// and the window attributes auto_pad/pads/strides/dilations of node n).
std::vector<ir::Dim> conv_output_dims(const ir::Node& n, const ir::TensorType& x,
                                      const ir::TensorType& w);

/// The Conv accumulation of node n's attributes over x and w: an optional zero-padding stage
/// ("conv_pad", holding read_x values; padding contributes 0) and the sum stage `name` of
/// shape `out` in dtype acc_dtype.
te::Tensor conv_accumulate(const ir::Node& n, const te::Tensor& x, const te::Tensor& w,
                           const Shape& out, DType acc_dtype, const std::string& name,
                           const ElemReader& read_x = {}, const ElemReader& read_w = {});

/// Conv's schedule (pad stage row-wise, accumulation n*m parallel / last axis vectorized, the
/// rest by default_schedule).
void schedule_conv_stages(te::Schedule& s, const std::vector<te::Tensor>& outputs);

/// MatMul's output dims (numpy matmul: 1-D promotion, broadcast batch dims).
std::vector<ir::Dim> matmul_output_dims(const ir::Node& n, const ir::TensorType& a,
                                        const ir::TensorType& b);

/// The MatMul sum stage `name` of shape `out` (from matmul_output_dims) in dtype acc_dtype.
te::Tensor matmul_accumulate(const te::Tensor& a, const te::Tensor& b, const Shape& out,
                             DType acc_dtype, const std::string& name,
                             const ElemReader& read_a = {}, const ElemReader& read_b = {});
/// As above over dims given as expressions (symbolic compiles; constants give the static stage).
te::Tensor matmul_accumulate(const te::Tensor& a, const te::Tensor& b, const std::vector<te::Expr>& out,
                             DType acc_dtype, const std::string& name,
                             const ElemReader& read_a = {}, const ElemReader& read_b = {});

/// MatMul's schedule (a register-tiled micro-kernel per sum stage; the rest default).
void schedule_matmul_stages(te::Schedule& s, const std::vector<te::Tensor>& outputs);

/// The column block nb of a constant B packed as Bp[ceil(N/nb), K, nb] for KilnMatMulPackedB
/// with M output rows and N columns: the micro-kernel's tile width (the last block padded with
/// zero columns when nb does not divide N), or N when one tile covers it (a single block: B'
/// transposed to [1, K, N]). sym_m: M is a symbolic dim (m its assumed size).
int64_t matmul_packed_block(int64_t m, int64_t n, bool sym_m = false);

/// The column block of a packed B in a kernel compiled for preemption (SessionOptions::
/// preemptible): `nb` (matmul_packed_block's), narrowed to whole vectors while a K x nb panel
/// exceeds 384 KB. A parallel iteration that starts a column tile reads its whole panel from
/// memory before a stop can take it: BERT-base's 3072-deep FFN output projection with 64-wide
/// panels (768 KB) held stops 70-170 us, its 768-deep ones (192 KB) under 40.
int64_t preemptible_packed_block(int64_t nb, int64_t k);

}  // namespace kiln::op
