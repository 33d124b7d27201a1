// A process's place in an MPI job started by `mpirun` (docs/distributed.md).
//
// Communicator::get() initialises MPI once per process (MPI_THREAD_MULTIPLE: the heartbeat
// thread calls MPI beside the main thread) and makes two private duplicates of MPI_COMM_WORLD,
// one for collectives and one for heartbeats, both with MPI_ERRORS_RETURN so that an MPI error
// becomes a kiln::Error instead of Open MPI's abort.
//
// Failures never hang: every wait polls its requests (MPI_Testall; polling is also what makes
// Open MPI's non-blocking transfers advance) and gives up on a deadline; a blocking call (the
// synchronous collectives: Open MPI's tuned blocking algorithms are several times faster than
// its non-blocking ones on small buffers) runs under the heartbeat thread's watchdog, which
// aborts the job past the same deadline; and the heartbeat
// (heartbeat.h) aborts the whole job, naming the lost rank, when a peer stops answering. A
// rank that fails on its own (a kiln::Error) must call abort() rather than return: its peers
// would otherwise wait in the next collective.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace kiln::distributed {

class Heartbeat;

struct CommOptions {
    /// Seconds without a heartbeat from a peer after which it is declared lost and the job is
    /// aborted (KILN_DIST_HEARTBEAT_TIMEOUT). Covers a rank killed, stopped or hung.
    double heartbeat_timeout_s = 5.0;
    /// Seconds between heartbeats (KILN_DIST_HEARTBEAT_INTERVAL).
    double heartbeat_interval_s = 0.2;
    /// Longest wait for one collective while every peer is alive, e.g. a rank that skipped it
    /// (KILN_DIST_TIMEOUT; 0 = no limit). Generous: a peer may still be compiling.
    double collective_timeout_s = 900;
    /// Tensor fusion: the tensors of one call are packed into buffers of at most this many bytes
    /// per dtype (KILN_DIST_FUSION_BYTES; a larger tensor goes alone, without a copy).
    size_t fusion_bytes = size_t{64} << 20;
    /// Check before moving data that every rank's call holds the same tensors (names, dtypes,
    /// shapes): a mismatch is an error naming the rank and the tensor, not a hang or garbage
    /// (KILN_DIST_CHECK=0 turns it off).
    bool check_agreement = true;

    /// The defaults overridden by the KILN_DIST_* environment variables above.
    static CommOptions from_env();
};

class Communicator {
public:
    /// The process's communicator: initialises MPI on the first call (with `opts`; later calls
    /// ignore it). Outside mpirun this is a job of one rank.
    static Communicator& get(const CommOptions& opts = CommOptions::from_env());
    /// Whether get() has initialised MPI in this process.
    static bool initialized();

    int rank() const { return rank_; }
    int size() const { return size_; }
    /// Ranks of the whole job on this rank's node (sharing its memory), this one included.
    int local_size() const { return local_size_; }
    const CommOptions& options() const { return opts_; }
    /// Changes the fusion limit of later calls (every rank alike: the agreement check does not
    /// cover it, and buffers need not match across ranks anyway).
    void set_fusion_bytes(size_t bytes) { opts_.fusion_bytes = bytes; }
    /// The communicator collectives run on (a duplicate of MPI_COMM_WORLD, or split() of one).
    MPI_Comm comm() const { return comm_; }
    /// A sub-communicator (MPI_Comm_split): the ranks of this one that pass the same `color`,
    /// ranked by `key`, with this one's options and deadlines. It has no heartbeat of its own:
    /// the world's covers every rank. `label` names it in errors ("rank 1 of stage 0's
    /// replicas: ..."). Every rank of this communicator calls it (a collective call); the result
    /// must be destroyed before finalize().
    std::unique_ptr<Communicator> split(int color, int key, const std::string& label);

    /// Waits for every request, polling. kiln::Error (kIOError) naming `what` and this rank on an
    /// MPI error or after options().collective_timeout_s.
    void wait_all(std::vector<MPI_Request>& requests, const std::string& what);
    /// Throws a kiln::Error (kIOError) for a failed MPI call `rc`.
    void check(int rc, const std::string& what) const;
    /// Runs `call`, a blocking MPI call on comm() returning its error code, then check()s it.
    /// Past options().collective_timeout_s the heartbeat thread aborts the job, naming `what`
    /// and this rank (the blocking call cannot give up by itself).
    template <typename Call>
    void blocking(const std::string& what, Call&& call) {
        watch(what);
        int rc = call();
        unwatch(what);
        check(rc, what);
    }

    /// The normal end: a barrier (a rank still working keeps its peers' heartbeats satisfied),
    /// then the heartbeat stops and MPI finalises. Called once, by every rank.
    void finalize();
    /// Ends the whole job now with exit code `code` after printing `why` (MPI_Abort: mpirun
    /// kills every rank). For a rank that failed on its own.
    [[noreturn]] void abort(int code, const std::string& why);

    Communicator(const Communicator&) = delete;
    Communicator& operator=(const Communicator&) = delete;
    ~Communicator();

private:
    explicit Communicator(const CommOptions& opts);
    Communicator(const CommOptions& opts, MPI_Comm comm, std::string label);
    /// "rank R" (the world) or "rank R of LABEL" (a split).
    const std::string& who() const { return who_; }
    /// blocking()'s two halves: the world's heartbeat watches `what` (a split communicator has
    /// none of its own).
    void watch(const std::string& what);
    void unwatch(const std::string& what);

    CommOptions opts_;
    std::string label_;  // empty for the world communicator
    std::string who_;
    int rank_ = 0, size_ = 1, local_size_ = 1;
    MPI_Comm comm_ = MPI_COMM_NULL;
    std::unique_ptr<Heartbeat> heartbeat_;
    bool finalized_ = false;
};

}  // namespace kiln::distributed
