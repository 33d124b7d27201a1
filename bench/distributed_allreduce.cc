// Kiln's allreduce (src/distributed/collectives.h: agreement check + fusion + polled
// non-blocking MPI) against a bare blocking MPI_Allreduce and a bare MPI_Iallreduce + MPI_Wait
// on the same buffer, OSU-style: per size, rounds alternate the three, each timing `iters`
// back-to-back calls after a barrier;
// rank 0 prints one JSON line per size with the median seconds per call of each.
// Run by bench/distributed.py under mpiexec. `--smoke`: one round, results checked.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "distributed/collectives.h"

using namespace kiln;
using namespace kiln::distributed;

namespace {

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

template <typename F>
double time_calls(Communicator& comm, int iters, F&& call) {
    MPI_Barrier(comm.comm());
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) call();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
    double worst = 0;  // the slowest rank's time is the collective's
    MPI_Allreduce(&s, &worst, 1, MPI_DOUBLE, MPI_MAX, comm.comm());
    return worst;
}

}  // namespace

int main(int argc, char** argv) {
    bool smoke = argc > 1 && std::strcmp(argv[1], "--smoke") == 0;
    Communicator& comm = Communicator::get();
    const int rounds = smoke ? 1 : 7;
    for (size_t bytes : {size_t{8}, size_t{1} << 10, size_t{64} << 10, size_t{1} << 20, size_t{16} << 20}) {
        const int64_t n = static_cast<int64_t>(bytes / 4);
        const int iters = smoke ? 2 : static_cast<int>(std::clamp<size_t>((size_t{32} << 20) / (bytes * 8), 5, 2000));
        Tensor t(DType::kFloat32, {n});
        std::vector<float> raw(static_cast<size_t>(n));
        std::vector<double> kiln_s, mpi_s, nb_s;
        for (int r = 0; r < rounds; ++r) {
            kiln_s.push_back(time_calls(comm, iters, [&] {
                for (int64_t i = 0; i < n; ++i) t.data_as<float>()[i] = 1.0f;
                std::vector<NamedTensor> ts{{"x", t}};
                allreduce(comm, ts, ReduceOp::kSum);
            }));
            mpi_s.push_back(time_calls(comm, iters, [&] {
                std::fill(raw.begin(), raw.end(), 1.0f);
                MPI_Allreduce(MPI_IN_PLACE, raw.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, comm.comm());
            }));
            nb_s.push_back(time_calls(comm, iters, [&] {
                std::fill(raw.begin(), raw.end(), 1.0f);
                MPI_Request req;
                MPI_Iallreduce(MPI_IN_PLACE, raw.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, comm.comm(), &req);
                MPI_Wait(&req, MPI_STATUS_IGNORE);
            }));
        }
        bool ok = t.data_as<float>()[n - 1] == static_cast<float>(comm.size()) && raw[n - 1] == static_cast<float>(comm.size());
        if (comm.rank() == 0)
            std::printf("{\"bytes\": %zu, \"iters\": %d, \"kiln_s\": %.9g, \"mpi_s\": %.9g, "
                        "\"mpi_nonblocking_s\": %.9g, \"ok\": %s}\n",
                        bytes, iters, median(kiln_s), median(mpi_s), median(nb_s), ok ? "true" : "false");
        std::fflush(stdout);
    }
    comm.finalize();
    return 0;
}
