// Row reductions along the last axis in a form the C emitter vectorizes (Softmax, LayerNorm).
//
// A float sum along a row cannot be vectorized by GCC without reassociation (no -ffast-math), so
// the compute reassociates explicitly (TVM's rfactor, written in the compute): with W lanes,
//   part[rows..., l] = reduce over o of body(rows, o * W + l)     (stage "<name>_part")
//   out[rows..., 0]  = combine over l of part[rows..., l]         (stage "<name>", a tree)
// schedule_lane_partial orders the partial stage (rows, o, l) with l vectorized and accumulated
// in a local register tile, so the hot loop is W independent lanes with unit-stride reads. A
// row whose extent is not a multiple of W clamps the index and adds the identity for the tail.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "op/defs/flat_reduce.h"
#include "op/op_def.h"
#include "op/schedule_util.h"
#include "support/error.h"
#include "support/tensor.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace kiln::op {

/// Lanes of a row reduction over `extent` elements in dtype t, or 0 when the plain reduction
/// is as good (rows shorter than two vectors).
inline int64_t row_lanes(DType t, int64_t extent) {
    const int64_t w = vector_width(t);
    return extent >= 2 * w ? w : 0;
}

/// out = reduce over the last axis of x-shaped rows: body(i, k) is the element at row index i
/// (the leading axes of `shape`, its last axis ignored) and position k of the row. Returns
/// out with shape[-1] = 1. `lanes` from row_lanes (> 0).
/// `shape` as expressions (te::TensorNode::shape_exprs): any dim may be symbolic. A symbolic
/// row (the attention's [b, h, s, s] scores) reduces its floordiv(s, lanes) full steps with no
/// guard (unit-stride vector reads, as the static kernel's), and a "<name>_tail" stage reduces
/// the at most lanes - 1 elements left, which the combine adds: a guard in the hot loop clamped
/// every index, which turned its reads into gathers (Softmax at seq 128 ran 10x the static one).
inline te::Tensor lane_reduce(const std::vector<te::Expr>& shape, int64_t lanes, te::ReduceOp op, DType dt,
                              const std::function<te::Expr(const std::vector<te::Var>&, te::Expr)>& body,
                              const std::string& name) {
    const int nd = static_cast<int>(shape.size());
    const te::Expr row = shape[nd - 1];
    int64_t extent = 0;
    const bool sym_row = !te::const_int(row, &extent);
    // A row that is no multiple of the lanes reduces its whole steps unguarded and its last
    // extent % lanes elements in a tail stage, as a symbolic row does: a clamped index in the hot
    // loop kept the C emitter from keeping it one vector loop (one_vector_loop.h), and GCC
    // unrolled it into scalar code (ViT's [12, 197, 197] softmax max: 1.2 ms -> 37 us alone).
    const bool peel = sym_row || extent % lanes != 0;
    auto combine = [&](te::Expr v, const te::IterVar& r) {
        return op == te::ReduceOp::kSum ? te::sum(std::move(v), {r}) : te::max_reduce(std::move(v), {r});
    };
    std::vector<te::Expr> part_shape = shape;
    part_shape[nd - 1] = te::int_imm(lanes);
    // The whole steps (a symbolic row's as an expression).
    const te::Expr full = sym_row ? te::floordiv(row, te::int_imm(lanes)) : te::int_imm(extent / lanes);
    te::IterVar ro = sym_row ? te::reduce_axis(full, "ro") : te::reduce_axis(extent / lanes, "ro");
    te::Tensor part = te::sym_compute(
        part_shape,
        [&](const std::vector<te::Var>& i) {
            return combine(body(i, te::Expr(ro->var) * te::int_imm(lanes) + te::Expr(i[nd - 1])), ro);
        },
        name + "_part", dt);
    std::vector<te::Expr> out_shape = shape;
    out_shape[nd - 1] = te::int_imm(1);
    // A symbolic row's tail, its last floormod(row, lanes) elements, as a short reduce loop of its
    // own (stage "<name>_tail"): written into the combine as one guarded term per lane, it
    // repeated the body `lanes` times (Softmax's exp 16 times: a kernel that took 1.2 s to compile).
    te::Tensor tail;
    if (peel) {
        te::IterVar rt = sym_row ? te::reduce_axis(row - full * te::int_imm(lanes), "rt")
                                 : te::reduce_axis(extent % lanes, "rt");
        tail = te::sym_compute(
            out_shape,
            [&](const std::vector<te::Var>& i) { return combine(body(i, full * te::int_imm(lanes) + te::Expr(rt->var)), rt); },
            name + "_tail", dt);
    }
    // The lanes combine as a balanced tree: a reduce loop would chain its `lanes` steps.
    return te::sym_compute(
        out_shape,
        [&](const std::vector<te::Var>& i) {
            std::vector<te::Expr> level;
            for (int64_t l = 0; l < lanes; ++l) {
                std::vector<te::Expr> idx(i.begin(), i.end());
                idx[nd - 1] = te::int_imm(l);
                level.push_back(te::read(part, idx));
            }
            if (peel) {
                std::vector<te::Expr> idx(i.begin(), i.end());
                idx[nd - 1] = te::int_imm(0);
                level.push_back(te::read(tail, idx));
            }
            while (level.size() > 1) {
                std::vector<te::Expr> next;
                for (size_t k = 0; k + 1 < level.size(); k += 2)
                    next.push_back(op == te::ReduceOp::kSum ? level[k] + level[k + 1] : te::max(level[k], level[k + 1]));
                if (level.size() % 2) next.push_back(level.back());
                level = std::move(next);
            }
            return level[0];
        },
        name, dt);
}

