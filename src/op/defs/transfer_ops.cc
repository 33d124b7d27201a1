// KilnSend / KilnRecv: the two ends of a tensor transfer between ranks of a partitioned graph
// (distributed/partition.h). They exist for inspection (`kiln inspect --partition`) and for the
// lowering that executes them: in one process a Recv becomes a graph input and a Send a graph
// output (distributed/lower_transfers.h); over MPI they become point-to-point calls. They have
// no compute, so nothing fuses or compiles them; compile() never sees one.
//
//   KilnSend(%t) {key="0/1 -> 1 't' frame 0:0", to=1}                      (no outputs; kept by DCE)
//   %t = KilnRecv() {from=0, key="0/1 -> 1 't' frame 0:0"} : f32[1,64,8,8]  (the type travels with it)
//
// KilnDeviceCopy is their form inside one process: a tensor copied between the host and a
// device at a placement boundary (pass/insert_device_copies.h). Its value is its input's; on
// the CPU it is a view of its input (op/view_ops.h is_view_op), so a placed graph computes what the
// graph did before placement, bit for bit. It is opaque: nothing fuses across a device boundary.
//
//   %x.cuda = KilnDeviceCopy(%x) {from="cpu", to="cuda"}
#include "op/op_util.h"
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
    {
        OpDef d;
        d.name = "KilnDeviceCopy";
        d.internal = true;
        d.attrs = {{"from", AttrKind::kString, std::nullopt, true}, {"to", AttrKind::kString, std::nullopt, true}};
        d.infer = [](const ir::Node& n) { return std::vector<ir::TensorType>{input_type(n, 0, "input")}; };
        d.compute = [](const ComputeArgs& a) {
            te::Tensor x = a.in(0);
            return std::vector<te::Tensor>{te::sym_compute(
                a.out_dims(), [&](const std::vector<te::Var>& i) { return te::read(x, i); }, "device_copy", a.out_dtype())};
        };
        d.flops = [](const ir::Node&) { return 0.0; };
        r.add(std::move(d));
    }
}

}  // namespace kiln::op
