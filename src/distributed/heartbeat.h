// The heartbeat that turns a lost rank into an exit instead of a hang.
//
// Open MPI does not notice a peer that stops answering (a process stopped or stuck; a killed
// one only when the launcher notices): a receive from it waits forever. A thread on every rank
// sends a small message to every peer each interval and polls its receives from them; a peer
// silent for longer than the timeout is declared lost, and the thread prints which rank was
// lost and aborts the job (MPI_Abort), whatever the main thread is doing (computing, or waiting
// in a collective). Polling on this thread also advances Open MPI's non-blocking transfers
// while the main thread computes (Open MPI makes no progress by itself).
//
// It is also the watchdog of the main thread's blocking MPI calls (watch()): a blocking
// collective cannot give up by itself, so the thread aborts the job, naming the call, when one
// has not returned by its deadline while every peer is alive.
#pragma once

#include <mpi.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kiln::distributed {

class Heartbeat {
public:
    /// Starts the thread on `comm` (a communicator of its own: its messages never match a
    /// collective's).
    Heartbeat(MPI_Comm comm, double interval_s, double timeout_s);
    /// Stops the thread and cancels its pending receives (after a barrier: no peer is lost).
    ~Heartbeat();
    Heartbeat(const Heartbeat&) = delete;
    Heartbeat& operator=(const Heartbeat&) = delete;

    /// A blocking call of `who` (this rank) doing `what` starts: unless unwatch(what) comes
    /// within `timeout_s` (0: never), the thread prints both and aborts the job. Both must live
    /// until unwatch(). Any number of threads may be watched at once.
    void watch(const std::string* who, const std::string* what, double timeout_s);
    void unwatch(const std::string* what);

private:
    void run();
    bool poll_receives(std::vector<double>& last_seen, double now);
    /// False after printing when the watched call is past its deadline.
    bool watched_call_in_time(double now);

    MPI_Comm comm_;
    int rank_ = 0, size_ = 1;
    double interval_s_, timeout_s_;
    std::vector<MPI_Request> recvs_, sends_;
    std::vector<int> recv_buf_, send_buf_;
    std::atomic<bool> stop_{false};
    struct Watched {
        const std::string* who;
        const std::string* what;
        double timeout_s, deadline;
    };
    std::mutex watch_mutex_;
    std::vector<Watched> watched_;     // the blocking calls under way
    std::atomic<int> watching_{0};     // watched_.size(), read without the lock
    std::thread thread_;
};

}  // namespace kiln::distributed
