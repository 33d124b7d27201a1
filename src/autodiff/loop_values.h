// What the backward of a Loop or Scan reads of its forward's per-iteration values.
//
// The backward body of a Loop or Scan starts as a copy of the forward body, run on the carried
// values of one iteration (restored from stacks the forward keeps), followed by the body's VJP
// (autodiff/control_flow_gradient.h). With LoopValues::kRecompute that copy runs in the backward
// loop: the forward keeps only the carried values, and the body's work is done twice. With
// LoopValues::kKeep, keep_read_values() finds the forward values the VJP reads, has the forward
// loop stack them too (extra scan outputs, one copy per iteration), reads them back in the
// backward body, and erases the copies no longer needed: the backward does no forward work
// beyond what the kept values cannot give (values nested loops keep for their own backward).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::autodiff {

/// Replaces Loop/Scan `n` in `g` by a copy whose body also returns the body values `keep` (its
/// inputs or node outputs), stacked per iteration as extra scan outputs named `names`, with
/// `n`'s attributes updated by `update`. The copy takes n's output names (regions read them by
/// name) and its place in the order; n is left without users, for the caller to erase.
ir::Node* keep_body_values(ir::Graph& g, ir::Node& n, const std::vector<const ir::Value*>& keep,
                           const std::vector<std::string>& names, const ir::AttrMap& update);

/// Makes, in a backward region, the value that replaces the recomputed `body_value`: a row of
/// the forward's stack, named `name`.
using KeptFn = std::function<ir::Value*(const ir::Value* body_value, const std::string& name)>;

/// In backward region `r` (copies of `body`'s nodes followed by backward nodes, told apart by
/// is_backward_node), replaces every forward value that a backward node or an output reads
/// (also by name, from a region) and that `body` computes as a static tensor by `kept`'s value
/// under the same name, then erases the forward copies left unused. Returns the body values
/// replaced, in order: the forward must keep them.
std::vector<const ir::Value*> keep_read_values(ir::Graph& r, const ir::Graph& body, const KeptFn& kept);

}  // namespace kiln::autodiff
