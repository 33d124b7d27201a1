// Building blocks of the op schedules (default_schedule and the per-op schedules use them).
#pragma once

#include "te/schedule.h"

namespace kiln::op {

/// Stages with more elements (or reduction work) than this run their outer loop in parallel.
constexpr int64_t kParallelMin = 16384;

/// Symbolic dims (te/dims.h, docs/dynamic_shapes.md): the size a schedule assumes for a dim
/// it cannot know when it picks tiles, vector lengths and parallel loops. The loops themselves
/// run the true extent (a split of a symbolic extent is peeled into full tiles and a tail).
constexpr int64_t kAssumedDim = 128;
inline int64_t assumed(int64_t extent) { return extent == te::kDynamicDim ? kAssumedDim : extent; }
/// numel() with assumed() dims (numel() itself for a static tensor).
int64_t assumed_numel(const te::Tensor& t);

/// Fuses axes [0, k) of `st` into one loop and returns it (the stage's outer, parallel loop).
/// With symbolic dims the fused index is split again by dividing by run-time extents; the C
/// emitter computes those divisions once per iteration of the fused loop, ahead of the loops
/// inside it (codegen/invariant_divisions.h).
te::IterVar fuse_leading(te::Stage& st, int k);

/// True if no loop transformation or loop kind was applied to the stage yet.
bool stage_untouched(const te::Stage& st);
/// Elements of 64 bytes (at most 16) in dtype t's compute type.
int64_t vector_width(DType t);
/// Fuse all axes, split by the vector width, vectorize inner, parallel outer when large.
/// Knobs "ew.vec" (inner length in vector widths; `vec_default` when untuned) and "ew.par" (see
/// op_def.cc).
void schedule_injective(te::Stage& st, te::ScheduleConfig& cfg, int64_t vec_default = 1);
/// Row-wise: fuse all but the last axis (parallel when large), vectorize the last axis (with
/// symbolic dims, a last axis of one vector or less joins the row: fuse all but the last two).
/// Avoids the div/mod of a fully fused index for stages with structured bodies (padding copies).
void schedule_rows(te::Stage& st, te::ScheduleConfig& cfg);
/// Tiles of 8 channels x `vectors` vectors of the last axis (fewer where it is shorter) for a
/// stage [n, C, L] or [n, C, h, w] that reads a channel-blocked tensor: (n, C-tile[, h])
/// parallel, then (L-tile, channel, vectorized run), so the blocked lines a tile reads stay in L1
/// (conv_nchwc.cc's from_blocked_schedule says why 8). False (nothing done) for other ranks,
/// symbolic channels, or a last axis shorter than a vector.
bool schedule_channel_tiles(te::Stage& st, int64_t vectors = 1);
/// The plain-to-blocked transpose out[n, C/c, h, w, c] (a stage named KilnLayoutToBlocked, with
/// whatever elementwise math is inlined into it) as rows of the input: (n, C-block, h) parallel,
/// then each of the block's c channels, its w run vectorized. The reads walk contiguous input
/// rows; the strided stores stay within one [w, c] tile of the output (for a plain copy the
/// op's own order, w then c unrolled, is faster: 0.64 against 0.96 ns an element for SD's
/// [320, 32, 32]; with a sigmoid inlined this one is: 0.9 against 8.7). False (nothing done)
/// unless rank 5 with a static block of 8 or more and a static w of a vector or more, at most
/// 64 or a multiple of 64 (the runs).
bool schedule_to_blocked_rows(te::Stage& st);
/// Fuse data-parallel axes (parallel when large), reduce loops serial inside.
void schedule_reduction(te::Stage& st);

}  // namespace kiln::op
