// The heartbeat thread (heartbeat.h). Messages carry a counter only: arrival is what counts.
// A tick every 10 ms polls the receives (cheap; keeps transfers advancing); beats go out every
// interval.
#include "distributed/heartbeat.h"

#include <chrono>
#include <cstdio>

namespace kiln::distributed {
namespace {

constexpr int kTag = 7;
constexpr auto kTick = std::chrono::milliseconds(10);

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

Heartbeat::Heartbeat(MPI_Comm comm, double interval_s, double timeout_s)
    : comm_(comm), interval_s_(interval_s), timeout_s_(timeout_s) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    recvs_.assign(size_, MPI_REQUEST_NULL);
    sends_.assign(size_, MPI_REQUEST_NULL);
    recv_buf_.assign(size_, 0);
    send_buf_.assign(size_, 0);
    for (int p = 0; p < size_; ++p)
        if (p != rank_) MPI_Irecv(&recv_buf_[p], 1, MPI_INT, p, kTag, comm_, &recvs_[p]);
    if (size_ > 1) thread_ = std::thread([this] { run(); });
}

Heartbeat::~Heartbeat() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (int p = 0; p < size_; ++p) {
        if (recvs_[p] != MPI_REQUEST_NULL) {
            MPI_Cancel(&recvs_[p]);
            MPI_Wait(&recvs_[p], MPI_STATUS_IGNORE);
        }
        // Beats are eager (a few bytes): their sends complete locally.
        if (sends_[p] != MPI_REQUEST_NULL) MPI_Wait(&sends_[p], MPI_STATUS_IGNORE);
    }
}

void Heartbeat::watch(const std::string* who, const std::string* what, double timeout_s) {
    if (timeout_s <= 0) return;
    std::lock_guard<std::mutex> lock(watch_mutex_);
    watched_.push_back({who, what, timeout_s, now_s() + timeout_s});
    watching_.store(static_cast<int>(watched_.size()), std::memory_order_release);
}

void Heartbeat::unwatch(const std::string* what) {
    if (watching_.load(std::memory_order_acquire) == 0) return;
    std::lock_guard<std::mutex> lock(watch_mutex_);
    for (size_t i = 0; i < watched_.size(); ++i)
        if (watched_[i].what == what) {
            watched_.erase(watched_.begin() + static_cast<std::ptrdiff_t>(i));
            break;
        }
    watching_.store(static_cast<int>(watched_.size()), std::memory_order_release);
}

bool Heartbeat::watched_call_in_time(double now) {
    if (watching_.load(std::memory_order_acquire) == 0) return true;
    std::lock_guard<std::mutex> lock(watch_mutex_);
    for (const Watched& w : watched_) {
        if (now <= w.deadline) continue;
        std::fprintf(stderr,
                     "kiln distributed: %s: %s did not complete within %.0f s while every rank's heartbeat is alive: "
                     "another rank is not taking part (a different number of steps or collectives?); "
                     "KILN_DIST_TIMEOUT sets the limit; aborting the job\n",
                     w.who->c_str(), w.what->c_str(), w.timeout_s);
        return false;
    }
    return true;
}

/// Takes every beat that arrived; false after printing when a receive failed (the peer's
/// connection broke: that peer is lost too).
bool Heartbeat::poll_receives(std::vector<double>& last_seen, double now) {
    for (int p = 0; p < size_; ++p) {
        if (p == rank_) continue;
        for (;;) {
            int done = 0;
            int rc = MPI_Test(&recvs_[p], &done, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS) {
                std::fprintf(stderr,
                             "kiln distributed: rank %d lost rank %d: its heartbeat connection failed (MPI error %d); "
                             "aborting the job\n",
                             rank_, p, rc);
                return false;
            }
            if (!done) break;
            last_seen[p] = now;
            MPI_Irecv(&recv_buf_[p], 1, MPI_INT, p, kTag, comm_, &recvs_[p]);
        }
    }
    return true;
}

void Heartbeat::run() {
    std::vector<double> last_seen(size_, now_s());
    double next_beat = 0;
    int beat = 0;
    while (!stop_) {
        double now = now_s();
        if (now >= next_beat) {
            ++beat;
            for (int p = 0; p < size_; ++p) {
                if (p == rank_) continue;
                int done = 1;
                if (sends_[p] != MPI_REQUEST_NULL) MPI_Test(&sends_[p], &done, MPI_STATUS_IGNORE);
                if (!done) continue;  // the last beat is still in flight: do not pile up more
                send_buf_[p] = beat;
                MPI_Isend(&send_buf_[p], 1, MPI_INT, p, kTag, comm_, &sends_[p]);
            }
            next_beat = now + interval_s_;
        }
        bool ok = poll_receives(last_seen, now);
        for (int p = 0; ok && p < size_; ++p) {
            if (p == rank_ || now - last_seen[p] <= timeout_s_) continue;
            std::fprintf(stderr,
                         "kiln distributed: rank %d lost rank %d: no heartbeat for %.1f s (killed, stopped or hung); "
                         "aborting the job\n",
                         rank_, p, now - last_seen[p]);
            ok = false;
        }
        if (ok) ok = watched_call_in_time(now);
        if (!ok) {
            std::fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        std::this_thread::sleep_for(kTick);
    }
}

}  // namespace kiln::distributed
