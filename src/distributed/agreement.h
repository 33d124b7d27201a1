// The check that every rank calls a collective with the same tensors.
//
// MPI trusts its callers: ranks that reduce buffers of different sizes hang or read garbage.
// Before moving data, each rank hashes its description of the call (the collective, then per
// tensor its name, dtype and shape) and the hashes are allgathered (one small message). When
// they differ, the descriptions themselves are gathered and every rank throws the same
// kiln::Error naming the first rank whose call differs from rank 0's and the tensor where it
// does (expected vs got). Every rank takes the same branch, so nothing hangs.
#pragma once

#include <string>
#include <vector>

#include "distributed/communicator.h"

namespace kiln::distributed {

/// Throws kInvalidArgument unless every rank passes the same `tensors` (one description each,
/// e.g. "grad/w f32[3,4]") for `collective` ("allreduce(mean)").
void check_agreement(Communicator& comm, const std::string& collective, const std::vector<std::string>& tensors);

}  // namespace kiln::distributed
