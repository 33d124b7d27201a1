// ConstantPool: one copy of each distinct constant across the executables of a session.
//
// A session compiles one imported model once per shape specialization (compiler/session.cc).
// The imported weights are shared already (ir/graph_clone.h), but constants the passes make —
// weights packed for a micro-kernel (pass/pack_matmul_weights.h), folded reshapes — are new
// tensors in every compile, mostly with the same contents. share() replaces each constant buffer
// of a fresh executable by an earlier one with equal dtype, shape and bytes (found by an XXH3
// hash, confirmed by memcmp), before the executable loads its kernels (extern kernels keep
// pointers into constants); release() drops what no executable uses any more.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "runtime/executable.h"
#include "support/tensor.h"

namespace kiln::compiler {

class ConstantPool {
public:
    /// Makes `exe`'s constant buffers share storage with equal pooled ones; pools the others.
    /// Call before exe.load(). Thread-safe.
    void share(runtime::Executable& exe);
    /// Forgets pooled constants that only the pool still holds (their executables are gone).
    void release();
    /// Bytes of the distinct constants pooled now.
    size_t bytes() const;

private:
    mutable std::mutex mu_;
    std::unordered_multimap<uint64_t, Tensor> by_hash_;
    std::unordered_map<const void*, uint64_t> pooled_;  // data pointer -> hash of pooled tensors
};

}  // namespace kiln::compiler
