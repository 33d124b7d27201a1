// ship_pipeline_stage, receive_pipeline_stage (pipeline_plan_shipping.h).
#include "distributed/pipeline_plan_shipping.h"

#include <cstdio>
#include <string>
#include <vector>

#include "distributed/rank_graph_shipping.h"
#include "support/error.h"

namespace kiln::distributed {
namespace {

TransferKey meta_key(int rank, const std::string& what) { return TransferKey{0, 1, rank, "stage:" + what, 0, 0, 0}; }

/// Length-prefixed fields ("5:hello"), so names may hold any byte.
class Writer {
public:
    void put(const std::string& s) {
        out_ += std::to_string(s.size());
        out_ += ':';
        out_ += s;
    }
    void put_int(int64_t v) { put(std::to_string(v)); }
    void put_double(double v) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%a", v);  // exact
        put(buf);
    }
    template <typename Names>
    void put_names(const Names& names) {
        put_int(static_cast<int64_t>(names.size()));
        for (const std::string& n : names) put(n);
    }
    void put_type(DType dtype, const Shape& shape) {
        put_int(static_cast<int64_t>(dtype));
        put_int(static_cast<int64_t>(shape.size()));
        for (int64_t d : shape) put_int(d);
    }
    const std::string& text() const { return out_; }

private:
    std::string out_;
};

class Reader {
public:
    Reader(std::string in, int rank) : in_(std::move(in)), rank_(rank) {}
    std::string get() {
        const size_t colon = in_.find(':', pos_);
        KILN_CHECK(colon != std::string::npos, kInvalidArgument)
            << "rank " << rank_ << ": the master's stage plan ends early (at byte " << pos_ << ")";
        const size_t n = std::stoull(in_.substr(pos_, colon - pos_));
        KILN_CHECK(colon + 1 + n <= in_.size(), kInvalidArgument)
            << "rank " << rank_ << ": a field of the master's stage plan runs past its end";
        std::string s = in_.substr(colon + 1, n);
        pos_ = colon + 1 + n;
        return s;
    }
    int64_t get_int() { return std::stoll(get()); }
    double get_double() { return std::strtod(get().c_str(), nullptr); }
    std::vector<std::string> get_names() {
        std::vector<std::string> v(static_cast<size_t>(get_int()));
        for (std::string& s : v) s = get();
        return v;
    }
    std::pair<DType, Shape> get_type() {
        const auto dtype = static_cast<DType>(get_int());
        Shape shape(static_cast<size_t>(get_int()));
        for (int64_t& d : shape) d = get_int();
        return {dtype, shape};
    }
    bool done() const { return pos_ == in_.size(); }

private:
    std::string in_;
    size_t pos_ = 0;
    int rank_;
};

void put_shared(Writer& w, const PipelinePlan& p) {
    w.put_int(static_cast<int64_t>(p.batch_inputs.size()));
    for (const TensorInfo& t : p.batch_inputs) {
        w.put(t.name);
        w.put_type(t.dtype, t.shape);
    }
    w.put_names(p.batched);
    w.put_names(p.params);
    w.put_int(static_cast<int64_t>(p.stage_params.size()));
    for (const std::vector<std::string>& s : p.stage_params) w.put_names(s);
    w.put_int(static_cast<int64_t>(p.param_types.size()));
    for (const auto& [name, type] : p.param_types) {
        w.put(name);
        w.put_type(type.first, type.second);
    }
    w.put(p.split);
    w.put(p.describe);
}

void get_shared(Reader& r, PipelinePlan& p) {
    p.batch_inputs.resize(static_cast<size_t>(r.get_int()));
    for (TensorInfo& t : p.batch_inputs) {
        t.name = r.get();
        auto [dtype, shape] = r.get_type();
        t.dtype = dtype;
        t.shape = shape;
        t.symbols.assign(shape.size(), "");
    }
    for (const std::string& n : r.get_names()) p.batched.insert(n);
    p.params = r.get_names();
    p.stage_params.resize(static_cast<size_t>(r.get_int()));
    for (std::vector<std::string>& s : p.stage_params) s = r.get_names();
    const int64_t types = r.get_int();
    for (int64_t i = 0; i < types; ++i) {
        std::string name = r.get();
        p.param_types[name] = r.get_type();
    }
    p.split = r.get();
    p.describe = r.get();
}

void put_stage(Writer& w, const PipelineStagePlan& s) {
    const PipelineStageGraph& g = s.graph;
    w.put_int(g.rank);
    w.put_int(g.computes_loss ? 1 : 0);
    w.put_names(g.params);
    w.put_int(static_cast<int64_t>(g.recv_keys.size()));
    for (const auto& [name, key] : g.recv_keys) {
        w.put(name);
        w.put(key);
    }
    w.put_int(static_cast<int64_t>(g.send_keys.size()));
    for (const std::vector<std::string>& keys : g.send_keys) w.put_names(keys);
    w.put_names(g.seed_inputs);
    w.put_names(g.forward_outputs);
    w.put_names(g.backward_outputs);
    w.put_double(g.estimated_seconds);
    w.put_names(s.apply.outputs);
    w.put_names(s.inputs);
    std::vector<std::string> initial;
    for (const auto& [name, t] : s.initial) initial.push_back(name);
    w.put_names(initial);
}

void get_stage(Reader& r, PipelineStagePlan& s) {
    PipelineStageGraph& g = s.graph;
    g.rank = static_cast<int>(r.get_int());
    g.computes_loss = r.get_int() != 0;
    g.params = r.get_names();
    const int64_t recvs = r.get_int();
    for (int64_t i = 0; i < recvs; ++i) {
        std::string name = r.get();
        g.recv_keys[name] = r.get();
    }
    g.send_keys.resize(static_cast<size_t>(r.get_int()));
    for (std::vector<std::string>& keys : g.send_keys) keys = r.get_names();
    g.seed_inputs = r.get_names();
    g.forward_outputs = r.get_names();
    g.backward_outputs = r.get_names();
    g.estimated_seconds = r.get_double();
    s.apply.outputs = r.get_names();
    for (const std::string& n : r.get_names()) s.inputs.insert(n);
    for (const std::string& n : r.get_names()) s.initial[n] = Tensor();  // filled by the caller
}

}  // namespace

