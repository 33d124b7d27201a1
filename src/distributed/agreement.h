// The check that every rank calls a collective with the same tensors.
//
// MPI trusts its callers: ranks that reduce buffers of different sizes hang or read garbage.
// Before moving data, each rank hashes its description of the call (the collective, then per
// tensor its name, dtype and shape), and one blocking MPI_Allreduce of a fixed-size record
// (the same MPI signature on every rank, whatever the call) takes the maximum of the hash and
// of its complement: the ranks agree when the two are complements. When they do not, the
// descriptions themselves are gathered and every rank throws the same kiln::Error naming the
// first rank whose call differs from rank 0's and the tensor where it does (expected vs got).
// Every rank takes the same branch, so nothing hangs.
//
// A small allreduce rides in the record (RidingAllreduce): its data is reduced by the same
// message when the ranks agree, so a collective of a few values costs one blocking MPI call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/reduce_op.h"
#include "kiln/dtype.h"

namespace kiln::distributed {

/// Bytes of data an agreement record carries (RidingAllreduce).
constexpr size_t kRidingBytes = 96;

/// `count` elements of `dtype` at `data`, reduced in place by `op` across ranks (kMean: the
/// sum; the caller divides) in the agreement check's own message.
struct RidingAllreduce {
    void* data = nullptr;
    DType dtype = DType::kFloat32;
    ReduceOp op = ReduceOp::kSum;
    size_t count = 0;
};

/// Throws kInvalidArgument unless every rank passes the same `tensors` (one description each,
/// e.g. "grad/w f32[3,4]") for `collective` ("allreduce(mean)").
void check_agreement(Communicator& comm, const std::string& collective, const std::vector<std::string>& tensors);

/// The same check for a caller that hashes its call itself (equal hashes on every rank exactly
/// when the calls are the same) and describes its tensors only on a mismatch. With `riding`
/// (at most kRidingBytes, a dtype mpi_datatype() carries), its data is allreduced too when the
/// ranks agree.
void check_agreement(Communicator& comm, const std::string& collective, uint64_t hash,
                     const std::function<std::vector<std::string>()>& describe, const RidingAllreduce* riding = nullptr);

/// FNV-1a of `bytes` continuing from `h` (the call hashes above).
uint64_t hash_bytes(const void* bytes, size_t n, uint64_t h = 1469598103934665603ull);

}  // namespace kiln::distributed
