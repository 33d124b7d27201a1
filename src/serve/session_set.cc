// Sessions per specialization (session_set.h).
#include "serve/session_set.h"

namespace kiln::serve {

SessionSet::SessionSet(std::string path, SessionOptions options, std::shared_ptr<Session> probe)
    : path_(std::move(path)), options_(std::move(options)), probe_(std::move(probe)) {
    for (const TensorInfo& t : probe_->inputs())
        for (const std::string& s : t.symbols) symbolic_ = symbolic_ || !s.empty();
}

SessionSet::Dims SessionSet::bind(const std::vector<Shape>& shapes) const {
    Dims dims;
    const auto& infos = probe_->inputs();
    for (size_t i = 0; i < infos.size() && i < shapes.size(); ++i)
        for (size_t d = 0; d < infos[i].symbols.size() && d < shapes[i].size(); ++d)
            if (!infos[i].symbols[d].empty()) dims.emplace(infos[i].symbols[d], shapes[i][d]);
    return dims;
}

std::shared_ptr<Session> SessionSet::get(const Dims& dims) {
    if (!symbolic_) return probe_;
    std::promise<std::shared_ptr<Session>> compiling;
    std::shared_future<std::shared_ptr<Session>> session;
    bool mine = false;
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = sessions_.find(dims);
        if (it != sessions_.end()) {
            session = it->second;
        } else if (sessions_.size() >= kMaxSessions) {
            return probe_;
        } else {
            session = compiling.get_future().share();
            sessions_.emplace(dims, session);
            mine = true;
        }
    }
    if (!mine) return session.get();  // compiled, or being compiled by another caller
    try {
        SessionOptions opts = options_;
        opts.dims = dims;
        compiling.set_value(std::shared_ptr<Session>(Session::load(path_, opts)));
    } catch (...) {
        compiling.set_exception(std::current_exception());
        std::lock_guard<std::mutex> lock(mu_);
        sessions_.erase(dims);  // a later request tries again
    }
    return session.get();
}

size_t SessionSet::size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return sessions_.size();
}

}  // namespace kiln::serve
