// A VM program: control flow (If, Loop, Scan) over registers holding tensors, with the work
// done by calls to compiled executables (runtime/vm/executable_callee.h) or other callees.
//
// A program is data: functions of flat instruction vectors. Each function has its own
// registers; params and results are register lists. A function is run by exactly one
// instruction (the entry, one If branch, one Loop or Scan body), never recursively, so each has
// one persistent register file in the VM (runtime/vm/vm.h): the buffers a call wrote stay in
// its registers and the next run writes them again in place.
//
//   kCall  callee=imm  ins -> outs     run a callee; outputs written into the out registers'
//                                      buffers when they fit and nothing else holds them
//   kMove  ins[0] -> outs[0]           alias (no copy)
//   kIf    ins[0]=cond, ins[1..]=captured; then=imm, else=imm2 -> outs
//   kLoop  ins=[M|-1, cond|-1, carried..., captured...]; body=imm, imm2=#carried -> outs
//          (ONNX Loop: body(iter, cond, carried..., captured...) -> (cond, carried..., scan...))
//   kScan  ins=[states..., scan inputs..., captured...]; body=imm; scan attrs in `ints`
//   kRet   the function's results are its `results` registers
// The compiler (compiler/lower_control_flow.h) writes programs; this layer only runs them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "support/status.h"
#include "support/tensor.h"

namespace kiln::runtime::vm {

enum class Op : uint8_t { kCall, kMove, kIf, kLoop, kScan, kRet };

/// Whether two shapes are equal (inline: the hot path compares one- or two-element shapes, for
/// which a memcmp call costs more than the comparison).
inline bool same_shape(const Shape& a, const Shape& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i] != b[i]) return false;
    return true;
}

/// "call", "move", "if", "loop", "scan", "ret".
const char* op_name(Op op);

struct Instr {
    Op op = Op::kRet;
    int imm = -1;   // callee (kCall) or function (kIf then, kLoop/kScan body)
    int imm2 = -1;  // kIf: else function; kLoop: number of loop-carried values
    std::vector<int> ins, outs;
    /// kScan: [num_state, num_scan_in, in_axes..., in_dirs..., out_axes..., out_dirs...].
    std::vector<int64_t> ints;
    std::string node;  // the model node it comes from, e.g. "node 'loop' (Loop)" (errors name it)
};

/// The static type a register holds (shape -1 where unknown at lowering time).
struct RegType {
    DType dtype = DType::kFloat32;
    Shape shape;
};

struct Function {
    std::string name;
    int num_regs = 0;
    std::vector<int> params, results;
    std::vector<Instr> code;
    /// Registers set once when the function's register file is made (constants it reads).
    std::vector<std::pair<int, Tensor>> constants;
    std::vector<RegType> types;  // per register (for printing and scan-output stacking)
};

/// Something a kCall runs: a compiled executable, or (for what could not be compiled) a host
/// function. ins/outs point at registers: `outs[k]` holds a tensor whose buffer may be reused
/// when `reusable[k]` and its dtype and shape fit; otherwise the callee stores a fresh tensor.
class Callee {
public:
    virtual ~Callee() = default;
    virtual Status call(const Tensor* const* ins, size_t num_ins, Tensor* const* outs, const char* reusable,
                        size_t num_outs) = 0;
    /// One line for program listings, e.g. "executable 'loop_body' (3 kernels)".
    virtual std::string describe() const = 0;
};

struct Program {
    std::vector<Function> functions;
    std::vector<std::shared_ptr<Callee>> callees;
    int entry = 0;
    /// A Loop that runs more iterations than this is an error naming the node (a runaway loop).
    int64_t max_trips = int64_t{1} << 40;
};

/// The program as text, one instruction per line (`kiln inspect` and the docs show it).
std::string program_text(const Program& p);

}  // namespace kiln::runtime::vm
