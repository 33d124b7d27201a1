// Reductions at memory bandwidth: a long contiguous reduction split over vector lanes and
// threads, and a reduction over leading axes vectorized along the kept last axis.
//
// Flat form (the reduced axes are a trailing block of the input, flattened to k in [0, E)):
// TVM's rfactor written in the compute, twice over (lanes and chunks), since TE has no rfactor
// and GCC may not reassociate a float reduction (no -ffast-math):
//   part[rows..., c, l] = reduce over o < per of body(rows, (c*per + o)*L + l)  ("<name>_part")
//   out[o]              = reduce over q < C*L + T of
//                           (q < C*L ? part[rows, q / L, q % L] : body(rows, C*per*L + q - C*L))
// with L lanes (one to four vectors), C chunks and T = E - C*per*L leftover elements. The
// partial stage reads each chunk contiguously, L independent lanes at a time, with no tail
// test (C*per*L <= E), and runs (rows, chunks) in parallel: a reduction to one value over a
// million elements is split into chunks that each thread streams. The final stage is small
// (C*L + T < 2*C*L per row) and adds the leftovers; when a row has at most 64 of them it is a
// balanced tree of binary ops instead of a reduce loop (a loop chains every step on the last,
// which for rows of a few vectors cost more than reading the row). The additions are
// reassociated: a float sum differs from the sequential order by rounding (max/min/integer ops
// are exact).
//
// Column form (the input's last axis is kept, e.g. a reduction over axis 0 of [R, N]):
// schedule_column_reduce tiles the last output axis by up to four vectors, runs (leading axes,
// column tiles) in parallel with the reduce loops inside and the tile accumulated in registers,
// so every reduce step reads one contiguous run of the row (no reassociation).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "support/tensor.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace kiln::op {

/// How a flat reduction of `rows` rows of `extent` elements splits: lanes L, chunks C per row
/// and per lane steps of one chunk. lanes == 0: too short to gain (use a plain reduction).
struct FlatReducePlan {
    int64_t lanes = 0, chunks = 1, per = 0;
};
FlatReducePlan plan_flat_reduce(DType t, int64_t rows, int64_t extent);

/// The element at row index `rows` (the leading dims) and flat position k of the row.
using FlatBody = std::function<te::Expr(const std::vector<te::Expr>& rows, const te::Expr& k)>;
/// Maps an index of the output to its row index (the leading dims).
using RowsOf = std::function<std::vector<te::Expr>(const std::vector<te::Var>& out)>;

/// The flat form above: out (shape out_shape, dtype dt) = reduce with op over each row of body.
/// rows_shape: the leading dims; plan from plan_flat_reduce (lanes > 0).
te::Tensor flat_reduce(const Shape& rows_shape, int64_t extent, const FlatReducePlan& plan, te::ReduceOp op, DType dt,
                       const FlatBody& body, const Shape& out_shape, const RowsOf& rows_of, const std::string& name);

/// The input index of flat position k over the trailing dims `dims` (row-major), prefixed by
/// the row index: written as nested floordiv/floormod that the tir simplifier folds back to k
/// in a row-major flat address.
std::vector<te::Expr> unflatten_index(const std::vector<te::Expr>& rows, const te::Expr& k, const Shape& dims);

/// Combines `v` over `axes` with op.
te::Expr reduce_with(te::ReduceOp op, te::Expr v, const std::vector<te::IterVar>& axes);

/// True when a reduction stage's body reads its inputs with the stage's last data-parallel
/// axis as the innermost index of every read (a reduction over leading axes).
bool reduces_columns(const te::Stage& st);

/// The column schedule (header comment). Knob "colred.nr": the tile's columns in vectors,
/// min(4, the axis's vectors); {1, 2, 3, 4, 8, 16} up to them (declared when the last axis
/// spans more than one vector).
void schedule_column_reduce(te::Stage& st, te::ScheduleConfig& cfg);

/// The Reduce*/ArgMax schedule: "_part" stages as lane partials (row_reduce.h), column
/// reductions by schedule_column_reduce, the rest by default_schedule.
void reduce_schedule(te::Schedule& s, const std::vector<te::Tensor>& outputs);

}  // namespace kiln::op
