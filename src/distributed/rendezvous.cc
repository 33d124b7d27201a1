// Keyed point-to-point transfers over MPI (rendezvous.h). The header is text: "key\ndtype\nshape"
// with the shape as comma-separated dims, small next to any payload worth sending.
#include "distributed/rendezvous.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <sstream>
#include <thread>

#include "distributed/reduce_op.h"
#include "kiln/error.h"

namespace kiln::distributed {
namespace {

std::string header_of(const TransferKey& key, const Tensor& t) {
    std::string dims;
    for (int64_t d : t.shape()) dims += (dims.empty() ? "" : ",") + std::to_string(d);
    return key.to_string() + "\n" + dtype_name(t.dtype()) + "\n" + dims;
}

/// Parses header_of's text; `got_key` gets the sender's key text.
Tensor tensor_of_header(const std::string& header, std::string& got_key) {
    std::istringstream in(header);
    std::string dtype, dims;
    std::getline(in, got_key);
    std::getline(in, dtype);
    std::getline(in, dims);
    std::optional<DType> dt = dtype_from_name(dtype);
    KILN_CHECK(dt.has_value(), kInternal) << "bug in Kiln: transfer '" << got_key << "' has dtype '" << dtype << "'";
    Shape shape;
    std::istringstream ds(dims);
    for (std::string d; std::getline(ds, d, ',');) shape.push_back(std::stoll(d));
    return Tensor(*dt, shape);
}

}  // namespace

struct Rendezvous::PendingSend {
    std::string header;
    Tensor payload;
    MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
};

Rendezvous::Rendezvous(Communicator& comm) : comm_(comm) {
    comm_.check(MPI_Comm_dup(comm_.comm(), &p2p_), "creating the rendezvous communicator");
    MPI_Comm_set_errhandler(p2p_, MPI_ERRORS_RETURN);
    int* ub = nullptr;
    int found = 0;
    MPI_Comm_get_attr(p2p_, MPI_TAG_UB, &ub, &found);
    if (found && ub) tag_ub_ = *ub;
    progress_ = std::thread([this] { progress_loop(); });
}

Rendezvous::~Rendezvous() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    wake_.notify_one();
    progress_.join();
    // Unwinding from an error, a peer may never receive what is pending (a master whose worker
    // failed): waiting would hold back the abort that ends the job. The sends are abandoned.
    if (std::uncaught_exceptions() > 0) return;
    int finalized = 0;  // an owner outliving MPI (a Python object collected after the exit hook)
    MPI_Finalized(&finalized);
    if (finalized) return;
    for (auto& s : sends_) MPI_Waitall(2, s->reqs, MPI_STATUSES_IGNORE);
    MPI_Comm_free(&p2p_);
}

// Open MPI moves a large message only while one of its calls runs on the sending side: without
// this thread a payload sent before a long kernel would wait for that kernel to end, and a
// pipeline's stages would run one after the other. It polls while sends are pending and sleeps
// otherwise. The interval backs off from 50 us to 2 ms while polls complete nothing (a send
// waits for its receiver, which computes): a wake every 50 us for the whole of a stage's
// compute took a quarter of a 2-rank BERT pipeline's speed on 2 cores (docs/distributed.md).
// A new send or a completed one starts again at 50 us.
void Rendezvous::progress_loop() {
    constexpr int kFirstUs = 50, kLastUs = 2000;
    int interval_us = kFirstUs;
    size_t posted_seen = 0;
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
        if (sends_.empty()) {
            wake_.wait(lock);
            interval_us = kFirstUs;
            continue;
        }
        const size_t before = sends_.size();
        try {
            poll_sends();
        } catch (const Error&) {
            // The next send, pending_sends() or the destructor reports it on the caller's thread.
        }
        const bool news = sends_.size() < before || posted_ != posted_seen;
        posted_seen = posted_;
        interval_us = news ? kFirstUs : std::min(2 * interval_us, kLastUs);
        wake_.wait_for(lock, std::chrono::microseconds(interval_us), [&] { return stop_ || posted_ != posted_seen; });
    }
}

