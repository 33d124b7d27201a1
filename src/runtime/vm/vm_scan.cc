// VirtualMachine::exec_scan: ONNX Scan (opset 9+) over a body function.
//
// body(state..., slice..., captured...) -> (state..., out...). Scan input j is sliced along
// in_axes[j] (from the end when in_dirs[j] = 1): along axis 0 the slice is a view of the input,
// along another axis it is gathered into a scratch buffer. States swap between the body's param
// and result registers as a Loop's carried values do; scan outputs are written into a ScanStack
// (in place) and stacked along out_axes[k], reversed when out_dirs[k] = 1.
#include <cstring>

#include "runtime/vm/scan_stack.h"
#include "runtime/vm/vm.h"

namespace kiln::runtime::vm {
namespace {

// Slice idx of x along `axis` (the axis removed).
Shape slice_shape(const Shape& s, int64_t axis) {
    Shape out = s;
    out.erase(out.begin() + axis);
    return out;
}

// dst (shaped like the slice) = x[..., idx, ...] along axis.
void gather_slice(const Tensor& x, int64_t axis, int64_t idx, Tensor& dst) {
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[static_cast<size_t>(d)];
    for (size_t d = static_cast<size_t>(axis) + 1; d < x.shape().size(); ++d) inner *= x.shape()[d];
    const size_t chunk = static_cast<size_t>(inner) * dtype_size(x.dtype());
    const int64_t n = x.shape()[static_cast<size_t>(axis)];
    const char* src = static_cast<const char*>(x.data());
    char* out = static_cast<char*>(dst.data());
    for (int64_t o = 0; o < outer; ++o)
        std::memcpy(out + static_cast<size_t>(o) * chunk, src + static_cast<size_t>(o * n + idx) * chunk, chunk);
}

}  // namespace

Status VirtualMachine::exec_scan(const Instr& in, Frame& f) {
    const Function& body = program_->functions[static_cast<size_t>(in.imm)];
    const size_t ns = static_cast<size_t>(in.ints[0]), nin = static_cast<size_t>(in.ints[1]);
    const size_t nout = in.outs.size() - ns;
    const int64_t* in_axes = in.ints.data() + 2;
    const int64_t* in_dirs = in_axes + nin;
    const int64_t* out_axes = in_dirs + nin;
    const int64_t* out_dirs = out_axes + nout;
    auto fail = [&](const std::string& msg) { return node_error(in, Status(ErrorKind::kInvalidArgument, msg)); };
    int64_t steps = -1;
    std::vector<Tensor> scratch(nin);
    for (size_t j = 0; j < nin; ++j) {
        const Tensor& x = f.regs[static_cast<size_t>(in.ins[ns + j])];
        const int64_t axis = in_axes[j];
        if (axis >= static_cast<int64_t>(x.shape().size()))
            return fail("scan input " + std::to_string(j) + " of shape " + shape_str(x.shape()) + " has no axis " +
                        std::to_string(axis));
        const int64_t n = x.shape()[static_cast<size_t>(axis)];
        if (steps >= 0 && n != steps)
            return fail("scan input " + std::to_string(j) + " has " + std::to_string(n) + " steps, scan input 0 has " +
                        std::to_string(steps));
        steps = n;
        if (axis > 0) scratch[j] = Tensor(x.dtype(), slice_shape(x.shape(), axis));
    }
    pass_params(f, in.ins, 0, in.imm, 0);
    // Captured values follow the scan inputs in both lists.
    pass_params(f, in.ins, ns + nin, in.imm, ns + nin);
    Frame& bf = frame_of(in.imm);
    std::vector<ScanStack> stacks;
    for (size_t k = 0; k < nout; ++k) {
        const RegType& t = body.types[static_cast<size_t>(body.results[ns + k])];
        stacks.emplace_back(t.dtype, t.shape, steps);
    }
    for (int64_t t = 0; t < steps; ++t) {
        if (Status stop = check_terminate(in, t); !stop.ok()) return stop;
        for (size_t j = 0; j < nin; ++j) {
            const Tensor& x = f.regs[static_cast<size_t>(in.ins[ns + j])];
            const int64_t idx = in_dirs[j] ? steps - 1 - t : t;
            Tensor& p = bf.regs[static_cast<size_t>(body.params[ns + j])];
            if (in_axes[j] == 0) {
                const size_t bytes = x.nbytes() / static_cast<size_t>(steps);
                p = Tensor::borrow(x.dtype(), slice_shape(x.shape(), 0),
                                   const_cast<char*>(static_cast<const char*>(x.data())) + static_cast<size_t>(idx) * bytes);
            } else {
                gather_slice(x, in_axes[j], idx, scratch[j]);
                p = scratch[j];
            }
        }
        for (size_t k = 0; k < nout; ++k) {
            const size_t r = static_cast<size_t>(body.results[ns + k]);
            bf.regs[r] = stacks[k].slot(t);
            bf.slot[r] = 1;
        }
        Status st = exec(in.imm);
        if (!st.ok()) return st;
        for (size_t k = 0; k < nout; ++k) {
            const size_t r = static_cast<size_t>(body.results[ns + k]);
            st = stacks[k].settle(t, bf.regs[r]);
            if (!st.ok()) return fail("scan output " + std::to_string(k) + ": " + st.message());
            bf.slot[r] = 0;
        }
        st = update_carried(in.imm, 0, 0, ns, t);
        if (!st.ok()) return node_error(in, st);
        clear_moved(in.imm);
    }
    iterations_ += std::max<int64_t>(steps, 0);
    for (size_t k = 0; k < ns; ++k) f.regs[static_cast<size_t>(in.outs[k])] = bf.regs[static_cast<size_t>(body.params[k])];
    for (size_t k = 0; k < nout; ++k)
        f.regs[static_cast<size_t>(in.outs[ns + k])] = stacks[k].finish(std::max<int64_t>(steps, 0), out_axes[k], out_dirs[k] != 0);
    for (int r : in.outs) f.slot[static_cast<size_t>(r)] = 0;
    return Status::ok_status();
}

}  // namespace kiln::runtime::vm
