// VirtualMachine::update_carried: a Loop's carried values (a Scan's states) move from the body's
// result registers to its param registers between iterations, without copying data.
//  - a result that is its param (the body passes the value through): nothing to do;
//  - a result a call wrote, in a register no other result names: the two registers swap, so
//    the next iteration's call writes into the buffer of the value now dropped (ping-pong);
//  - otherwise (a result that is another param, a constant, or shared by two results): all
//    such values are read first and then assigned, so a swap of two carried values is right.
#include "runtime/vm/vm.h"

namespace kiln::runtime::vm {

// Whether body `fn`'s carried results need the generic update (decided by the program alone, once).
bool VirtualMachine::generic_carried(int fn, size_t first_param, size_t first_result, size_t n) {
    signed char& mode = carried_mode_[static_cast<size_t>(fn)];
    if (mode >= 0) return mode != 0;
    const Function& body = program_->functions[static_cast<size_t>(fn)];
    const std::vector<char>& written = written_[static_cast<size_t>(fn)];
    bool generic = false;
    for (size_t k = 0; k < n; ++k) {
        const int p = body.params[first_param + k], r = body.results[first_result + k];
        bool unique = written[static_cast<size_t>(r)] != 0;
        for (size_t j = 0; j < n && unique; ++j) unique = j == k || body.results[first_result + j] != r;
        generic |= r != p && !unique;
    }
    mode = generic ? 1 : 0;
    return generic;
}

// Whether every carried result of body `fn` has a static type and is written by an instruction
// that gives it that type (a call's output is allocated at its executable's static shape): after
// the first iteration, its param holds a value of that type too, so nothing needs checking.
bool VirtualMachine::carried_fixed(int fn, size_t first_result, size_t n) {
    signed char& fixed = carried_fixed_[static_cast<size_t>(fn)];
    if (fixed >= 0) return fixed != 0;
    const Function& body = program_->functions[static_cast<size_t>(fn)];
    const std::vector<char>& written = written_[static_cast<size_t>(fn)];
    bool all = true;
    for (size_t k = 0; k < n && all; ++k) {
        const size_t r = static_cast<size_t>(body.results[first_result + k]);
        all = written[r] != 0 && r < body.types.size();
        if (all)
            for (int64_t d : body.types[r].shape) all = all && d >= 0;
    }
    fixed = all ? 1 : 0;
    return all;
}

Status VirtualMachine::update_carried(int fn, size_t first_param, size_t first_result, size_t n, int64_t iter) {
    const Function& body = program_->functions[static_cast<size_t>(fn)];
    Frame& bf = frames_[static_cast<size_t>(fn)];
    const std::vector<char>& written = written_[static_cast<size_t>(fn)];
    const bool check = iter == 0 || !carried_fixed(fn, first_result, n);
    for (size_t k = 0; k < n && check; ++k) {
        const size_t p = static_cast<size_t>(body.params[first_param + k]);
        const size_t r = static_cast<size_t>(body.results[first_result + k]);
        if (r == p) continue;  // passed through: the same tensor
        const Tensor& got = bf.regs[r];
        if (!same_shape(got.shape(), bf.regs[p].shape()) || got.dtype() != bf.regs[p].dtype())
            return Status(ErrorKind::kInvalidArgument,
                          "loop-carried value " + std::to_string(k) + " changed from " + dtype_name(bf.regs[p].dtype()) +
                              shape_str(bf.regs[p].shape()) + " to " + dtype_name(got.dtype()) + shape_str(got.shape()) +
                              " at iteration " + std::to_string(iter));
    }
    if (!generic_carried(fn, first_param, first_result, n)) {
        for (size_t k = 0; k < n; ++k) {
            const size_t p = static_cast<size_t>(body.params[first_param + k]);
            const size_t r = static_cast<size_t>(body.results[first_result + k]);
            if (r != p) swap(bf.regs[p], bf.regs[r]);
        }
        return Status::ok_status();
    }
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
