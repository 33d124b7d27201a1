// KilnSend / KilnRecv: the two ends of a tensor transfer between ranks of a partitioned graph
// (distributed/partition.h). They exist for inspection (`kiln inspect --partition`) and for the
// lowering that executes them: in one process a Recv becomes a graph input and a Send a graph
// output (distributed/lower_transfers.h); over MPI they become point-to-point calls. They have
// no compute, so nothing fuses or compiles them; compile() never sees one.
//
//   KilnSend(%t) {key="0/1 -> 1 't' frame 0:0", to=1}                      (no outputs; kept by DCE)
//   %t = KilnRecv() {from=0, key="0/1 -> 1 't' frame 0:0"} : f32[1,64,8,8]  (the type travels with it)
#include "op/registry.h"

namespace kiln::op {

void register_transfer_ops(OpRegistry& r) {
    {
        OpDef d;
        d.name = "KilnSend";
        d.internal = true;
        d.min_inputs = d.max_inputs = 1;
        d.min_outputs = d.max_outputs = 0;
        d.attrs = {{"key", AttrKind::kString, std::nullopt, true}, {"to", AttrKind::kInt, std::nullopt, true}};
        d.infer = [](const ir::Node&) { return std::vector<ir::TensorType>{}; };
        d.has_side_effect = true;  // its effect is the transfer: dead-code elimination keeps it
        d.flops = [](const ir::Node&) { return 0.0; };
        r.add(std::move(d));
    }
    {
        OpDef d;
        d.name = "KilnRecv";
        d.internal = true;
        d.min_inputs = d.max_inputs = 0;
        d.attrs = {{"key", AttrKind::kString, std::nullopt, true}, {"from", AttrKind::kInt, std::nullopt, true}};
        // The received tensor's type is the sent one's, fixed when the partition made the node.
        d.infer = [](const ir::Node& n) { return std::vector<ir::TensorType>{n.output(0)->type()}; };
        d.flops = [](const ir::Node&) { return 0.0; };
        r.add(std::move(d));
    }
}

}  // namespace kiln::op
