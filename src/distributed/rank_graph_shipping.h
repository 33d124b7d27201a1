// A rank's graph sent from the master (rank 0) to its worker over the rendezvous
// (master_dispatch.h, docs/distributed.md "Master and workers").
//
// The graph travels as IR text (ir/printer.h: node names, attributes and fusion groups read back
// exactly) with its large constants taken out: each constant of more than kInlineElements
// elements becomes a graph input for the text and travels as a tensor of its own under the key
// "const:NAME", so weights move as their bytes, not as decimal text; the worker freezes them
// back into constants. Small constants (shapes, scalars) stay in the text, which prints floats
// in the shortest form that reads back to the same bits. The worker's graph is the master's,
// bit for bit, and compiles to the same kernels.
#pragma once

#include <string>

#include "distributed/partition.h"
#include "distributed/rendezvous.h"

namespace kiln::distributed {

/// Constants up to this many elements stay in the text.
constexpr int64_t kInlineElements = 64;

/// Text as a u8[n] tensor and back (a graph's text, a worker's error report).
Tensor text_as_tensor(const std::string& text);
std::string tensor_as_text(const Tensor& t);

/// Master side: sends `rg` (its graph is consumed: the large constants become inputs) to rank
/// rg.rank; returns at once (non-blocking sends).
void ship_rank_graph(Rendezvous& rv, RankGraph rg);

/// The same for any graph, under `label` ("plan" is ship_rank_graph's): the keys are
/// "LABEL:graph", "LABEL:inputs" and "LABEL:const:NAME" (for "plan": "const:NAME"), so several
/// graphs can go to one rank (pipeline_stage_shipping.h ships a training stage's four).
void ship_graph(Rendezvous& rv, int rank, ir::Graph g, const std::string& label);
ir::Graph receive_graph(Rendezvous& rv, int rank, const std::string& label);

/// Worker side: the graph rank 0 sent to this rank (waits for it without a deadline: the master
/// may still be partitioning; a lost master is the heartbeat's to report). kInvalidArgument when
/// the text does not parse or a constant's type differs from its input's.
RankGraph receive_rank_graph(Rendezvous& rv, int rank);

}  // namespace kiln::distributed
