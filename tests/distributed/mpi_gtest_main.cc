// gtest main for tests run under mpiexec: every rank runs every test; rank 0 prints; the exit
// code is the worst rank's, so a failure on any rank fails the test.
#include <gtest/gtest.h>

#include "distributed/communicator.h"

int main(int argc, char** argv) {
    ::testing::InitGoogleTest(&argc, argv);
    kiln::distributed::Communicator& comm = kiln::distributed::Communicator::get();
    if (comm.rank() != 0) {
        auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
        delete listeners.Release(listeners.default_result_printer());
    }
    int rc = RUN_ALL_TESTS(), worst = rc;
    MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, comm.comm());
    if (rc != 0) std::fprintf(stderr, "rank %d: tests failed\n", comm.rank());
    comm.finalize();
    return worst;
}
