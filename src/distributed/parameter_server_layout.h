// Who does what in parameter-server training (parameter_server.h, docs/distributed.md): ranks
// 0..S-1 are servers, the other N-S are workers, and each parameter is owned by one server.
//
// Placement balances bytes: parameters taken largest first (ties in model order) each go to the
// server holding the fewest bytes so far (ties to the lowest rank) — the greedy rule of TF1's
// GreedyLoadBalancingStrategy, deterministic, so every rank computes the same map from the same
// model without a message. Every server must own at least one parameter (a server with nothing
// would still have to answer every worker's step).
//
// The transfers of a step are named by TransferKeys (transfer_key.h) whose tensor says what they
// carry: "grad/NAME" and "loss" from a worker to a server (the loss goes to every server;
// server 0 prints it), "weight/NAME" and "clock" back, "final/NAME" from a server to rank 0 at
// the end. The key's step is the worker's step: the weights a worker reads before its step t are
// "weight/NAME" at step t (step 0: the initial weights).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "distributed/transfer_key.h"

namespace kiln::distributed {

struct ParameterServerLayout {
    int servers = 1, workers = 1;
    /// Parameter name -> the server rank that owns it.
    std::map<std::string, int> owner;
    /// Per server rank, the parameters it owns, in model order.
    std::vector<std::vector<std::string>> owned;
    /// Per server rank, the bytes it owns.
    std::vector<size_t> bytes;

    /// The layout of a job of `world` ranks with `servers` servers over `params` (name and
    /// bytes, in model order). kInvalidArgument when servers < 1, servers >= world (no worker
    /// left) or servers > params.size().
    static ParameterServerLayout make(int world, int servers,
                                      const std::vector<std::pair<std::string, size_t>>& params);

    bool is_server(int rank) const { return rank < servers; }
    /// The worker index (0..workers-1) of a worker rank: its data shard.
    int worker_index(int rank) const { return rank - servers; }
    int worker_rank(int index) const { return servers + index; }
};

/// kInvalidArgument unless 1 <= servers < world (at least one worker).
void check_parameter_server_count(int world, int servers);

/// The key of a transfer of `tensor` from `src` to `dst` at `step` (see above).
TransferKey parameter_server_key(int src, int dst, const std::string& tensor, int64_t step);

}  // namespace kiln::distributed
