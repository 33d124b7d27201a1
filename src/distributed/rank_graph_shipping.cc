#include "distributed/rank_graph_shipping.h"

#include <cstring>
#include <string>
#include <vector>

#include "ir/parser.h"
#include "ir/printer.h"
#include "kiln/error.h"

namespace kiln::distributed {
namespace {

/// The keys of one shipment under `label`: "LABEL:graph" (the text), "LABEL:inputs" (how many of
/// the text's graph inputs are the rank's own; the rest are shipped constants, in order), and
/// "LABEL:const:NAME" ("const:NAME" for the label "plan", a rank graph of inference).
TransferKey shipping_key(int rank, const std::string& label, const std::string& what) {
    const bool constant = what.rfind("const:", 0) == 0;
    return TransferKey{0, 1, rank, constant && label == "plan" ? what : label + ":" + what, 0, 0, /*step=*/0};
}

bool ships_apart(const ir::Value& c) {
    return c.constant().numel() > kInlineElements && c.constant().dtype() != DType::kString;
}

}  // namespace

Tensor text_as_tensor(const std::string& text) {
    Tensor t(DType::kUInt8, {static_cast<int64_t>(text.size())});
    if (!text.empty()) std::memcpy(t.data(), text.data(), text.size());
    return t;
}

std::string tensor_as_text(const Tensor& t) {
    KILN_CHECK(t.dtype() == DType::kUInt8 && t.shape().size() == 1, kInvalidArgument)
        << "text over the rendezvous must be u8[n], got " << dtype_name(t.dtype()) << " of rank " << t.shape().size();
    return std::string(static_cast<const char*>(t.data()), t.nbytes());
}

void ship_rank_graph(Rendezvous& rv, RankGraph rg) { ship_graph(rv, rg.rank, std::move(rg.graph), "plan"); }

RankGraph receive_rank_graph(Rendezvous& rv, int rank) {
    RankGraph rg;
    rg.rank = rank;
    rg.graph = receive_graph(rv, rank, "plan");
    return rg;
}

void ship_graph(Rendezvous& rv, int rank, ir::Graph g, const std::string& label) {
    const int64_t own_inputs = static_cast<int64_t>(g.inputs().size());
    std::vector<std::pair<std::string, Tensor>> apart;
    for (ir::Value* c : g.constants()) {
        if (!ships_apart(*c)) continue;
        const std::string name = c->name();
        Tensor data = c->constant();
        ir::Value* in = g.add_input(g.fresh_name(name + ".shipped"), c->type());
        g.replace_all_uses(c, in);
        g.erase_constant(c);
        in->set_name(name);
        apart.emplace_back(name, std::move(data));
    }
    Tensor count(DType::kInt64, {1});
    count.set_i64(0, own_inputs);
    rv.send(shipping_key(rank, label, "inputs"), count);
    rv.send(shipping_key(rank, label, "graph"), text_as_tensor(ir::print_graph(g)));
    for (const auto& [name, data] : apart) rv.send(shipping_key(rank, label, "const:" + name), data);
}

ir::Graph receive_graph(Rendezvous& rv, int rank, const std::string& label) {
    const int64_t own_inputs = rv.recv(shipping_key(rank, label, "inputs"), 0).get_i64(0);
    ir::Graph g = ir::parse_graph(tensor_as_text(rv.recv(shipping_key(rank, label, "graph"), 0)));
    const std::vector<ir::Value*> inputs = g.inputs();
    KILN_CHECK(own_inputs >= 0 && own_inputs <= static_cast<int64_t>(inputs.size()), kInvalidArgument)
        << "rank " << rank << ": the shipped graph '" << label << "' has " << inputs.size()
        << " inputs, the master said " << own_inputs << " are the rank's own";
    for (size_t i = static_cast<size_t>(own_inputs); i < inputs.size(); ++i)
        g.freeze_input(inputs[i], rv.recv(shipping_key(rank, label, "const:" + inputs[i]->name()), 0));
    return g;
}

}  // namespace kiln::distributed
