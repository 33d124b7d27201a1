// check_agreement (agreement.h): a hash allgather on the common path, descriptions only on a
// mismatch.
#include "distributed/agreement.h"

#include <cstdint>

#include "kiln/error.h"

namespace kiln::distributed {
namespace {

uint64_t fnv1a(const std::string& s, uint64_t h) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
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

void check_agreement(Communicator& comm, const std::string& collective, const std::vector<std::string>& tensors) {
    if (comm.size() == 1) return;
    std::string mine = collective + "\n" + join(tensors);
    uint64_t h = fnv1a(mine, 1469598103934665603ull);
    std::vector<uint64_t> all(comm.size());
    std::vector<MPI_Request> req(1);
    const std::string what = collective + " (agreement check)";
    comm.check(MPI_Iallgather(&h, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm.comm(), &req[0]), what);
    comm.wait_all(req, what);
    for (uint64_t x : all)
        if (x != all[0]) report(gather_descriptions(comm, mine, what));
}

}  // namespace kiln::distributed
