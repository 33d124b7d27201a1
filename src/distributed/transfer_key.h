// The key of one tensor transfer between ranks, as TensorFlow's rendezvous keys it
// (Rendezvous::CreateKey: source device, source incarnation, destination device, tensor name,
// frame and iteration, plus the step): a Send and its Recv meet when their keys are equal.
// The partition (partition.h) makes keys without a step (step < 0: filled in per run), so
// transfers of different steps in flight never match each other.
//
// One definition for the partition and the MPI rendezvous (rendezvous.h): same fields and the
// same text, "0/1 -> 1 'conv3:0' frame 0:0 step 7", used by the IR's `key` attribute, logs and
// errors, so a report of a stuck receive names the tensor both ranks wait on.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::distributed {

struct TransferKey {
    int src_rank = 0;
    uint64_t incarnation = 0;  // of the source process (a restarted worker gets a new one)
    int dst_rank = 0;
    std::string tensor;        // the value's name in the whole graph, "conv3:0"
    int64_t frame = 0, iter = 0;  // "0:0" outside loops
    int64_t step = 0;          // < 0: not set (a partition's graph key)

    /// "0/1 -> 1 'conv3:0' frame 0:0 step 7" (src/incarnation -> dst); no " step N" while the
    /// step is not set.
    std::string to_string() const;
    /// The MPI tag: a hash (FNV-1a) of to_string() in [1, tag_upper_bound].
    int tag(int tag_upper_bound) const;
    /// The key with the step set.
    TransferKey at_step(int64_t s) const;
    bool operator==(const TransferKey& o) const = default;
};

/// Parses to_string()'s text; kInvalidArgument naming the text otherwise.
TransferKey parse_transfer_key(const std::string& text);

}  // namespace kiln::distributed
