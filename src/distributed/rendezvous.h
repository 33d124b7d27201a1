// Point-to-point transfers keyed like TensorFlow's rendezvous (Rendezvous::CreateKey): the
// building block that Send/Recv pairs of a partitioned graph lower to under mpirun
// (partitioned_run.h, docs/distributed.md; partition.h makes the keys).
//
// A transfer is named by a TransferKey — source rank and its incarnation, destination rank,
// tensor, frame and iteration (inside loops), step — whose to_string() is what logs and errors
// show, so a report of a stuck receive names the tensor both ranks are waiting on. Over MPI a
// key becomes a tag (a hash of the key) on a communicator of the rendezvous' own: a header
// (the key's text, dtype and shape) then the payload, both non-blocking sends; MPI's
// non-overtaking rule keeps them in order. The receiver probes for the tag, checks the header's
// key (a hash collision is an error naming both keys, never a mix-up), then takes the payload.
// send() never blocks; recv() polls until the transfer arrives or the deadline passes. A
// progress thread polls the pending sends, so a payload moves while the sender runs kernels.
#pragma once

#include <mpi.h>

#include <condition_variable>
#include <functional>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/transfer_key.h"  // TransferKey: one definition with the partition
#include "kiln/tensor.h"

namespace kiln::distributed {

class Rendezvous {
public:
    explicit Rendezvous(Communicator& comm);
    /// Completes the pending sends (a peer must receive them: call after the matching recvs);
    /// while an exception unwinds, abandons them instead (the job is about to be aborted).
    ~Rendezvous();
    Rendezvous(const Rendezvous&) = delete;
    Rendezvous& operator=(const Rendezvous&) = delete;

    /// Starts sending `value` to key.dst_rank (this rank must be key.src_rank) and returns at
    /// once; the value is copied, so the caller may overwrite it.
    void send(const TransferKey& key, const Tensor& value);
    /// The value sent under `key` (this rank must be key.dst_rank), waiting for it up to
    /// `timeout_s` seconds (< 0: the communicator's collective timeout; 0: no limit). A timeout
    /// is a kiln::Error (kIOError) naming the key.
    Tensor recv(const TransferKey& key, double timeout_s = -1);
    /// The value sent under `key` if it has arrived (its header is there), else nothing; never
    /// waits for a transfer that has not started. For a receiver serving several peers in
    /// arrival order (an asynchronous parameter server, parameter_server.h).
    std::optional<Tensor> try_recv(const TransferKey& key);
    /// Sends started and not yet completed.
    size_t pending_sends();
    /// `check` runs while a recv waits (each poll after its first millisecond); what it throws
    /// ends the wait. A master watches its workers' error reports with it (master_dispatch.h).
    void set_wait_check(std::function<void()> check) { wait_check_ = std::move(check); }

private:
    struct PendingSend;
    void poll_sends();  // with mu_ held
    void progress_loop();
    /// One MPI_Improbe for `key`'s header; true with `msg` and `status` set when it is there.
    bool probe(const TransferKey& key, MPI_Message& msg, MPI_Status& status);
    /// Takes the probed header and its payload.
    Tensor take(const TransferKey& key, MPI_Message& msg, MPI_Status& status);

    Communicator& comm_;
    MPI_Comm p2p_ = MPI_COMM_NULL;
    int tag_ub_ = 32767;
    std::mutex mu_;  // guards sends_ and stop_
    std::condition_variable wake_;
    bool stop_ = false;
    std::vector<std::unique_ptr<PendingSend>> sends_;
    size_t posted_ = 0;  // sends ever posted (the progress thread's cue to poll fast again)
    std::thread progress_;  // advances pending sends while the caller runs kernels
    std::function<void()> wait_check_;
    bool in_wait_check_ = false;  // the check's own try_recv calls do not check again
};

}  // namespace kiln::distributed
