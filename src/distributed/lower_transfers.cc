#include "distributed/lower_transfers.h"

#include <algorithm>
#include <map>

#include "support/error.h"

namespace kiln::distributed {

LoweredRank lower_transfers(ir::Graph g) {
    LoweredRank l;
    l.model_outputs = g.outputs().size();
    l.output_keys.resize(l.model_outputs);
    l.input_keys.assign(g.inputs().size(), "");
    std::vector<ir::Node*> recvs, sends;
    for (ir::Node* n : g.nodes()) {
        if (n->op() == "KilnRecv") recvs.push_back(n);
        if (n->op() == "KilnSend") sends.push_back(n);
    }
    for (ir::Node* n : recvs) {
        ir::Value* old = n->output(0);
        std::string name = old->name();
        old->set_name(g.fresh_name("recv_"));
        ir::Value* in = g.add_input(name, old->type());
        g.replace_all_uses(old, in);
        l.input_keys.push_back(n->attr_string("key", ""));
        g.erase_node(n);
    }
    for (ir::Node* n : sends) {
        ir::Value* v = n->input(0);
        const std::vector<ir::Value*>& outs = g.outputs();
        auto it = std::find(outs.begin(), outs.end(), v);
        size_t index = it - outs.begin();
        if (it == outs.end()) {  // a value sent to several ranks is one output with several keys
            g.add_output(v);
            l.output_keys.emplace_back();
        }
        l.output_keys[index].push_back(n->attr_string("key", ""));
        g.erase_node(n);
    }
    l.graph = std::move(g);
    return l;
}

}  // namespace kiln::distributed
