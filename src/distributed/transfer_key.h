// The key of one tensor transfer between ranks, as TensorFlow's rendezvous keys it
// (Rendezvous::CreateKey: source device, source incarnation, destination device, tensor name,
// frame and iteration): a Send and its Recv meet when their keys are equal. The step id is
// filled in per run, so transfers of different steps in flight never match each other.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::distributed {

struct TransferKey {
    int src_rank = 0;
    /// Identifies one life of the source process (a restarted rank gets a new one), so a Recv
    /// never matches a Send of a process that died; the partition uses 1 until ranks restart.
    uint64_t src_incarnation = 1;
    int dst_rank = 0;
    std::string tensor;  // the value's name in the whole graph
    /// Frame and iteration ("0:0" outside loops): inside a loop body each iteration's transfer
    /// is distinct.
    int64_t frame = 0, iteration = 0;
    /// The run's step id; -1 in the partition (the graph's key), set when a step runs.
    int64_t step = -1;

    /// "0;1;1;conv3_out;0:0" and, once the step is set, ";step=7". One form for the IR's `key`
    /// attribute, logs and errors, so a report names the tensor both ranks wait on.
    std::string to_string() const;
    /// The key with the step set.
    TransferKey at_step(int64_t s) const;
    bool operator==(const TransferKey& o) const = default;
};

/// Parses to_string()'s form; kInvalidArgument naming the text otherwise.
TransferKey parse_transfer_key(const std::string& text);

}  // namespace kiln::distributed
