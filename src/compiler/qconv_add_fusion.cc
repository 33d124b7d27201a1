#include "compiler/qconv_add_fusion.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "pass/rewrite.h"
#include "runtime/extern_kernel.h"
#include "topi/dnnl_int8_match.h"

namespace kiln::compiler {
namespace {

/// The lone QLinearConv (a unit of its own) whose output only `dq` reads, or nullptr.
ir::Node* lone_conv_feeding(const ir::Graph& g, const ir::Node* dq) {
    if (dq->op() != "DequantizeLinear") return nullptr;
    ir::Node* conv = dq->input(0)->producer();
    if (!conv || conv->op() != "QLinearConv" || conv->group() >= 0 || conv->output(0)->users().size() != 1 ||
        pass::is_graph_output(g, conv->output(0)))
        return nullptr;
    return conv;
}

/// `add` with `conv` in front: its nodes, its inputs in first-use order, its outputs.
KernelUnit merged(const KernelUnit& add, ir::Node* conv) {
    KernelUnit u;
    u.nodes.push_back(conv);
    u.nodes.insert(u.nodes.end(), add.nodes.begin(), add.nodes.end());
    for (ir::Node* n : u.nodes)
        for (ir::Value* in : n->inputs()) {
            if (!in || in == conv->output(0) || (in->producer() && std::find(u.nodes.begin(), u.nodes.end(), in->producer()) != u.nodes.end()))
                continue;
            if (std::find(u.inputs.begin(), u.inputs.end(), in) == u.inputs.end()) u.inputs.push_back(in);
        }
    u.outputs = add.outputs;
    return u;
}

}  // namespace

void fuse_qconv_residual_adds(ir::Graph& g, KernelSource source, int threads) {
    if (!runtime::have_dnnl() || source == KernelSource::kGenerated) return;
    if (const char* e = std::getenv("KILN_INT8_FUSE_ADD"); e && std::string(e) == "0") return;  // A/B: kiln_qadd
    static const te::KnobValues kUntuned;
    const std::vector<ir::Node*> order = g.nodes();
    auto position = [&](const ir::Node* n) { return std::find(order.begin(), order.end(), n) - order.begin(); };
    for (const KernelUnit& unit : partition_kernels(g)) {
        if (unit.nodes.size() != 4 || unit.nodes.front()->group() < 0) continue;
        std::optional<topi::ExternChoice> add = topi::match_qadd(unit.nodes, unit.inputs, unit.outputs);
        const std::pair<std::string, std::string> q8_out = {"out", "q8"};
        if (!add || std::find(add->params.begin(), add->params.end(), q8_out) == add->params.end()) continue;
        ir::Node* conv = nullptr;  // the later of the (at most two) convs feeding the add
        for (const ir::Node* n : unit.nodes)
            if (ir::Node* c = lone_conv_feeding(g, n); c && (!conv || position(c) > position(conv))) conv = c;
        if (!conv) continue;
        std::optional<topi::ExternChoice> c = extern_choice(merged(unit, conv), source, kUntuned, threads);
        if (c && c->name == "dnnl_qconv") conv->set_group(unit.nodes.front()->group());
    }
}

}  // namespace kiln::compiler
