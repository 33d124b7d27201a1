// VirtualMachine::exec_loop: ONNX Loop over a body function.
//
// body(iter i64[], cond bool[], carried..., captured...) -> (cond, carried..., scan...).
// Runs while iter < M (when M is given) and cond (when cond is given; without it the body's
// cond output is ignored). Per iteration nothing is allocated once warm:
//  - iter and cond are scalars in the body's param registers, set in place;
//  - carried values swap between the body's param and result registers, so the body's call
//    writes iteration i+1's values into the buffers of iteration i-1;
//  - each scan output register is pointed at its slice of the stacked result before the body
//    runs (the call writes there); the stack is preallocated for M iterations when M is given
//    (and cut to the iterations run if cond stops it early), else grown by doubling.
// A carried value whose shape changes between iterations, or more than Program::max_trips
// (a trip count M above it without a condition, or a while loop running past it)
// iterations, is an error naming the node.
#include <algorithm>
#include <cstring>

#include "runtime/vm/scan_stack.h"
#include "runtime/vm/vm.h"

namespace kiln::runtime::vm {
namespace {

void set_scalar(Tensor& t, DType dtype, int64_t v) {
    if (!t.sole_owner() || t.dtype() != dtype || !t.shape().empty()) t = Tensor(dtype, {});
    t.set_i64(0, v);
}

}  // namespace

Status VirtualMachine::exec_loop(const Instr& in, Frame& f) {
    const Function& body = program_->functions[static_cast<size_t>(in.imm)];
    const size_t nc = static_cast<size_t>(in.imm2);
    const size_t nscan = in.outs.size() - nc;
    auto fail = [&](const std::string& msg) { return node_error(in, Status(ErrorKind::kInvalidArgument, msg)); };
    int64_t trips = -1;  // -1: no M
    if (in.ins[0] >= 0) {
        const Tensor& m = f.regs[static_cast<size_t>(in.ins[0])];
        if (m.numel() != 1) return fail("M must have one element, got shape " + shape_str(m.shape()));
        trips = std::max<int64_t>(0, m.get_i64(0));
    }
    const bool has_cond = in.ins[1] >= 0;
    // With a condition, M is only an upper bound (M = INT64_MAX makes a while loop): the
    // iterations actually run are checked below.
    if (!has_cond && trips > program_->max_trips)
        return fail("trip count M = " + std::to_string(trips) + " exceeds the bound " +
                    std::to_string(program_->max_trips));
    bool cond = has_cond ? scalar_truth(f.regs[static_cast<size_t>(in.ins[1])]) : true;
    pass_params(f, in.ins, 2, in.imm, 2);
    Frame& bf = frame_of(in.imm);
    std::vector<ScanStack> stacks;
    for (size_t k = 0; k < nscan; ++k) {
        const RegType& t = body.types[static_cast<size_t>(body.results[1 + nc + k])];
        stacks.emplace_back(t.dtype, t.shape, trips);
    }
    // A body that passes its condition through keeps it (true); one that never reads its
    // iteration number does not need it set.
    const bool cond_passes = body.results[0] == body.params[1];
    const bool reads_iter = reads_[static_cast<size_t>(in.imm)][static_cast<size_t>(body.params[0])] != 0;
    const bool has_moves = !moved_[static_cast<size_t>(in.imm)].empty();
    // A body that is one call (then ret) runs it without the dispatch loop.
    const bool one_call = body.code.size() == 2 && body.code[0].op == Op::kCall && body.code[1].op == Op::kRet;
    int64_t i = 0;
    for (; (trips < 0 || i < trips) && cond; ++i) {
        if (i >= program_->max_trips)
            return fail("ran more than " + std::to_string(program_->max_trips) + " iterations (the bound)");
        if (Status stop = check_terminate(in, i); !stop.ok()) return stop;
        if (reads_iter) set_scalar(bf.regs[static_cast<size_t>(body.params[0])], DType::kInt64, i);
        if (i == 0 || !cond_passes) set_scalar(bf.regs[static_cast<size_t>(body.params[1])], DType::kBool, cond ? 1 : 0);
        for (size_t k = 0; k < nscan; ++k) {
            const size_t r = static_cast<size_t>(body.results[1 + nc + k]);
            bf.regs[r] = stacks[k].slot(i);
            bf.slot[r] = 1;
        }
        Status st = one_call ? exec_call(body.code[0], bf) : exec(in.imm);
        if (!st.ok()) return st;
        if (has_cond && !cond_passes) cond = scalar_truth(bf.regs[static_cast<size_t>(body.results[0])]);
        for (size_t k = 0; k < nscan; ++k) {
            const size_t r = static_cast<size_t>(body.results[1 + nc + k]);
            st = stacks[k].settle(i, bf.regs[r]);
            if (!st.ok()) return fail("scan output " + std::to_string(k) + ": " + st.message());
            bf.slot[r] = 0;
        }
        st = update_carried(in.imm, 2, 1, nc, i);
        if (!st.ok()) return node_error(in, st);
        if (has_moves) clear_moved(in.imm);
    }
    iterations_ += i;
    for (size_t k = 0; k < nc; ++k)
        f.regs[static_cast<size_t>(in.outs[k])] = bf.regs[static_cast<size_t>(body.params[2 + k])];
    for (size_t k = 0; k < nscan; ++k) f.regs[static_cast<size_t>(in.outs[nc + k])] = stacks[k].finish(i, 0, false);
    for (int r : in.outs) f.slot[static_cast<size_t>(r)] = 0;
    return Status::ok_status();
}

}  // namespace kiln::runtime::vm
