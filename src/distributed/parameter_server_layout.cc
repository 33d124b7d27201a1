// Server and worker ranks and the placement of parameters (parameter_server_layout.h).
#include "distributed/parameter_server_layout.h"

#include <algorithm>
#include <numeric>

#include "kiln/error.h"

namespace kiln::distributed {

void check_parameter_server_count(int world, int servers) {
    KILN_CHECK(servers >= 1, kInvalidArgument) << "--parameter-servers must be at least 1, got " << servers;
    KILN_CHECK(servers < world, kInvalidArgument)
        << "--parameter-servers " << servers << " leaves no worker: the job has " << world
        << " rank(s); ranks 0.." << servers - 1 << " would serve, so mpirun -np must be at least " << servers + 1;
}

ParameterServerLayout ParameterServerLayout::make(int world, int servers,
                                                  const std::vector<std::pair<std::string, size_t>>& params) {
    check_parameter_server_count(world, servers);
    KILN_CHECK(static_cast<size_t>(servers) <= params.size(), kInvalidArgument)
        << "--parameter-servers " << servers << ": the model has only " << params.size()
        << " trained parameter(s), and every server must own at least one";
    ParameterServerLayout l;
    l.servers = servers;
    l.workers = world - servers;
    l.owned.assign(static_cast<size_t>(servers), {});
    l.bytes.assign(static_cast<size_t>(servers), 0);
    std::vector<size_t> order(params.size());
    std::iota(order.begin(), order.end(), size_t{0});
    // Largest first; stable, so equal sizes keep model order.
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return params[a].second > params[b].second; });
    std::vector<int> owner_of(params.size());
    for (size_t i = 0; i < order.size(); ++i) {
        // The first S go one per server (so every server owns one, empty tensors included),
        // then each to the server with the fewest bytes.
        const int s = i < static_cast<size_t>(servers)
                          ? static_cast<int>(i)
                          : static_cast<int>(std::min_element(l.bytes.begin(), l.bytes.end()) - l.bytes.begin());
        owner_of[order[i]] = s;
        l.bytes[static_cast<size_t>(s)] += params[order[i]].second;
    }
    for (size_t p = 0; p < params.size(); ++p) {
        l.owner[params[p].first] = owner_of[p];
        l.owned[static_cast<size_t>(owner_of[p])].push_back(params[p].first);
    }
    return l;
}

TransferKey parameter_server_key(int src, int dst, const std::string& tensor, int64_t step) {
    TransferKey k;
    k.src_rank = src;
    k.dst_rank = dst;
    k.tensor = tensor;
    k.step = step;
    return k;
}

}  // namespace kiln::distributed