void Rendezvous::poll_sends() {
    for (size_t i = 0; i < sends_.size();) {
        int done = 0;
        comm_.check(MPI_Testall(2, sends_[i]->reqs, &done, MPI_STATUSES_IGNORE), "a rendezvous send");
        if (done) {
            sends_.erase(sends_.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
            ++i;
        }
    }
}

size_t Rendezvous::pending_sends() {
    std::lock_guard<std::mutex> lock(mu_);
    poll_sends();
    return sends_.size();
}

void Rendezvous::send(const TransferKey& key, const Tensor& value) {
    KILN_CHECK(key.src_rank == comm_.rank(), kInvalidArgument)
        << "send of " << key.to_string() << " on rank " << comm_.rank() << ": the key's source is rank " << key.src_rank;
    KILN_CHECK(key.dst_rank >= 0 && key.dst_rank < comm_.size() && key.dst_rank != key.src_rank, kInvalidArgument)
        << "send of " << key.to_string() << ": destination rank " << key.dst_rank << " is not another rank of "
        << comm_.size();
    MPI_Datatype type = mpi_datatype(value.dtype(), key.tensor);
    auto s = std::make_unique<PendingSend>();
    s->header = header_of(key, value);
    s->payload = value.clone();
    const int tag = key.tag(tag_ub_);
    const std::string what = "send of " + key.to_string();
    comm_.check(MPI_Isend(s->header.data(), static_cast<int>(s->header.size()), MPI_CHAR, key.dst_rank, tag, p2p_, &s->reqs[0]),
                what);
    comm_.check(MPI_Isend(s->payload.data(), static_cast<int>(s->payload.numel()), type, key.dst_rank, tag, p2p_,
                          &s->reqs[1]),
                what);
    {
        std::lock_guard<std::mutex> lock(mu_);
        sends_.push_back(std::move(s));
        ++posted_;
        poll_sends();
    }
    wake_.notify_one();
}

bool Rendezvous::probe(const TransferKey& key, MPI_Message& msg, MPI_Status& status) {
    int found = 0;
    comm_.check(MPI_Improbe(key.src_rank, key.tag(tag_ub_), p2p_, &found, &msg, &status), "recv of " + key.to_string());
    return found != 0;
}

Tensor Rendezvous::recv(const TransferKey& key, double timeout_s) {
    KILN_CHECK(key.dst_rank == comm_.rank(), kInvalidArgument)
        << "recv of " << key.to_string() << " on rank " << comm_.rank() << ": the key's destination is rank " << key.dst_rank;
    const double limit = timeout_s < 0 ? comm_.options().collective_timeout_s : timeout_s;
    const auto start = std::chrono::steady_clock::now();
    // Probe (and keep our own sends moving) until the header is there.
    MPI_Message msg = MPI_MESSAGE_NULL;
    MPI_Status status;
    while (!probe(key, msg, status)) {
        {
            std::lock_guard<std::mutex> lock(mu_);  // the progress thread polls them too
            poll_sends();
        }
        double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        KILN_CHECK(limit <= 0 || waited <= limit, kIOError)
            << "rank " << comm_.rank() << ": recv of " << key.to_string() << " did not arrive within " << limit
            << " s while rank " << key.src_rank << " is alive: it never sent it (a different key or step?)";
        if (waited > 1e-3 && wait_check_ && !in_wait_check_) {
            in_wait_check_ = true;
            try {
                wait_check_();
            } catch (...) {
                in_wait_check_ = false;
                throw;
            }
            in_wait_check_ = false;
        }
        if (waited > 20e-3) std::this_thread::sleep_for(std::chrono::microseconds(100));
        else if (waited > 2e-3) sched_yield();
    }
    return take(key, msg, status);
}

std::optional<Tensor> Rendezvous::try_recv(const TransferKey& key) {
    KILN_CHECK(key.dst_rank == comm_.rank(), kInvalidArgument)
        << "recv of " << key.to_string() << " on rank " << comm_.rank() << ": the key's destination is rank " << key.dst_rank;
    MPI_Message msg = MPI_MESSAGE_NULL;
    MPI_Status status;
    if (!probe(key, msg, status)) return std::nullopt;
    return take(key, msg, status);
}

Tensor Rendezvous::take(const TransferKey& key, MPI_Message& msg, MPI_Status& status) {
    const int tag = key.tag(tag_ub_);
    const std::string what = "recv of " + key.to_string();
    int bytes = 0;
    MPI_Get_count(&status, MPI_CHAR, &bytes);
    std::string header(static_cast<size_t>(bytes), '\0');
    comm_.check(MPI_Mrecv(header.data(), bytes, MPI_CHAR, &msg, MPI_STATUS_IGNORE), what);
    std::string got_key;
    Tensor out = tensor_of_header(header, got_key);
    // The payload follows the header on the same tag (MPI keeps their order); take it even on a
    // mismatch, so the stream stays aligned, then report.
    std::vector<MPI_Request> req(1);
    comm_.check(MPI_Irecv(out.data(), static_cast<int>(out.numel()), mpi_datatype(out.dtype(), got_key), key.src_rank, tag,
                          p2p_, &req[0]),
                what);
    comm_.wait_all(req, what);
    KILN_CHECK(got_key == key.to_string(), kInternal)
        << "bug in Kiln: rendezvous tag collision: " << what << " received " << got_key << " (same tag " << tag << ")";
    return out;
}

}  // namespace kiln::distributed
