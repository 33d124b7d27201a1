// ConstantPool (constant_pool.h).
#include "compiler/constant_pool.h"

#include <cstring>

#include "support/hash64.h"

namespace kiln::compiler {
namespace {

uint64_t content_hash(const Tensor& t) {
    Hasher64 h;
    const int32_t dtype = static_cast<int32_t>(t.dtype());
    h.update(&dtype, sizeof dtype);
    h.update(t.shape().data(), t.shape().size() * sizeof(int64_t));
    h.update(t.data(), t.nbytes());
    return h.digest();
}

bool same_contents(const Tensor& a, const Tensor& b) {
    return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

}  // namespace

void ConstantPool::share(runtime::Executable& exe) {
    std::lock_guard<std::mutex> lock(mu_);
    for (runtime::BufferDesc& b : exe.buffers) {
        Tensor& t = b.constant;
        // Strings hold objects, not bytes; empty tensors have nothing to share.
        if (b.role != runtime::BufferRole::kConstant || t.dtype() == DType::kString || t.nbytes() == 0 ||
            t.data() == nullptr || pooled_.count(t.data()))
            continue;
        const uint64_t h = content_hash(t);
        bool found = false;
        auto [first, last] = by_hash_.equal_range(h);
        for (auto it = first; it != last && !found; ++it) {
            if (!same_contents(it->second, t)) continue;
            t = it->second;  // the fresh copy dies with the compile's graph
            found = true;
        }
        if (found) continue;
        by_hash_.emplace(h, t);
        pooled_.emplace(t.data(), h);
    }
}

void ConstantPool::release() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = by_hash_.begin(); it != by_hash_.end();) {
        if (it->second.sole_owner()) {
            pooled_.erase(it->second.data());
            it = by_hash_.erase(it);
        } else {
            ++it;
        }
    }
}

size_t ConstantPool::bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (const auto& [h, t] : by_hash_) n += t.nbytes();
    return n;
}

}  // namespace kiln::compiler