void ship_pipeline_stage(Rendezvous& rv, PipelinePlan& plan, int rank) {
    PipelineStagePlan& s = plan.stages.at(static_cast<size_t>(rank));
    Writer w;
    put_shared(w, plan);
    put_stage(w, s);
    rv.send(meta_key(rank, "meta"), text_as_tensor(w.text()));
    if (!s.graph.computes_loss) ship_graph(rv, rank, std::move(s.graph.forward), "forward");
    ship_graph(rv, rank, std::move(s.graph.backward), "backward");
    ship_graph(rv, rank, std::move(s.graph.eval), "eval");
    if (!s.graph.params.empty()) ship_graph(rv, rank, std::move(s.apply.graph), "apply");
    for (const auto& [name, t] : s.initial) rv.send(meta_key(rank, "init:" + name), t);
}

PipelinePlan receive_pipeline_stage(Rendezvous& rv, int rank, int num_ranks) {
    PipelinePlan plan;
    Reader r(tensor_as_text(rv.recv(meta_key(rank, "meta"), 0)), rank);
    get_shared(r, plan);
    plan.stages.resize(static_cast<size_t>(num_ranks));
    PipelineStagePlan& s = plan.stages.at(static_cast<size_t>(rank));
    get_stage(r, s);
    KILN_CHECK(r.done() && s.graph.rank == rank, kInvalidArgument)
        << "rank " << rank << ": the master's stage plan is for rank " << s.graph.rank << " or has trailing bytes";
    if (!s.graph.computes_loss) s.graph.forward = receive_graph(rv, rank, "forward");
    s.graph.backward = receive_graph(rv, rank, "backward");
    s.graph.eval = receive_graph(rv, rank, "eval");
    if (!s.graph.params.empty()) s.apply.graph = receive_graph(rv, rank, "apply");
    for (auto& [name, t] : s.initial) t = rv.recv(meta_key(rank, "init:" + name), 0);
    return plan;
}

}  // namespace kiln::distributed
