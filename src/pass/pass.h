// A pass: a named graph-to-graph function with the lowest -O level that runs it.
//
// Passes rewrite an ir::Graph in place and say whether they changed it. They run after the
// compiler bound every symbolic dimension, so value types are static. A pass that evaluates
// nodes (constant folding) does so through PassContext::evaluate, which the compiler supplies
// (the tir interpreter over the op's own compute, STYLE rule 7); the pass layer never links
// an evaluator of its own.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::pass {

/// What passes may call back into.
struct PassContext {
    /// Replaces node `n`, whose inputs are all constants, by constants holding its outputs and
    /// erases it; returns false when it cannot (no compute, non-static type). May be empty:
    /// then nothing is folded.
    std::function<bool(ir::Graph& g, ir::Node* n)> evaluate;
    /// evaluate for several nodes at once, none reading another's output (their kernels are
    /// built together); returns how many it folded. May be empty: then evaluate, node by node.
    std::function<int(ir::Graph& g, const std::vector<ir::Node*>& nodes)> evaluate_all;
    /// Fold a node whose result is larger than this (elements) only when folding frees at
    /// least as much constant data (its constant inputs have no other users), so weights are
    /// never duplicated.
    int64_t fold_max_new_elements = 4096;
    /// A symbolic compile (docs/dynamic_shapes.md): inferred types may keep symbolic dims
    /// (otherwise a non-static output is a kUnsupported error).
    bool keep_symbols = false;
    /// transform_layout makes activations whose channel count 8 divides but 16 does not one NHWC
    /// block instead of blocks of 8: set where oneDNN computes the convolutions (its brgemm
    /// convs read NHWC; Kiln's generated conv vectorizes one block, so it keeps blocks of 8).
    bool nhwc_8_channel_blocks = false;
    /// The kernels are compiled for runs that will be preempted (SessionOptions::preemptible):
    /// pack_matmul_weights keeps a column panel of a packed B small enough that the iteration
    /// that first reads it stays short (op::preemptible_packed_block).
    bool preemptible = false;
};

struct Pass {
    std::string name;  // kebab-case, as --print-after takes it: "fold-constants"
    int level = 0;     // runs at -O<level> and above
    std::string summary;
    std::function<bool(ir::Graph& g, const PassContext& ctx)> run;
};

}  // namespace kiln::pass