/// Schedules a lane_reduce partial stage: rows fused (parallel when large), then the reduce
/// loop, then the lanes vectorized into a local accumulator tile.
/// Knobs: "row.unroll" the reduce loop split by u with the inner part unrolled (u lane vectors
/// per step), u in {1, 2, 4} dividing the loop (declared when it runs an even number >= 4 of
/// steps);
/// "row.par" 1 = the rows in parallel (default), 0 = serially (declared when they would run in
/// parallel).
inline void schedule_lane_partial(te::Stage& st, te::ScheduleConfig& cfg) {
    const te::Tensor& t = st.tensor();
    const int nd = t->ndim();
    te::IterVar lane = st.axis(nd - 1);
    te::IterVar ro = st.reduce_axis(0);
    std::vector<te::IterVar> reduce = {ro};
    te::IterVar unrolled;
    if (ro->extent >= 4) {
        std::vector<int64_t> us;
        for (int64_t u : {1, 2, 4})
            if (ro->extent % u == 0) us.push_back(u);
        const int64_t u = us.size() > 1 ? cfg.knob("row.unroll", us, 1) : 1;
        if (u > 1) {
            auto [o, i] = st.split(ro, u);
            reduce = {o, i};
            unrolled = i;
        }
    }
    if (nd == 1) {
        reduce.push_back(lane);
        st.reorder(reduce);
    } else {
        te::IterVar f = fuse_leading(st, nd - 1);
        std::vector<te::IterVar> order = {f};
        order.insert(order.end(), reduce.begin(), reduce.end());
        order.push_back(lane);
        st.reorder(order);
        if (assumed_numel(t) / assumed(t->shape[nd - 1]) > 1 && assumed_numel(t) * assumed(ro->extent) > kParallelMin &&
            cfg.knob("row.par", {0, 1}, 1) == 1)
            st.parallel(f);
    }
    if (unrolled) st.unroll(unrolled);
    st.vectorize(lane);
    st.cache_write_local();
}

/// Lane-partial stages vectorized over their lanes, reductions over a leading axis (Softmax over
/// axis 1 of [N, C, L]) by the column schedule (flat_reduce.h: the kept contiguous axis
/// vectorized, the reduce axis the loop), row-wise stages fused by rows with the last axis
/// vectorized (no per-element index division), the rest generic.
inline void row_reduce_schedule(te::Schedule& s, const std::vector<te::Tensor>& outputs) {
    for (te::Stage& st : s.stages()) {
        if (!stage_untouched(st)) continue;
        const std::string& n = st.tensor()->name;
        const bool part = n.size() > 5 && n.compare(n.size() - 5, 5, "_part") == 0;
        if (part && st.all_reduce_axes().size() == 1) {
            schedule_lane_partial(st, s.config());
        } else if (reduces_columns(st)) {
            schedule_column_reduce(st, s.config());
        } else if (st.all_reduce_axes().empty() && st.tensor()->ndim() >= 2 && assumed(st.tensor()->shape.back()) >= 16) {
            schedule_rows(st, s.config());
        }
    }
    default_schedule(s, outputs);
}

}  // namespace kiln::op
