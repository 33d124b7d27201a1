// Collectives over MPI on kiln::Tensors (docs/distributed.md): allreduce (sum, mean, min, max,
// prod), broadcast, allgather and reduce-scatter, for f32 f64 f16 bf16 and every 8- to 64-bit
// integer dtype.
//
// Every call is collective: each rank of the communicator makes it with the same tensors in the
// same order. That is checked first (agreement.h), so a mismatch is an error naming the rank
// and the tensor. The calls are blocking MPI calls under the heartbeat's watchdog
// (Communicator::blocking; a small allreduce rides in the agreement check's own message);
// allreduce and broadcast pack their tensors into fusion buffers (fusion.h).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/reduce_op.h"
#include "kiln/tensor.h"

namespace kiln::distributed {

/// A tensor of a collective call; the name identifies it in errors ("grad/conv1.weight").
struct NamedTensor {
    std::string name;
    Tensor tensor;
};

/// Reduces each tensor elementwise across ranks, in place: afterwards every rank holds the
/// reduction (ranks' shapes and dtypes must agree).
void allreduce(Communicator& comm, std::vector<NamedTensor>& tensors, ReduceOp op);

/// allreduce() without the agreement check, for a caller that checks the whole set of its calls
/// up front (data_parallel.h's buckets, one check per step). Every rank must make the same calls
/// in the same order. `fusion_bytes` (0: the communicator's) bounds the fusion buffers: a tensor
/// larger than it is reduced alone, in place, without the copies in and out.
void allreduce_prechecked(Communicator& comm, std::vector<NamedTensor>& tensors, ReduceOp op, size_t fusion_bytes = 0);

/// Copies rank `root`'s tensors into every rank's tensors, in place.
void broadcast(Communicator& comm, std::vector<NamedTensor>& tensors, int root);

/// Every rank's tensor concatenated along axis 0 in rank order. The ranks' dim 0 may differ;
/// the other dims and the dtype must agree. A scalar is gathered as a vector of one per rank.
Tensor allgather(Communicator& comm, const NamedTensor& tensor);

/// The reduction across ranks of `tensor`, of which rank r keeps its block of axis 0, split as
/// numpy.array_split does: the first (dim0 % size) ranks get one row more. Dim 0 may be smaller
/// than the rank count (some ranks then get zero rows).
Tensor reduce_scatter(Communicator& comm, const NamedTensor& tensor, ReduceOp op);

/// Collective data transfers this process has issued so far: one per allreduce, broadcast,
/// allgatherv and reduce-scatter MPI call (a fused buffer is one; an allreduce riding in the
/// agreement check is one); the agreement check's own messages and allgather's row counts are
/// not counted. Tests compare it before and after a call
/// to see what tensor fusion saved.
size_t collective_data_calls();

/// "name f32[3,4]": the description the agreement check compares.
std::string describe(const NamedTensor& t);

}  // namespace kiln::distributed
