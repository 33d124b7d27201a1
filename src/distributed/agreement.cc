// check_agreement (agreement.h): one fixed-size record allreduced on the common path (the
// hash, and a small allreduce riding along), descriptions only on a mismatch.
#include "distributed/agreement.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kiln/error.h"

namespace kiln::distributed {
namespace {

/// What each rank contributes. After the allreduce, `hash_max` is the largest rank's hash and
/// `complement_max` the complement of the smallest: the ranks agree when the two are
/// complements.
struct Record {
    uint64_t hash_max;
    uint64_t complement_max;
    uint32_t dtype, op, count, riding;  // the riding allreduce (riding = 1), if any
    unsigned char data[kRidingBytes];
};

bool consistent(const Record& r) { return r.hash_max == ~r.complement_max; }

/// The record's MPI operation: maxima of the two hashes, and the riding data reduced when both
/// sides hold one call (a partial result of several ranks only when they agreed too).
void combine(void* in, void* inout, int* len, MPI_Datatype*) {
    const auto* a = static_cast<const Record*>(in);
    auto* b = static_cast<Record*>(inout);
    for (int i = 0; i < *len; ++i) {
        const Record& x = a[i];
        Record& y = b[i];
        bool same = consistent(x) && consistent(y) && x.hash_max == y.hash_max && x.riding && y.riding &&
                    x.dtype == y.dtype && x.op == y.op && x.count == y.count &&
                    x.count * dtype_size(static_cast<DType>(x.dtype)) <= kRidingBytes;
        if (same) {
            auto dtype = static_cast<DType>(x.dtype);
            auto op = static_cast<ReduceOp>(x.op);
            MPI_Reduce_local(x.data, y.data, static_cast<int>(x.count), mpi_datatype(dtype, ""), mpi_op(op, dtype));
        }
        y.hash_max = std::max(x.hash_max, y.hash_max);
        y.complement_max = std::max(x.complement_max, y.complement_max);
    }
}

struct RecordMpi {
    MPI_Datatype type;
    MPI_Op op;
};

/// Created once, after MPI_Init; MPI_Finalize frees them.
const RecordMpi& record_mpi() {
    static RecordMpi r = [] {
        RecordMpi m;
        MPI_Type_contiguous(static_cast<int>(sizeof(Record)), MPI_BYTE, &m.type);
        MPI_Type_commit(&m.type);
        MPI_Op_create(&combine, 1, &m.op);
        return m;
    }();
    return r;
}

std::string join(const std::vector<std::string>& parts) {
    std::string out;
    for (const std::string& p : parts) out += p + '\n';
    return out;
}

std::vector<std::string> split(const std::string& text) {
    std::vector<std::string> out;
    size_t start = 0;
    for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
        out.push_back(text.substr(start, nl - start));
    return out;
}

/// Every rank's joined description (rank order).
std::vector<std::string> gather_descriptions(Communicator& comm, const std::string& mine, const std::string& what) {
    int n = comm.size();
    int len = static_cast<int>(mine.size());
    std::vector<int> lens(n), offsets(n);
    std::vector<MPI_Request> req(1);
    comm.check(MPI_Iallgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm.comm(), &req[0]), what);
    comm.wait_all(req, what);
    int total = 0;
    for (int r = 0; r < n; ++r) offsets[r] = total, total += lens[r];
    std::string all(static_cast<size_t>(total), '\0');
    comm.check(MPI_Iallgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR,
                               comm.comm(), &req[0]),
               what);
    comm.wait_all(req, what);
    std::vector<std::string> out;
    for (int r = 0; r < n; ++r) out.push_back(all.substr(offsets[r], lens[r]));
    return out;
}

/// `all[r]`: rank r's collective on the first line, then one line per tensor.
[[noreturn]] void report(const std::vector<std::string>& all) {
    std::vector<std::string> base = split(all[0]);
    for (size_t r = 1; r < all.size(); ++r) {
        if (all[r] == all[0]) continue;
        std::vector<std::string> got = split(all[r]);
        KILN_CHECK(got[0] == base[0], kInvalidArgument)
            << "rank " << r << " called " << got[0] << " while rank 0 called " << base[0]
            << " (the ranks' collectives are out of step)";
        size_t i = 1;
        while (i < base.size() && i < got.size() && base[i] == got[i]) ++i;
        std::string expected = i < base.size() ? "'" + base[i] + "'" : "no more tensors";
        std::string actual = i < got.size() ? "'" + got[i] + "'" : "no more tensors";
        KILN_THROW(kInvalidArgument) << base[0] << ": rank " << r << " disagrees with rank 0 at tensor " << i - 1
                                     << ": rank 0 has " << expected << ", rank " << r << " has " << actual << " ("
                                     << base.size() - 1 << " vs " << got.size() - 1 << " tensors in the call)";
    }
    KILN_THROW(kInternal) << "bug in Kiln: " << base[0] << ": agreement hashes differ but the descriptions agree";
}

}  // namespace

uint64_t hash_bytes(const void* bytes, size_t n, uint64_t h) {
    const auto* p = static_cast<const unsigned char*>(bytes);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

void check_agreement(Communicator& comm, const std::string& collective, const std::vector<std::string>& tensors) {
    if (comm.size() == 1) return;
    const std::string joined = join(tensors);
    check_agreement(comm, collective, hash_bytes(joined.data(), joined.size()), [&] { return tensors; });
}

void check_agreement(Communicator& comm, const std::string& collective, uint64_t hash,
                     const std::function<std::vector<std::string>()>& describe, const RidingAllreduce* riding) {
    if (comm.size() == 1) return;
    Record r{};
    r.hash_max = hash_bytes(collective.data(), collective.size(), hash);
    r.complement_max = ~r.hash_max;
    const size_t riding_bytes = riding ? riding->count * dtype_size(riding->dtype) : 0;
    if (riding) {
        KILN_CHECK(riding_bytes <= kRidingBytes, kInternal)
            << "bug in Kiln: " << collective << ": " << riding_bytes << " bytes cannot ride in the agreement check";
        (void)mpi_datatype(riding->dtype, collective);
        r.riding = 1;
        r.dtype = static_cast<uint32_t>(riding->dtype);
        r.op = static_cast<uint32_t>(riding->op);
        r.count = static_cast<uint32_t>(riding->count);
        std::memcpy(r.data, riding->data, riding_bytes);
    }
    const RecordMpi& mpi = record_mpi();
    comm.blocking(collective, [&] { return MPI_Allreduce(MPI_IN_PLACE, &r, 1, mpi.type, mpi.op, comm.comm()); });
    if (!consistent(r))
        report(gather_descriptions(comm, collective + "\n" + join(describe()), collective + " (agreement check)"));
    if (riding) std::memcpy(riding->data, r.data, riding_bytes);
}

}  // namespace kiln::distributed
