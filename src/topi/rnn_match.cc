#include "topi/rnn_match.h"

#include <algorithm>
#include <cstdio>

#include "op/defs/recurrent.h"

namespace kiln::topi {
namespace {

std::string num(double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", x);
    return buf;
}

int index_of(const std::vector<ir::Value*>& vs, const ir::Value* v) {
    auto it = std::find(vs.begin(), vs.end(), v);
    return it == vs.end() ? -1 : static_cast<int>(it - vs.begin());
}

}  // namespace

std::optional<ExternChoice> match_rnn(const std::vector<ir::Node*>& nodes, const std::vector<ir::Value*>& inputs,
                                      const std::vector<ir::Value*>& outputs) {
    if (nodes.size() != 1) return std::nullopt;
    const ir::Node& n = *nodes[0];
    if (n.op() != "RNN" && n.op() != "GRU" && n.op() != "LSTM") return std::nullopt;
    // X, sequence_lens, the initial states and the outputs may have a symbolic sequence length
    // and batch (a symbolic compile: the runtime sizes the kernel per run, extern_shape_params.h);
    // W, R, B and the peepholes are static.
    for (size_t i = 0; i < n.num_inputs(); ++i) {
        const ir::Value* v = n.input(i);
        const bool may_be_symbolic = i == 0 || i == 4 || i == 5 || i == 6;
        if (v && ((!may_be_symbolic && !v->type().is_static()) ||
                  (v->type().dtype != DType::kFloat32 && v->type().dtype != DType::kInt32)))
            return std::nullopt;
    }
    if (n.input(0)->type().dtype != DType::kFloat32 || n.input(0)->type().rank() != 3 ||
        !n.input(0)->type().shape[2].is_static())
        return std::nullopt;
    const op::RnnConfig c = op::rnn_config(n);
    std::vector<std::pair<std::string, std::string>> p;
    p.push_back({"cell", n.op() == "LSTM" ? "lstm" : n.op() == "GRU" ? "gru" : "rnn"});
    p.push_back({"dirs", std::to_string(c.dirs)});
    std::string rev, acts;
    for (bool r : c.reverse) rev += (rev.empty() ? "" : ",") + std::string(r ? "1" : "0");
    for (const auto& dir : c.acts)
        for (const op::RnnActivation& a : dir) acts += (acts.empty() ? "" : ",") + a.name + ":" + num(a.alpha) + ":" + num(a.beta);
    p.push_back({"reverse", rev});
    p.push_back({"hidden", std::to_string(c.hidden)});
    p.push_back({"input", std::to_string(c.input)});
    p.push_back({"seq", std::to_string(c.seq.is_static() ? c.seq.value : 0)});  // 0: the run's (symbolic)
    p.push_back({"batch", std::to_string(c.batch.is_static() ? c.batch.value : 0)});
    p.push_back({"layout", c.layout1 ? "1" : "0"});
    p.push_back({"acts", acts});
    if (c.has_clip) p.push_back({"clip", num(c.clip)});
    p.push_back({"input_forget", c.input_forget ? "1" : "0"});
    p.push_back({"lbr", c.linear_before_reset ? "1" : "0"});
    static const char* const kIn[] = {"x", "w", "r", "b", "lens", "h0", "c0", "p"};
    for (size_t i = 0; i < n.num_inputs() && i < 8; ++i) {
        const ir::Value* v = n.input(i);
        if (!v) continue;
        const int a = index_of(inputs, v);
        if (a < 0) return std::nullopt;
        p.push_back({kIn[i], std::to_string(a)});
    }
    static const char* const kOut[] = {"y", "yh", "yc"};
    for (size_t i = 0; i < n.num_outputs() && i < 3; ++i) {
        const int a = index_of(outputs, n.output(i));
        if (a >= 0) p.push_back({kOut[i], std::to_string(inputs.size() + static_cast<size_t>(a))});
    }
    return ExternChoice{"kiln_rnn", std::move(p)};
}

}  // namespace kiln::topi
