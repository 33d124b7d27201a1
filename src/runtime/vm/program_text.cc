// program_text: a VM program one instruction per line, e.g.
//   fn 0 main (params r0 r1) -> r5
//     r2 r3 = call #0 r0 r1   ; executable 'main/segment0' (4 steps, 2 in, 2 out)   [node 'Add_1' (Add) and 3 more]
//     r5 = loop body=fn 1 carried=1 M=r2 cond=- (r3)   [node 'loop' (Loop)]
#include <sstream>

#include "runtime/vm/program.h"

namespace kiln::runtime::vm {
namespace {

std::string regs(const std::vector<int>& rs, size_t first = 0) {
    std::string s;
    for (size_t i = first; i < rs.size(); ++i) s += (s.empty() ? "" : " ") + (rs[i] < 0 ? std::string("-") : "r" + std::to_string(rs[i]));
    return s;
}

std::string instr_text(const Program& p, const Instr& in) {
    std::ostringstream os;
    if (!in.outs.empty()) os << regs(in.outs) << " = ";
    os << op_name(in.op);
    switch (in.op) {
        case Op::kCall: os << " #" << in.imm << " " << regs(in.ins) << "   ; "
                           << (static_cast<size_t>(in.imm) < p.callees.size()  // a saved program has none
                                   ? p.callees[static_cast<size_t>(in.imm)]->describe()
                                   : "callee #" + std::to_string(in.imm));
                        break;
        case Op::kMove: os << " " << regs(in.ins); break;
        case Op::kIf: os << " r" << in.ins[0] << " then=fn " << in.imm << " else=fn " << in.imm2 << " (" << regs(in.ins, 1) << ")"; break;
        case Op::kLoop: os << " body=fn " << in.imm << " carried=" << in.imm2 << " M=" << regs({in.ins[0]}) << " cond=" << regs({in.ins[1]}) << " (" << regs(in.ins, 2) << ")"; break;
        case Op::kScan: os << " body=fn " << in.imm << " states=" << in.ints[0] << " scan_inputs=" << in.ints[1] << " (" << regs(in.ins) << ")"; break;
        case Op::kRet: break;
    }
    if (!in.node.empty()) os << "   [" << in.node << "]";
    return os.str();
}

}  // namespace

std::string program_text(const Program& p) {
    std::ostringstream os;
    for (size_t f = 0; f < p.functions.size(); ++f) {
        const Function& fn = p.functions[f];
        os << "fn " << f << " " << fn.name << " (params " << regs(fn.params) << ") -> " << regs(fn.results)
           << (static_cast<int>(f) == p.entry ? "   ; entry" : "") << "\n";
        for (const auto& [r, t] : fn.constants) os << "  r" << r << " = const " << dtype_name(t.dtype()) << shape_str(t.shape()) << "\n";
        for (const Instr& in : fn.code) os << "  " << instr_text(p, in) << "\n";
    }
    return os.str();
}

}  // namespace kiln::runtime::vm
