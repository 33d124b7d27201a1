// VirtualMachine::update_carried: a Loop's carried values (a Scan's states) move from the body's
// result registers to its param registers between iterations, without copying data.
//  - a result that is its param (the body passes the value through): nothing to do;
//  - a result a call wrote, in a register no other result names: the two registers swap, so
//    the next iteration's call writes into the buffer of the value now dropped (ping-pong);
//  - otherwise (a result that is another param, a constant, or shared by two results): all
//    such values are read first and then assigned, so a swap of two carried values is right.
#include "runtime/vm/vm.h"

namespace kiln::runtime::vm {

// How body `fn`'s carried values move between iterations (decided by the program alone, once).
const VirtualMachine::CarriedPlan& VirtualMachine::carried_plan(int fn, size_t first_param, size_t first_result,
                                                                size_t n) {
    CarriedPlan& plan = carried_[static_cast<size_t>(fn)];
    if (plan.known) return plan;
    const Function& body = program_->functions[static_cast<size_t>(fn)];
    const std::vector<char>& written = written_[static_cast<size_t>(fn)];
    plan.fixed = true;
    for (size_t k = 0; k < n; ++k) {
        const size_t p = static_cast<size_t>(body.params[first_param + k]);
        const size_t r = static_cast<size_t>(body.results[first_result + k]);
        bool unique = written[r] != 0;
        for (size_t j = 0; j < n && unique; ++j) unique = j == k || static_cast<size_t>(body.results[first_result + j]) != r;
        plan.generic |= r != p && !unique;
        if (r != p) plan.swaps.emplace_back(p, r);
        // A static type given by the instruction that writes it (a call's output is allocated at
        // its executable's static shape): after the first iteration its param has that type too.
        bool fixed = written[r] != 0 && r < body.types.size();
        if (fixed)
            for (int64_t d : body.types[r].shape) fixed = fixed && d >= 0;
        plan.fixed = plan.fixed && fixed;
    }
    plan.known = true;
    return plan;
}

Status VirtualMachine::update_carried_checked(int fn, size_t first_param, size_t first_result, size_t n,
                                              int64_t iter) {
    const CarriedPlan& plan = carried_plan(fn, first_param, first_result, n);
    Frame& bf = frames_[static_cast<size_t>(fn)];
    if (iter == 0 || !plan.fixed) {  // later iterations of a fixed plan cannot change a shape
        const Function& body = program_->functions[static_cast<size_t>(fn)];
        for (size_t k = 0; k < n; ++k) {
            const size_t p = static_cast<size_t>(body.params[first_param + k]);
            const size_t r = static_cast<size_t>(body.results[first_result + k]);
            if (r == p) continue;  // passed through: the same tensor
            const Tensor& got = bf.regs[r];
            if (!same_shape(got.shape(), bf.regs[p].shape()) || got.dtype() != bf.regs[p].dtype())
                return Status(ErrorKind::kInvalidArgument,
                              "loop-carried value " + std::to_string(k) + " changed from " +
                                  dtype_name(bf.regs[p].dtype()) + shape_str(bf.regs[p].shape()) + " to " +
                                  dtype_name(got.dtype()) + shape_str(got.shape()) + " at iteration " +
                                  std::to_string(iter));
        }
    }
    if (!plan.generic) {
        for (const auto& [p, r] : plan.swaps) swap(bf.regs[p], bf.regs[r]);
        return Status::ok_status();
    }
    const Function& body = program_->functions[static_cast<size_t>(fn)];
    const std::vector<char>& written = written_[static_cast<size_t>(fn)];
    next_.resize(n);
    old_.resize(n);
    for (size_t k = 0; k < n; ++k) next_[k] = bf.regs[static_cast<size_t>(body.results[first_result + k])];
    for (size_t k = 0; k < n; ++k) old_[k] = std::move(bf.regs[static_cast<size_t>(body.params[first_param + k])]);
    for (size_t k = 0; k < n; ++k) bf.regs[static_cast<size_t>(body.params[first_param + k])] = std::move(next_[k]);
    for (size_t k = 0; k < n; ++k) {
        const size_t r = static_cast<size_t>(body.results[first_result + k]);
        if (written[r]) bf.regs[r] = std::move(old_[k]);  // a call writes it next: reuse the buffer
        old_[k] = Tensor();
    }
    return Status::ok_status();
}

}  // namespace kiln::runtime::vm
