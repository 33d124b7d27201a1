#include "distributed/local_rendezvous.h"

#include "support/error.h"

namespace kiln::distributed {

void LocalRendezvous::send(const std::string& key, Tensor t) {
    std::lock_guard<std::mutex> lock(mu_);
    KILN_CHECK(table_.emplace(key, std::move(t)).second, kInternal)
        << "bug in Kiln: transfer '" << key << "' sent twice in one step";
}

Tensor LocalRendezvous::recv(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = table_.find(key);
    KILN_CHECK(it != table_.end(), kInternal) << "bug in Kiln: recv of transfer '" << key << "' before its send";
    Tensor t = std::move(it->second);
    table_.erase(it);
    return t;
}

size_t LocalRendezvous::pending() const {
    std::lock_guard<std::mutex> lock(mu_);
    return table_.size();
}

}  // namespace kiln::distributed
