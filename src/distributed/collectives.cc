// The collectives (collectives.h). MPI counts are ints: a buffer of more than INT_MAX elements
// is refused (kUnsupported) rather than split.
#include "distributed/collectives.h"

#include <atomic>
#include <climits>
#include <cstring>

#include "distributed/agreement.h"
#include "distributed/fusion.h"
#include "kiln/error.h"

namespace kiln::distributed {
namespace {

std::atomic<size_t> data_calls{0};

int mpi_count(size_t elements, const std::string& what) {
    KILN_CHECK(elements <= static_cast<size_t>(INT_MAX), kUnsupported)
        << what << ": " << elements << " elements is more than one MPI call carries (INT_MAX)";
    return static_cast<int>(elements);
}

std::vector<std::string> descriptions(const std::vector<NamedTensor>& ts) {
    std::vector<std::string> out;
    for (const NamedTensor& t : ts) out.push_back(describe(t));
    return out;
}

/// A fusion buffer's storage: the tensor itself when it is alone (no copy), else a packed copy.
struct Packed {
    FusionBuffer plan;
    Tensor storage;
    void* data() { return storage.data(); }
};

std::vector<Packed> pack(const std::vector<NamedTensor>& ts, size_t limit, bool copy_in) {
    std::vector<DType> dtypes;
    std::vector<size_t> bytes;
    for (const NamedTensor& t : ts) dtypes.push_back(t.tensor.dtype()), bytes.push_back(t.tensor.nbytes());
    std::vector<Packed> out;
    for (FusionBuffer& b : plan_fusion(dtypes, bytes, limit)) {
        Packed p{std::move(b), Tensor()};
        if (p.plan.members.size() == 1) {
            p.storage = ts[p.plan.members[0]].tensor;
        } else {
            p.storage = Tensor(p.plan.dtype, {static_cast<int64_t>(p.plan.bytes / dtype_size(p.plan.dtype))});
            char* at = static_cast<char*>(p.storage.data());
            for (size_t i : p.plan.members) {
                if (copy_in) std::memcpy(at, ts[i].tensor.data(), ts[i].tensor.nbytes());
                at += ts[i].tensor.nbytes();
            }
        }
        out.push_back(std::move(p));
    }
    return out;
}

void unpack(std::vector<Packed>& packed, std::vector<NamedTensor>& ts) {
    for (Packed& p : packed) {
        if (p.plan.members.size() == 1) continue;  // reduced in place
        const char* at = static_cast<const char*>(p.storage.data());
        for (size_t i : p.plan.members) {
            std::memcpy(ts[i].tensor.data(), at, ts[i].tensor.nbytes());
            at += ts[i].tensor.nbytes();
        }
    }
}

/// The agreement check's hash of `ts` (agreement.h): each tensor's name, dtype and shape.
uint64_t call_hash(const std::vector<NamedTensor>& ts) {
    uint64_t h = hash_bytes(nullptr, 0);
    for (const NamedTensor& t : ts) {
        const uint64_t head[2] = {t.name.size(), static_cast<uint64_t>(t.tensor.dtype()) << 32 | t.tensor.shape().size()};
        h = hash_bytes(head, sizeof(head), h);
        h = hash_bytes(t.name.data(), t.name.size(), h);
        h = hash_bytes(t.tensor.shape().data(), t.tensor.shape().size() * sizeof(int64_t), h);
    }
    return h;
}

std::string call_name(const char* collective, const std::vector<NamedTensor>& ts) {
    std::string out = std::string(collective) + " of ";
    if (ts.empty()) return out + "no tensors";
    out += "'" + ts[0].name + "'";
    if (ts.size() > 1) out += " and " + std::to_string(ts.size() - 1) + " more";
    return out;
}

/// allreduce() of one tensor, in place and without packing (the common call: a loss, a norm,
/// a bucket). Up to kRidingBytes it rides in the agreement check.
void allreduce_one(Communicator& comm, const std::string& collective, std::vector<NamedTensor>& ts, ReduceOp op,
                   bool check) {
    Tensor& t = ts[0].tensor;
    const size_t count = static_cast<size_t>(t.numel());
    auto describe = [&] { return descriptions(ts); };
    if (check && t.nbytes() <= kRidingBytes) {
        RidingAllreduce riding{t.data(), t.dtype(), op, count};
        ++data_calls;
        check_agreement(comm, collective, call_hash(ts), describe, &riding);
    } else {
        if (check) check_agreement(comm, collective, call_hash(ts), describe);
        const std::string what = call_name(collective.c_str(), ts);
        const int n = mpi_count(count, what);
        MPI_Datatype type = mpi_datatype(t.dtype(), ts[0].name);
        ++data_calls;
        comm.blocking(what, [&] { return MPI_Allreduce(MPI_IN_PLACE, t.data(), n, type, mpi_op(op, t.dtype()), comm.comm()); });
    }
    if (op == ReduceOp::kMean) divide_in_place(t.data(), t.dtype(), count, comm.size());
}

void allreduce_checked(Communicator& comm, std::vector<NamedTensor>& ts, ReduceOp op, bool check, size_t fusion_bytes) {
    const std::string collective = std::string("allreduce(") + reduce_op_name(op) + ")";
    for (const NamedTensor& t : ts) {
        KILN_CHECK(t.tensor.defined(), kInvalidArgument) << collective << ": tensor '" << t.name << "' has no data";
        (void)mpi_datatype(t.tensor.dtype(), t.name);
    }
    if (comm.size() == 1) return;  // the reduction of one rank, also its mean
    if (ts.size() == 1) return allreduce_one(comm, collective, ts, op, check);
    auto describe = [&] { return descriptions(ts); };
    // The tensors share storage with the caller's: reduced in place, fusion buffers copied back.
    std::vector<Packed> packed = pack(ts, fusion_bytes, true);
    auto finish = [&] {
        if (op == ReduceOp::kMean)
            for (Packed& p : packed)
                divide_in_place(p.data(), p.plan.dtype, p.plan.bytes / dtype_size(p.plan.dtype), comm.size());
        unpack(packed, ts);
    };
    if (check) {
        if (packed.size() == 1 && packed[0].plan.bytes <= kRidingBytes) {  // several small tensors of one dtype
            RidingAllreduce riding{packed[0].data(), packed[0].plan.dtype, op,
                                   packed[0].plan.bytes / dtype_size(packed[0].plan.dtype)};
            ++data_calls;
            check_agreement(comm, collective, call_hash(ts), describe, &riding);
            return finish();
        }
        check_agreement(comm, collective, call_hash(ts), describe);
    }
    // Blocking calls (under the heartbeat's watchdog): Open MPI's tuned MPI_Allreduce beats its
    // non-blocking one at every size (docs/distributed.md, the allreduce micro-benchmark).
    const std::string what = call_name(collective.c_str(), ts);
    for (Packed& p : packed) {
        int count = mpi_count(p.plan.bytes / dtype_size(p.plan.dtype), what);
        MPI_Datatype type = mpi_datatype(p.plan.dtype, ts[p.plan.members[0]].name);
        ++data_calls;
        comm.blocking(what, [&] { return MPI_Allreduce(MPI_IN_PLACE, p.data(), count, type, mpi_op(op, p.plan.dtype), comm.comm()); });
    }
    finish();
}

}  // namespace

size_t collective_data_calls() { return data_calls.load(); }

std::string describe(const NamedTensor& t) {
    return t.name + " " + dtype_name(t.tensor.dtype()) + shape_str(t.tensor.shape());
}

void allreduce(Communicator& comm, std::vector<NamedTensor>& ts, ReduceOp op) {
    allreduce_checked(comm, ts, op, comm.options().check_agreement, comm.options().fusion_bytes);
}

void allreduce_prechecked(Communicator& comm, std::vector<NamedTensor>& ts, ReduceOp op, size_t fusion_bytes) {
    allreduce_checked(comm, ts, op, false, fusion_bytes > 0 ? fusion_bytes : comm.options().fusion_bytes);
}

void broadcast(Communicator& comm, std::vector<NamedTensor>& ts, int root) {
    KILN_CHECK(root >= 0 && root < comm.size(), kInvalidArgument)
        << "broadcast: root rank " << root << " out of range (" << comm.size() << " ranks)";
    const std::string collective = "broadcast(from rank " + std::to_string(root) + ")";
    for (const NamedTensor& t : ts) (void)mpi_datatype(t.tensor.dtype(), t.name);
    if (comm.options().check_agreement) check_agreement(comm, collective, call_hash(ts), [&] { return descriptions(ts); });
    if (comm.size() == 1) return;
    const std::string what = call_name("broadcast", ts);
    std::vector<Packed> packed = pack(ts, comm.options().fusion_bytes, comm.rank() == root);
    for (Packed& p : packed) {
        int count = mpi_count(p.plan.bytes / dtype_size(p.plan.dtype), what);
        MPI_Datatype type = mpi_datatype(p.plan.dtype, ts[p.plan.members[0]].name);
        ++data_calls;
        comm.blocking(what, [&] { return MPI_Bcast(p.data(), count, type, root, comm.comm()); });
    }
    if (comm.rank() != root) unpack(packed, ts);
}

Tensor allgather(Communicator& comm, const NamedTensor& t) {
    Shape shape = t.tensor.shape();
    if (shape.empty()) shape = {1};
    MPI_Datatype type = mpi_datatype(t.tensor.dtype(), t.name);
    // Dim 0 may differ between ranks: it is left out of the description the ranks compare.
    Shape rest(shape.begin() + 1, shape.end());
    if (comm.options().check_agreement)
        check_agreement(comm, "allgather", {t.name + " " + dtype_name(t.tensor.dtype()) + "[?" +
                                            (rest.empty() ? "]" : "," + shape_str(rest).substr(1))});
    const std::string what = "allgather of '" + t.name + "'";
    const int n = comm.size();
    int64_t rows = shape[0];
    std::vector<int64_t> all_rows(n);
    comm.blocking(what, [&] { return MPI_Allgather(&rows, 1, MPI_INT64_T, all_rows.data(), 1, MPI_INT64_T, comm.comm()); });
    const size_t row = static_cast<size_t>(shape_numel(rest));
    std::vector<int> counts(n), offsets(n);
    int64_t total = 0;
    for (int r = 0; r < n; ++r) {
        offsets[r] = mpi_count(static_cast<size_t>(total) * row, what);
        counts[r] = mpi_count(static_cast<size_t>(all_rows[r]) * row, what);
        total += all_rows[r];
    }
    Shape out_shape = rest;
    out_shape.insert(out_shape.begin(), total);
    Tensor out(t.tensor.dtype(), out_shape);
    (void)mpi_count(static_cast<size_t>(total) * row, what);
    ++data_calls;
    comm.blocking(what, [&] {
        return MPI_Allgatherv(t.tensor.data(), counts[comm.rank()], type, out.data(), counts.data(), offsets.data(), type,
                              comm.comm());
    });
    return out;
}

Tensor reduce_scatter(Communicator& comm, const NamedTensor& t, ReduceOp op) {
    const std::string collective = std::string("reduce_scatter(") + reduce_op_name(op) + ")";
    KILN_CHECK(!t.tensor.shape().empty(), kInvalidArgument)
        << collective << ": tensor '" << t.name << "' is a scalar: it has no axis 0 to scatter";
    MPI_Datatype type = mpi_datatype(t.tensor.dtype(), t.name);
    if (comm.options().check_agreement) check_agreement(comm, collective, {describe(t)});
    const std::string what = collective + " of '" + t.name + "'";
    const int n = comm.size();
    const Shape& shape = t.tensor.shape();
    Shape rest(shape.begin() + 1, shape.end());
    const int64_t rows = shape[0], row = shape_numel(rest);
    std::vector<int> counts(n);
    for (int r = 0; r < n; ++r) counts[r] = mpi_count(static_cast<size_t>((rows / n + (r < rows % n ? 1 : 0)) * row), what);
    Shape out_shape = rest;
    out_shape.insert(out_shape.begin(), rows / n + (comm.rank() < rows % n ? 1 : 0));
    Tensor out(t.tensor.dtype(), out_shape);
    ++data_calls;
    comm.blocking(what, [&] {
        return MPI_Reduce_scatter(t.tensor.data(), out.data(), counts.data(), type, mpi_op(op, t.tensor.dtype()), comm.comm());
    });
    if (op == ReduceOp::kMean) divide_in_place(out.data(), out.dtype(), static_cast<size_t>(out.numel()), n);
    return out;
}

}  // namespace kiln::distributed
