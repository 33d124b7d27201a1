// Synchronized BatchNormalization (PyTorch's SyncBatchNorm) for data-parallel training
// (distributed/sync_batch_norm_gradients.h, docs/distributed.md "Synchronized BatchNorm").
//
// Every training-mode BatchNormalization becomes ops over the statistics of the GLOBAL batch,
// the union of every rank's batch. Per channel c (axes: every axis but 1):
//
//   n     = AllReduce(count)                        count: this rank's elements per channel
//   mean  = AllReduce(ReduceSum(x)) / n              one wave: n and the sum share one call
//   d     = x - mean
//   var   = AllReduce(ReduceSum(d * d)) / n          population variance, two passes (no
//                                                    E[x^2] - E[x]^2 cancellation)
//   y     = d / sqrt(var + epsilon) * scale + B
//   running_mean = input_mean * momentum + mean * (1 - momentum); likewise running_var
//
// The running statistics follow ONNX BatchNormalization (population variance), as Kiln's
// per-rank BatchNormalization does, so a job of one rank trains exactly as without the rewrite.
// Counts differ across ranks when their batches do: every sum is weighted by what it holds.
//
// The backward needs no op of its own: autodiff differentiates these ops, and AllReduce's
// gradient (op/defs/collective_ops.cc) is the AllReduce of the incoming gradients, which sums
// d loss / d mean and d loss / d var over the ranks as SyncBatchNorm's backward does.
// The graph then holds collectives: it runs cut at them (distributed/collective_model.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace kiln::autodiff {

/// Rewrites every training-mode BatchNormalization of `g` as above; `stat_updates` (the running
/// statistic name -> updated value pairs of convert_for_training) follow the new values.
/// Returns the names of the rewritten nodes (empty: the graph has no training-mode
/// BatchNormalization). kInvalidModel naming the node for an input of rank < 2 or a dtype other
/// than float32/float64.
std::vector<std::string> synchronize_batch_norm(ir::Graph& g,
                                                std::vector<std::pair<std::string, ir::Value*>>& stat_updates);

}  // namespace kiln::autodiff
