// VirtualMachine (see vm.h): the dispatch loop, kCall, kMove, kIf. Loop and Scan are in
// vm_loop.cc and vm_scan.cc.
#include "runtime/vm/vm.h"

namespace kiln::runtime::vm {

VirtualMachine::VirtualMachine(std::shared_ptr<const Program> program)
    : program_(std::move(program)),
      frames_(program_->functions.size()),
      carried_(program_->functions.size()) {
    for (const Function& fn : program_->functions) {
        std::vector<char> w(static_cast<size_t>(fn.num_regs), 0);
        std::vector<int> moved;
        for (const Instr& in : fn.code)
            for (int r : in.outs) {
                if (in.op == Op::kMove) moved.push_back(r);
                else w[static_cast<size_t>(r)] = 1;
            }
        std::vector<char> reads(static_cast<size_t>(fn.num_regs), 0);
        for (const Instr& in : fn.code)
            for (int r : in.ins)
                if (r >= 0) reads[static_cast<size_t>(r)] = 1;
        for (int r : fn.results) reads[static_cast<size_t>(r)] = 1;
        written_.push_back(std::move(w));
        moved_.push_back(std::move(moved));
        reads_.push_back(std::move(reads));
    }
}

Status node_error(const Instr& in, const Status& st) {
    return Status(st.kind(), (in.node.empty() ? std::string("vm ") + op_name(in.op) : in.node) + ": " + st.message());
}

void VirtualMachine::clear_moved(int fn) {
    Frame& f = frames_[static_cast<size_t>(fn)];
    for (int r : moved_[static_cast<size_t>(fn)]) f.regs[static_cast<size_t>(r)] = Tensor();
}

bool scalar_truth(const Tensor& t) { return t.numel() == 1 && t.get_f64(0) != 0.0; }

void VirtualMachine::make_frame(int fn) {
    Frame& f = frames_[static_cast<size_t>(fn)];
    const Function& func = program_->functions[static_cast<size_t>(fn)];
    f.regs.assign(static_cast<size_t>(func.num_regs), Tensor());
    f.slot.assign(static_cast<size_t>(func.num_regs), 0);
    for (const auto& [reg, t] : func.constants) f.regs[static_cast<size_t>(reg)] = t;
    f.constants_set = true;
}

void VirtualMachine::pass_params(const Frame& f, const std::vector<int>& ins, size_t first, int fn,
                                 size_t first_param) {
    Frame& callee = frame_of(fn);
    const Function& func = program_->functions[static_cast<size_t>(fn)];
    for (size_t i = first; i < ins.size(); ++i) {
        const size_t p = static_cast<size_t>(func.params[first_param + i - first]);
        callee.regs[p] = f.regs[static_cast<size_t>(ins[i])];
        callee.slot[p] = 0;
    }
}

Status VirtualMachine::run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                           const std::atomic<bool>* terminate) {
    const Function& entry = program_->functions[static_cast<size_t>(program_->entry)];
    if (inputs.size() != entry.params.size())
        return Status(ErrorKind::kInvalidArgument, "expected " + std::to_string(entry.params.size()) + " inputs, got " +
                                                       std::to_string(inputs.size()));
    Frame& f = frame_of(program_->entry);
    for (size_t i = 0; i < inputs.size(); ++i) f.regs[static_cast<size_t>(entry.params[i])] = inputs[i];
    terminate_ = terminate;
    Status st = exec(program_->entry);
    terminate_ = nullptr;
    outputs.clear();
    if (st.ok())
        for (int r : entry.results) outputs.push_back(f.regs[static_cast<size_t>(r)]);
    // The caller's inputs are not kept past the run (a borrowed one may go away).
    for (int p : entry.params) f.regs[static_cast<size_t>(p)] = Tensor();
    return st;
}

Status VirtualMachine::terminated(const Instr& in, int64_t i) const {
    return node_error(in, Status(ErrorKind::kCancelled, "run terminated (RunOptions::terminate) before iteration " +
                                                            std::to_string(i)));
}

Status VirtualMachine::exec(int fn) {
    const Function& func = program_->functions[static_cast<size_t>(fn)];
    Frame& f = frame_of(fn);
    for (const Instr& in : func.code) {
        Status st;
        switch (in.op) {
            case Op::kCall: st = exec_call(in, f); break;
            case Op::kMove:
                f.regs[static_cast<size_t>(in.outs[0])] = f.regs[static_cast<size_t>(in.ins[0])];
                f.slot[static_cast<size_t>(in.outs[0])] = 0;
                break;
            case Op::kIf: st = exec_if(in, f); break;
            case Op::kLoop: st = exec_loop(in, f); break;
            case Op::kScan: st = exec_scan(in, f); break;
            case Op::kRet: return Status::ok_status();
        }
        if (!st.ok()) return st;
    }
    return Status::ok_status();
}

Status VirtualMachine::exec_call(const Instr& in, Frame& f) {
    const size_t ni = in.ins.size(), no = in.outs.size();
    if (call_ins_.size() < ni) call_ins_.resize(ni);
    if (call_outs_.size() < no) call_outs_.resize(no), call_reuse_.resize(no);
    for (size_t i = 0; i < ni; ++i) call_ins_[i] = &f.regs[static_cast<size_t>(in.ins[i])];
    for (size_t k = 0; k < no; ++k) {
        const size_t r = static_cast<size_t>(in.outs[k]);
        call_outs_[k] = &f.regs[r];
        call_reuse_[k] = f.regs[r].sole_owner() || f.slot[r] ? 1 : 0;
    }
    Status st = program_->callees[static_cast<size_t>(in.imm)]->call(call_ins_.data(), ni, call_outs_.data(),
                                                                      call_reuse_.data(), no);
    return st.ok() ? st : node_error(in, st);
}

Status VirtualMachine::exec_if(const Instr& in, Frame& f) {
    const Tensor& c = f.regs[static_cast<size_t>(in.ins[0])];
    if (c.numel() != 1)
        return node_error(in, Status(ErrorKind::kInvalidArgument,
                                     "cond must have one element, got shape " + shape_str(c.shape())));
    const int fn = scalar_truth(c) ? in.imm : in.imm2;
    pass_params(f, in.ins, 1, fn, 0);
    Status st = exec(fn);
    if (!st.ok()) return st;
    const Function& branch = program_->functions[static_cast<size_t>(fn)];
    Frame& bf = frame_of(fn);
    for (size_t k = 0; k < in.outs.size(); ++k) {
        f.regs[static_cast<size_t>(in.outs[k])] = bf.regs[static_cast<size_t>(branch.results[k])];
        f.slot[static_cast<size_t>(in.outs[k])] = 0;
    }
    return Status::ok_status();
}

const char* op_name(Op op) {
    switch (op) {
        case Op::kCall: return "call";
        case Op::kMove: return "move";
        case Op::kIf: return "if";
        case Op::kLoop: return "loop";
        case Op::kScan: return "scan";
        case Op::kRet: return "ret";
    }
    return "?";
}

}  // namespace kiln::runtime::vm
