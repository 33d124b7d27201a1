// A small MPI program for the failure tests (test_failures.py): every rank allreduces a
// tensor every 20 ms for --steps steps; at --at-step, rank --rank raises --signal on itself
// (KILL: dies; STOP: stops, alive but silent) or throws a kiln::Error (--signal ERROR), which
// the program handles as the CLI does: print, then abort the job; or (--signal SKIP) stays alive
// with its heartbeat and sleeps 60 s instead of joining the step's allreduce, which the other
// ranks wait for in a blocking call until the watchdog's deadline (KILN_DIST_TIMEOUT). Exit 0
// after a clean run.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "distributed/collectives.h"
#include "kiln/error.h"

using namespace kiln;
using namespace kiln::distributed;

int main(int argc, char** argv) {
    int steps = 100, at_step = -1, bad_rank = -1;
    std::string signal_name = "KILL";
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string flag = argv[i];
        if (flag == "--steps") steps = std::atoi(argv[i + 1]);
        else if (flag == "--at-step") at_step = std::atoi(argv[i + 1]);
        else if (flag == "--rank") bad_rank = std::atoi(argv[i + 1]);
        else if (flag == "--signal") signal_name = argv[i + 1];
        else return std::fprintf(stderr, "unknown flag %s\n", argv[i]), 2;
    }
    Communicator& comm = Communicator::get();
    try {
        for (int step = 0; step < steps; ++step) {
            if (step == at_step && comm.rank() == bad_rank) {
                std::fprintf(stderr, "fault_probe: rank %d: %s at step %d\n", comm.rank(), signal_name.c_str(), step);
                std::fflush(stderr);
                if (signal_name == "ERROR") KILN_THROW(kInvalidArgument) << "a bad batch on rank " << comm.rank();
                if (signal_name == "SKIP") {
                    std::this_thread::sleep_for(std::chrono::seconds(60));
                    continue;
                }
                raise(signal_name == "STOP" ? SIGSTOP : SIGKILL);
            }
            Tensor t(DType::kFloat32, {16});
            for (int64_t i = 0; i < 16; ++i) t.set_f64(i, comm.rank() + i);
            std::vector<NamedTensor> ts{{"probe", t}};
            allreduce(comm, ts, ReduceOp::kSum);
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    } catch (const Error& e) {
        comm.abort(1, e.what());
    }
    if (comm.rank() == 0) std::fprintf(stderr, "fault_probe: %d steps done\n", steps);
    comm.finalize();
    return 0;
}
