// TF1 control-flow primitives (TensorFlow's Switch, Merge, Enter, Exit, NextIteration; Yu et al.,
// "Dynamic Control Flow in Large-Scale Machine Learning", 2018). They are what If and Loop lower
// to for the frames executor (compiler/lower_to_frames.h, runtime/frame_executor.h):
//  - Switch(data, pred) -> (if_false, if_true): forwards data to the output pred selects; the
//    other output is dead. A dead data or pred makes both dead.
//  - Merge(a, b?) -> out: forwards whichever input is live (dead when all are). A loop's Merge
//    has one IR input, the Enter of iteration 0; the NextIteration with the same frame and slot
//    feeds it in every later iteration (a back edge kept out of the IR so the graph stays
//    acyclic and topologically ordered).
//  - Enter(x) {frame, constant, parallel_iterations, max_iterations} -> x inside the child frame
//    `frame` (iteration 0; every iteration when constant=1: a loop invariant).
//  - Exit(x) -> x in the parent frame.
//  - NextIteration(x) {frame, slot} -> x in the next iteration of the frame (its output is only
//    for the IR: it has no readers; the executor hands the value to the matching Merge).
// None has a compute: compile() turns each into a runtime control step, and only the frames
// executor runs graphs that hold them. Types pass through unchanged.
#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {
namespace {

OpDef control_op(const std::string& name, int inputs, int outputs) {
    OpDef d;
    d.name = name;
    d.internal = true;
    d.min_inputs = d.max_inputs = inputs;
    d.min_outputs = d.max_outputs = outputs;
    d.frame_control = true;
    d.flops = [](const ir::Node&) { return 0.0; };
    d.infer = [outputs](const ir::Node& n) {
        KILN_CHECK(n.input(0) != nullptr, kInvalidModel) << node_label(n) << ": input 0 is required";
        return std::vector<ir::TensorType>(static_cast<size_t>(outputs), n.input(0)->type());
    };
    return d;
}

OpDef switch_op() {
    OpDef d = control_op("Switch", 2, 2);
    d.infer = [](const ir::Node& n) {
        KILN_CHECK(n.input(0) && n.input(1), kInvalidModel) << node_label(n) << ": needs data and pred";
        const ir::TensorType& p = n.input(1)->type();
        KILN_CHECK(p.dtype == DType::kBool && p.is_static() && shape_numel(p.static_shape()) == 1, kInvalidModel)
            << node_label(n) << ": pred must be a one-element bool tensor, got " << p.str();
        return std::vector<ir::TensorType>{n.input(0)->type(), n.input(0)->type()};
    };
    return d;
}

OpDef merge_op() {
    OpDef d = control_op("Merge", 1, 1);
    d.max_inputs = 2;
    d.attrs = {{"frame", AttrKind::kString, ir::Attr(std::string()), false},
               {"slot", AttrKind::kInt, ir::Attr(int64_t{-1}), false}};
    d.infer = [](const ir::Node& n) {
        KILN_CHECK(n.input(0) != nullptr, kInvalidModel) << node_label(n) << ": input 0 is required";
        const ir::TensorType& t = n.input(0)->type();
        if (n.input(1)) {
            KILN_CHECK(n.input(1)->type() == t, kInvalidModel)
                << node_label(n) << ": inputs differ in type: " << t.str() << " vs " << n.input(1)->type().str();
        }
        return std::vector<ir::TensorType>{t};
    };
    return d;
}

OpDef enter_op() {
    OpDef d = control_op("Enter", 1, 1);
    d.attrs = {{"frame", AttrKind::kString, std::nullopt, true},
               {"constant", AttrKind::kInt, ir::Attr(int64_t{0}), false},
               {"slot", AttrKind::kInt, ir::Attr(int64_t{-1}), false},
               {"parallel_iterations", AttrKind::kInt, ir::Attr(int64_t{10}), false},
               {"max_iterations", AttrKind::kInt, ir::Attr(int64_t{0}), false}};
    return d;
}

OpDef next_iteration_op() {
    OpDef d = control_op("NextIteration", 1, 1);
    d.has_side_effect = true;  // its reader is the Merge of (frame, slot), not an IR edge
    d.attrs = {{"frame", AttrKind::kString, std::nullopt, true}, {"slot", AttrKind::kInt, std::nullopt, true}};
    return d;
}

}  // namespace

void register_tf_control_flow_ops(OpRegistry& r) {
    r.add(switch_op());
    r.add(merge_op());
    r.add(enter_op());
    r.add(control_op("Exit", 1, 1));
    r.add(next_iteration_op());
}

}  // namespace kiln::op
