// The rendezvous of ranks that share one process: a table of tensors by transfer key (with the
// step). A send never blocks; a recv takes the tensor out. The in-process partitioned run
// (partitioned_run.h) runs ranks in dependency order, so a recv whose tensor is not there is a
// bug, reported with the key both sides use.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "support/tensor.h"

namespace kiln::distributed {

class LocalRendezvous {
public:
    /// kInternal when the key was sent already and not received.
    void send(const std::string& key, Tensor t);
    /// kInternal naming the key when nothing was sent under it.
    Tensor recv(const std::string& key);
    size_t pending() const;

private:
    mutable std::mutex mu_;
    std::map<std::string, Tensor> table_;
};

}  // namespace kiln::distributed
