// VirtualMachine: runs a vm::Program (runtime/vm/program.h). One run at a time per instance
// (it owns the register files); a session guards it with a mutex.
//
// Register files persist across runs and iterations: a kCall writes into a register's buffer in
// place when the register is its sole owner (no one else holds that tensor: not the caller, not
// another register) or a scan slot the Loop/Scan placed there, and the dtype and shape fit.
// So a Loop's carried values ping-pong between the body's param and result registers without
// allocation, and a scan output is written straight into its slice of the stacked result.
#pragma once

#include <atomic>

#include <memory>
#include <utility>
#include <vector>

#include "runtime/vm/program.h"

namespace kiln::runtime::vm {

class VirtualMachine {
public:
    explicit VirtualMachine(std::shared_ptr<const Program> program);

    /// Runs the entry function on `inputs` (its params, in order); `outputs` get its results.
    /// Errors name the model node of the failing instruction. `terminate` (RunOptions::terminate),
    /// when set during the run, stops it before the next loop iteration with kCancelled naming
    /// the Loop or Scan node and the iteration (a while loop that never ends can be stopped).
    Status run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
               const std::atomic<bool>* terminate = nullptr);

    const Program& program() const { return *program_; }

    /// Loop iterations run so far (all Loop and Scan instructions), for tests and stats.
    int64_t iterations() const { return iterations_; }

private:
    struct Frame {
        std::vector<Tensor> regs;
        std::vector<char> slot;  // register holds a borrowed scan slice the VM may write into
        bool constants_set = false;
    };
    /// Function `fn`'s frame, its registers made (and its constants set) on first use.
    Frame& frame_of(int fn) {
        Frame& f = frames_[static_cast<size_t>(fn)];
        if (!f.constants_set) make_frame(fn);
        return f;
    }
    void make_frame(int fn);
    Status exec(int fn);
    Status exec_call(const Instr& in, Frame& f);
    Status exec_if(const Instr& in, Frame& f);
    Status exec_loop(const Instr& in, Frame& f);
    Status exec_scan(const Instr& in, Frame& f);
    /// Copies registers `ins` of `f` into the params of function `fn`'s frame.
    void pass_params(const Frame& f, const std::vector<int>& ins, size_t first, int fn, size_t first_param);

    std::shared_ptr<const Program> program_;
    std::vector<Frame> frames_;  // per function
    // Per function and register: a call or nested control flow of the function writes it (so a
    // Loop may park an old carried buffer there for the next iteration's call to reuse).
    std::vector<std::vector<char>> written_;
    // Per function: the registers its kMoves write. A loop clears them after each iteration, so
    // the iteration counter and condition, once aliased by a move, are sole-owned (set in place)
    // again and need no allocation.
    std::vector<std::vector<int>> moved_;
    // Per function and register: an instruction reads it or it is a result.
    std::vector<std::vector<char>> reads_;
    void clear_moved(int fn);
    /// After iteration `iter` of body `fn`: its results [first_result, +n) become its params
    /// [first_param, +n) for the next iteration (same dtype and shape, else an error).
    Status update_carried(int fn, size_t first_param, size_t first_result, size_t n, int64_t iter) {
        const CarriedPlan& plan = carried_[static_cast<size_t>(fn)];
        if (!plan.known || iter == 0 || !plan.fixed || plan.generic)
            return update_carried_checked(fn, first_param, first_result, n, iter);
        Frame& bf = frames_[static_cast<size_t>(fn)];  // inline: a Loop iteration's common case
        for (const auto& [p, r] : plan.swaps) swap(bf.regs[p], bf.regs[r]);
        return Status::ok_status();
    }
    Status update_carried_checked(int fn, size_t first_param, size_t first_result, size_t n, int64_t iter);
    struct CarriedPlan {
        bool known = false;
        bool generic = false;  // a result another one shares, a param or a constant: read all, then assign
        bool fixed = false;    // every result's type is static and set by its writer: checked at iteration 0 only
        std::vector<std::pair<size_t, size_t>> swaps;  // (param, result) registers that swap
    };
    const CarriedPlan& carried_plan(int fn, size_t first_param, size_t first_result, size_t n);
    std::vector<CarriedPlan> carried_;  // per function (a body belongs to one Loop or Scan)
    std::vector<Tensor> next_, old_;  // scratch of update_carried
    int64_t iterations_ = 0;
    const std::atomic<bool>* terminate_ = nullptr;  // the current run's (nullptr: none)
    /// kCancelled naming `in` and iteration `i` when the run's terminate flag is set; else ok.
    Status check_terminate(const Instr& in, int64_t i) const {
        if (!terminate_ || !terminate_->load(std::memory_order_relaxed)) return Status::ok_status();
        return terminated(in, i);
    }
    Status terminated(const Instr& in, int64_t i) const;
    // Scratch of exec_call, kept to avoid allocating per call.
    std::vector<const Tensor*> call_ins_;
    std::vector<Tensor*> call_outs_;
    std::vector<char> call_reuse_;
};

/// The Status of a failed instruction: "<Instr::node>: <message>" (its kind kept).
Status node_error(const Instr& in, const Status& st);

/// Whether a one-element tensor (bool or any number) is non-zero.
bool scalar_truth(const Tensor& t);

}  // namespace kiln::runtime::vm
