#include "pass/insert_device_copies.h"

#include <map>

namespace kiln::pass {
namespace {

ir::Value* add_copy(ir::Graph& g, ir::Value* v, Device from, Device to, const std::string& out_name) {
    ir::AttrMap attrs = {{"from", std::string(device_name(from))},
                         {"to", std::string(device_name(to))},
                         {kDeviceAttr, std::string(device_name(to == Device::kCpu ? from : to))}};
    ir::Node* copy = g.add_node("KilnDeviceCopy", {v}, std::move(attrs), {v->type()}, {out_name},
                                "copy/" + v->name() + "/to_" + device_name(to));
    return copy->output(0);
}

}  // namespace

int insert_device_copies(ir::Graph& g, const Placement& p) {
    const std::vector<ir::Node*> nodes = g.nodes();
    for (ir::Node* n : nodes) n->attrs()[kDeviceAttr] = std::string(device_name(p.device(n)));
    std::vector<ir::Value*> values(g.inputs().begin(), g.inputs().end());
    for (ir::Node* n : nodes)
        for (ir::Value* v : n->outputs()) values.push_back(v);

    int copies = 0;
    for (ir::Value* v : values) {
        const Device holder = v->producer() ? p.device(v->producer()) : Device::kCpu;
        std::map<Device, ir::Value*> copy_on;  // one copy per destination device
        const std::vector<ir::Node*> users = v->users();
        for (ir::Node* u : users) {
            const Device d = p.device(u);
            if (d == holder) continue;
            ir::Value*& c = copy_on[d];
            if (!c) {
                c = add_copy(g, v, holder, d, v->name() + "/" + device_name(d));
                ++copies;
            }
            for (size_t i = 0; i < u->num_inputs(); ++i)
                if (u->input(i) == v) u->set_input(i, c);
        }
        bool is_output = false;
        for (const ir::Value* o : g.outputs()) is_output |= o == v;
        if (is_output && holder != Device::kCpu) {
            const std::string name = v->name();
            v->set_name(name + "/" + device_name(holder));
            ir::Value* host = add_copy(g, v, holder, Device::kCpu, name);
            std::vector<ir::Value*> outs = g.outputs();
            for (ir::Value*& o : outs)
                if (o == v) o = host;
            g.set_outputs(std::move(outs));
            ++copies;
        }
    }
    g.topo_sort();
    return copies;
}

}  // namespace kiln::pass
