// recompute(): activation checkpointing of a training graph (Chen et al. 2016, "Training Deep
// Nets with Sublinear Memory Cost").
//
// After differentiate(), every forward value the backward pass reads stays alive from the
// forward pass to its backward use: activation memory grows with depth. recompute() splits the
// forward nodes (in order) into segments of about sqrt(N) nodes; for a recomputed segment, the
// backward pass no longer reads the segment's inner values but copies of them, computed by
// copies of the segment's nodes placed just before the first backward node that needs them.
// Values that cross a segment boundary (read by a later segment's forward nodes) are the
// checkpoints and are read as they are. Peak activation memory drops to about the checkpoints
// plus one segment, for about one extra forward pass.
//
// The copies compute exactly what the forward nodes computed (same ops, same inputs, same
// kernels), so gradients are bit-identical. Random ops (Dropout's mask, Random*) are never
// copied: their outputs are kept. Copies are ir::NodeRole::kRecompute nodes, named
// "recompute/..." (pass/rewrite.h: CSE and fusion keep them apart from the forward nodes).
//
// Preconditions: `g` is a forward graph followed by the nodes differentiate() added (role
// kBackward) and any nodes after them (the optimizer), with static shapes.
#pragma once

#include <cstddef>
#include <string>

#include "ir/graph.h"

namespace kiln::autodiff {

enum class RecomputeMode { kNone, kSqrt, kAuto };
/// "none" | "sqrt" | "auto"; kInvalidArgument otherwise.
RecomputeMode parse_recompute_mode(const std::string& s);

struct RecomputeOptions {
    RecomputeMode mode = RecomputeMode::kNone;
    /// kAuto: recompute the fewest segments (earliest first: their activations live longest)
    /// whose estimated peak fits this many bytes; kOutOfMemory when even all of them do not.
    size_t memory_limit = 0;
    /// Forward nodes per segment (0 = ceil(sqrt(forward nodes))).
    int segment_nodes = 0;
};

struct RecomputeReport {
    int forward_nodes = 0;
    int segments = 0;
    int recomputed_segments = 0;
    int copied_nodes = 0;
    /// Estimated peak bytes of intermediates (estimate_peak_bytes) before and after.
    size_t peak_before = 0, peak_after = 0;
    std::string str() const;
};

/// Rewrites `g` as the file comment says (kNone: leaves it unchanged, fills the report).
RecomputeReport recompute(ir::Graph& g, const RecomputeOptions& opts);

/// The largest total size of node results alive at once when `g`'s nodes run in their order
/// (a value lives from its producer to its last reader; graph outputs to the end). Before
/// fusion, so an over-estimate of the memory plan's arena; used to compare schedules.
size_t estimate_peak_bytes(const ir::Graph& g);

}  // namespace kiln::autodiff
