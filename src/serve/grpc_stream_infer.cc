#include "serve/grpc_stream_infer.h"

#include <deque>
#include <utility>
#include <vector>

#include "serve/grpc_infer_convert.h"

namespace kiln::serve {

using inference::ModelInferRequest;
using inference::ModelStreamInferResponse;

// State machine, all under mu_: one read and at most one write outstanding at a time (gRPC's
// rule); answers queue in `queue_` while a write is in flight. Finish is called exactly once,
// when no more reads will come (client closed, or stopping), no request is pending on the server
// (its callback holds `this`) and every answer is written (or the client is gone).
class StreamInferReactor final : public StreamRegistry::Reactor {
public:
    StreamInferReactor(Server& server, StreamRegistry* registry)
        : server_(server), registry_(registry) {
        if (registry_ == nullptr) {
            finished_ = true;
            Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down"));
        }
    }

    /// Starts the first read (after the registry has recorded the stream).
    void start() { read_next(); }

    void OnReadDone(bool ok) override {
        if (!ok) {
            std::unique_lock lock(mu_);
            reads_done_ = true;
            pump(lock);
            return;
        }
        InferRequest request;
        request.arrival = std::chrono::steady_clock::now();
        Failure bad = infer_request_from_grpc(request_, request);
        {
            std::unique_lock lock(mu_);
            if (stopping_) {
                // stop_all() ran while this read was in flight: answer it and read no more.
                reads_done_ = true;
                bad = {Code::kUnavailable, "the server is shutting down"};
            }
            if (!bad.ok()) {
                bool last = reads_done_;
                queue_.push_back(error_response(request_.model_name(), request_.model_version(),
                                                 request_.id(), bad));
                pump(lock);
                if (last) return;
            } else {
                ++pending_;
            }
        }
        if (bad.ok()) {
            // A failure carries no response: its error names the request from here.
            server_.infer(std::move(request), [this, model = request_.model_name(),
                                               version = request_.model_version(),
                                               id = request_.id()](Failure failure,
                                                                   InferResponse result) {
                ModelStreamInferResponse m;
                if (failure.ok()) failure = infer_response_to_grpc(result, *m.mutable_infer_response());
                if (!failure.ok()) m = error_response(model, version, id, failure);
                std::unique_lock lock(mu_);
                --pending_;
                queue_.push_back(std::move(m));
                pump(lock);
            });
        }
        read_next();
    }

    void OnWriteDone(bool ok) override {
        std::unique_lock lock(mu_);
        writing_ = false;
        if (!ok) client_gone_ = true;
        pump(lock);
    }

    void OnDone() override {
        if (registry_ != nullptr) registry_->close(this);
        delete this;
    }

    /// Called by StreamRegistry::stop_all under its lock. True when the stream is idle and the
    /// caller must Finish it (after releasing the registry's lock).
    bool stop() {
        std::lock_guard lock(mu_);
        stopping_ = true;
        if (finished_ || writing_ || pending_ > 0 || !queue_.empty()) return false;
        finished_ = true;
        return true;
    }

    void finish_stopped() {
        Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down"));
    }

private:
    // The next read, unless the stream is stopping or finished. Under mu_ so that Finish (from
    // stop_all or pump) cannot come between the check and the read.
    void read_next() {
        std::unique_lock lock(mu_);
        if (finished_) return;
        if (stopping_) {
            reads_done_ = true;
            pump(lock);
            return;
        }
        StartRead(&request_);
    }

    static ModelStreamInferResponse error_response(const std::string& model,
                                                   const std::string& version,
                                                   const std::string& id, const Failure& failure) {
        ModelStreamInferResponse m;
        m.set_error_message(failure.message);
        m.mutable_infer_response()->set_model_name(model);
        m.mutable_infer_response()->set_model_version(version);
        m.mutable_infer_response()->set_id(id);
        return m;
    }

    // Starts the next write, or finishes the stream when nothing more can come. Releases `lock`
    // before calling into gRPC.
    void pump(std::unique_lock<std::mutex>& lock) {
        if (writing_ || finished_) return;
        if (client_gone_) queue_.clear();
        if (!queue_.empty()) {
            writing_ = true;
            current_ = std::move(queue_.front());
            queue_.pop_front();
            lock.unlock();
            StartWrite(&current_);
            return;
        }
        if ((reads_done_ || stopping_) && pending_ == 0) {
            finished_ = true;
            lock.unlock();
            Finish(grpc::Status::OK);
        }
    }

    Server& server_;
    StreamRegistry* registry_;  // null: rejected at open (not registered)
    ModelInferRequest request_;  // the read buffer; converted before the next read reuses it
    ModelStreamInferResponse current_;  // the write in flight

    std::mutex mu_;
    std::deque<ModelStreamInferResponse> queue_;
    int pending_ = 0;  // requests on the server, not answered yet
    bool writing_ = false;
    bool reads_done_ = false;
    bool stopping_ = false;
    bool client_gone_ = false;
    bool finished_ = false;
};

StreamRegistry::Reactor* StreamRegistry::open(Server& server) {
    std::lock_guard lock(mu_);
    if (stopping_) return new StreamInferReactor(server, nullptr);
    auto* stream = new StreamInferReactor(server, this);
    open_.insert(stream);
    stream->start();  // under mu_: stop_all cannot finish the stream before it is reading
    return stream;
}

void StreamRegistry::stop_all() {
    std::vector<StreamInferReactor*> idle;
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
        for (StreamInferReactor* s : open_) {
            if (s->stop()) idle.push_back(s);
        }
    }
    // Not deleted meanwhile: a stream is deleted only after its Finish, which these await.
    for (StreamInferReactor* s : idle) s->finish_stopped();
}

void StreamRegistry::close(StreamInferReactor* stream) {
    std::lock_guard lock(mu_);
    open_.erase(stream);
}

}  // namespace kiln::serve
