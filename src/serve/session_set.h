// SessionSet: the compiled sessions of one model version, one per specialization.
//
// A Kiln Session holds one specialization (the values of the model's symbolic input
// dimensions) at a time and recompiles, blocking its runs, when a run brings another. A server
// that batches sees several batch sizes, so it keeps a Session per binding of the symbols
// (SessionOptions::dims), compiled once: the sizes it will use are compiled at load (warm), any
// other on first use. Past kMaxSessions bindings the rest share one unbound session (correct,
// recompiling when the shape changes). Each Session serves concurrent run() calls.
#pragma once

#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/session.h"

namespace kiln::serve {

class SessionSet {
public:
    static constexpr size_t kMaxSessions = 16;
    using Dims = std::map<std::string, int64_t>;

    /// `probe`: a session loaded without dims (its inputs name the symbols); it serves a model
    /// without symbols directly and is the shared fallback otherwise.
    SessionSet(std::string path, SessionOptions options, std::shared_ptr<Session> probe);

    const std::vector<TensorInfo>& inputs() const { return probe_->inputs(); }
    const std::vector<TensorInfo>& outputs() const { return probe_->outputs(); }
    /// The symbol binding of these input shapes (model input order).
    Dims bind(const std::vector<Shape>& shapes) const;
    /// The session for a binding, compiled now if needed (throws the compile's kiln::Error).
    std::shared_ptr<Session> get(const Dims& dims);
    size_t size() const;

private:
    std::string path_;
    SessionOptions options_;
    std::shared_ptr<Session> probe_;
    bool symbolic_ = false;
    mutable std::mutex mu_;
    std::map<Dims, std::shared_future<std::shared_ptr<Session>>> sessions_;
};

}  // namespace kiln::serve
