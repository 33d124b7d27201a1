// ModelStreamInfer: a bidirectional stream of inference requests. Each request read is queued on
// the server at once (the stream does not wait for earlier answers); each answer is written back
// when it comes, so responses may come in a different order than requests (as in Triton; clients
// match them by id). A request that fails is answered with error_message set, and the stream goes
// on. The stream finishes when the client has closed its side and every request is answered.
#pragma once

#include <mutex>
#include <set>

#include <grpcpp/grpcpp.h>

#include "serve/proto/grpc_service.grpc.pb.h"
#include "serve/server.h"

namespace kiln::serve {

class StreamInferReactor;

/// The open streams, so that stop() can end the idle ones (an open stream would otherwise hold
/// the server's shutdown until its client closes it).
class StreamRegistry {
public:
    using Reactor =
        grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>;
    /// A new stream's reactor (it deletes itself when done). After stop_all(), the stream is
    /// answered UNAVAILABLE at once.
    Reactor* open(Server& server);
    /// Streams stop reading: idle ones finish now, busy ones once their requests are answered.
    void stop_all();

private:
    friend class StreamInferReactor;
    void close(StreamInferReactor* stream);

    std::mutex mu_;
    std::set<StreamInferReactor*> open_;
    bool stopping_ = false;
};

}  // namespace kiln::serve
