#include "codegen/cuda_emitter.h"

#include <algorithm>
#include <optional>
#include <sstream>

#include "codegen/c_expr_printer.h"
#include "codegen/cuda_prelude.h"
#include "support/error.h"

namespace kiln::codegen {
namespace {

using te::LoopKind;
using tir::StmtKind;

/// Warps per block of a warp-per-output reduction, and the limits where it pays: enough outputs
/// to fill the GPU only with a thread each are left alone (one thread per output reads the
/// operands coalesced across outputs), and short sums gain nothing from 32 lanes.
constexpr int64_t kReduceWarpsPerBlock = 8, kWarpReduceMaxOutputs = 1 << 16, kWarpReduceMinLength = 32;

/// A reduction nest as the default schedule lowers it, one thread per output:
///   for b in G (blockIdx.x): for t in B (threadIdx.x):
///     out[i] = init; for r1..rk: out[i] = combine(out[i], src)
struct ThreadReduction {
    const tir::ForNode* block = nullptr;
    const tir::ForNode* thread = nullptr;
    const tir::StoreNode* init = nullptr;
    std::vector<const tir::ForNode*> reduce;
    const tir::StoreNode* update = nullptr;
    const te::BinaryNode* combine = nullptr;  // a: the load of out[i]; b: src
    int64_t outputs = 0, length = 1;
};

int64_t const_extent(const tir::ForNode& f) {
    return f.extent->kind == te::ExprKind::kIntImm ? static_cast<const te::IntImmNode&>(*f.extent).value : -1;
}

std::optional<ThreadReduction> match_thread_reduction(const tir::ForNode& f, CNames& names) {
    ThreadReduction r;
    r.block = &f;
    if (f.loop_kind != LoopKind::kBlockIdxX || !f.body || f.body->kind != StmtKind::kFor) return std::nullopt;
    r.thread = static_cast<const tir::ForNode*>(f.body.get());
    if (r.thread->loop_kind != LoopKind::kThreadIdxX || !r.thread->body || r.thread->body->kind != StmtKind::kSeq)
        return std::nullopt;
    const auto& seq = static_cast<const tir::SeqNode&>(*r.thread->body);
    if (seq.stmts.size() != 2 || seq.stmts[0]->kind != StmtKind::kStore || seq.stmts[1]->kind != StmtKind::kFor)
        return std::nullopt;
    r.init = static_cast<const tir::StoreNode*>(seq.stmts[0].get());
    const tir::Stmt* s = &seq.stmts[1];
    while ((*s)->kind == StmtKind::kFor) {
        const auto& loop = static_cast<const tir::ForNode&>(**s);
        if (loop.loop_kind != LoopKind::kSerial && loop.loop_kind != LoopKind::kUnrolled) return std::nullopt;
        if (const_extent(loop) <= 0) return std::nullopt;
        r.reduce.push_back(&loop);
        r.length *= const_extent(loop);
        s = &loop.body;
    }
    if ((*s)->kind != StmtKind::kStore) return std::nullopt;
    r.update = static_cast<const tir::StoreNode*>(s->get());
    if (r.update->buffer.get() != r.init->buffer.get() || r.update->value->kind != te::ExprKind::kBinary) return std::nullopt;
    r.combine = static_cast<const te::BinaryNode*>(r.update->value.get());
    const te::BinaryOp op = r.combine->op;
    if (op != te::BinaryOp::kAdd && op != te::BinaryOp::kMul && op != te::BinaryOp::kMax && op != te::BinaryOp::kMin)
        return std::nullopt;
    if (r.combine->a->kind != te::ExprKind::kBufferLoad) return std::nullopt;
    const auto& acc = static_cast<const te::BufferLoadNode&>(*r.combine->a);
    if (acc.buffer.get() != r.update->buffer.get() ||
        print_c_expr(acc.index, names) != print_c_expr(r.update->index, names) ||
        print_c_expr(r.init->index, names) != print_c_expr(r.update->index, names))
        return std::nullopt;
    const int64_t g = const_extent(f), b = const_extent(*r.thread);
    if (g <= 0 || b <= 0) return std::nullopt;
    r.outputs = g * b;
    if (r.outputs > kWarpReduceMaxOutputs || r.length < kWarpReduceMinLength) return std::nullopt;
    return r;
}

class CudaPrinter {
public:
    CudaPrinter(CNames& names, std::ostringstream& os) : names_(names), os_(os) {}

    /// Prints a stage nest; records the launch extents of its bound loops.
    void stmt(const tir::Stmt& s, int indent) {
        if (!s) return;
        switch (s->kind) {
            case StmtKind::kFor: loop(static_cast<const tir::ForNode&>(*s), indent); break;
            case StmtKind::kStore: {
                const auto& st = static_cast<const tir::StoreNode&>(*s);
                pad(indent) << names_.buffer(st.buffer.get()) << "[" << strip_parens(print_c_expr(st.index, names_))
                            << "] = " << strip_parens(store_value_c(st.buffer->dtype, st.value, names_)) << ";\n";
                break;
            }
            case StmtKind::kSeq:
                for (const auto& x : static_cast<const tir::SeqNode&>(*s).stmts) stmt(x, indent);
                break;
            case StmtKind::kIf: {
                const auto& i = static_cast<const tir::IfNode&>(*s);
                pad(indent) << "if (" << strip_parens(print_c_expr(i.cond, names_)) << ") {\n";
                stmt(i.then_case, indent + 1);
                if (i.else_case) {
                    pad(indent) << "} else {\n";
                    stmt(i.else_case, indent + 1);
                }
                pad(indent) << "}\n";
                break;
            }
            case StmtKind::kAllocate: {
                const auto& a = static_cast<const tir::AllocateNode&>(*s);
                KILN_CHECK(a.buffer->local && a.buffer->is_static(), kUnsupported)
                    << "CUDA emitter: buffer '" << a.buffer->name << "' is allocated inside a stage nest";
                pad(indent) << "{\n";
                pad(indent + 1) << dtype_c_type(a.buffer->dtype) << " " << names_.buffer(a.buffer.get()) << "["
                                << a.buffer->numel() << "];\n";
                stmt(a.body, indent + 1);
                pad(indent) << "}\n";
                break;
            }
            case StmtKind::kPrefetch: break;  // a CPU cache hint
        }
    }

    int64_t grid = 1, block = 1;
    bool warp_reductions_ = true;

private:
    /// One warp per output: the lanes stride over the reduction (reading a row coalesced), then
    /// combine their partial values by shuffles; lane 0 stores. Replaces one thread per output,
    /// which leaves long rows (softmax, layer norm) to a few threads reading strided memory.
    void warp_reduction(const ThreadReduction& r, int indent) {
        const int64_t block_b = const_extent(*r.thread);
        const DType acc_t = r.combine->dtype;
        const te::Var acc = te::make_var("kiln_acc", acc_t), other = te::make_var("kiln_other", acc_t);
        const te::Var warp = te::make_var("kiln_warp"), lane = te::make_var("kiln_lane"), flat = te::make_var("kiln_r");
        const std::string a = names_.var(acc.get()), o = names_.var(other.get()), w = names_.var(warp.get()),
                          l = names_.var(lane.get()), rr = names_.var(flat.get()), ct = dtype_c_type(acc_t);
        grid = std::max(grid, (r.outputs + kReduceWarpsPerBlock - 1) / kReduceWarpsPerBlock);
        block = std::max(block, kReduceWarpsPerBlock * 32);
        pad(indent) << "{\n";
        pad(indent + 1) << "const int64_t " << w << " = (int64_t)blockIdx.x * " << kReduceWarpsPerBlock
                        << "LL + (int64_t)(threadIdx.x >> 5);\n";
        pad(indent + 1) << "const int64_t " << l << " = (int64_t)(threadIdx.x & 31);\n";
        pad(indent + 1) << "if (" << w << " < " << r.outputs << "LL) {\n";
        pad(indent + 2) << "const int64_t " << names_.var(r.block->var.get()) << " = " << w << " / " << block_b << "LL;\n";
        pad(indent + 2) << "const int64_t " << names_.var(r.thread->var.get()) << " = " << w << " % " << block_b << "LL;\n";
        pad(indent + 2) << ct << " " << a << " = " << strip_parens(print_c_expr(r.init->value, names_)) << ";\n";
        pad(indent + 2) << "for (int64_t " << rr << " = " << l << "; " << rr << " < " << r.length << "LL; " << rr
                        << " += 32) {\n";
        int64_t inner = r.length;
        for (const tir::ForNode* loop : r.reduce) {  // r1 outermost: rr = ((r1 * E2) + r2) * E3 + r3
            const int64_t e = const_extent(*loop);
            inner /= e;
            pad(indent + 3) << "const int64_t " << names_.var(loop->var.get()) << " = (" << rr << " / " << inner << "LL) % "
                            << e << "LL;\n";
        }
        pad(indent + 3) << a << " = " << strip_parens(print_c_expr(te::binary(r.combine->op, acc, r.combine->b), names_))
                        << ";\n";
        pad(indent + 2) << "}\n";
        pad(indent + 2) << "for (int kiln_off = 16; kiln_off > 0; kiln_off >>= 1) {\n";
        pad(indent + 3) << "const " << ct << " " << o << " = __shfl_xor_sync(0xffffffffu, " << a << ", kiln_off);\n";
        pad(indent + 3) << a << " = " << strip_parens(print_c_expr(te::binary(r.combine->op, acc, other), names_)) << ";\n";
        pad(indent + 2) << "}\n";
        pad(indent + 2) << "if (" << l << " == 0) " << names_.buffer(r.update->buffer.get()) << "["
                        << strip_parens(print_c_expr(r.update->index, names_))
                        << "] = " << strip_parens(store_value_c(r.update->buffer->dtype, acc, names_)) << ";\n";
        pad(indent + 1) << "}\n";
        pad(indent) << "}\n";
    }

    void loop(const tir::ForNode& f, int indent) {
        if (warp_reductions_) {
            if (std::optional<ThreadReduction> r = match_thread_reduction(f, names_)) {
                warp_reduction(*r, indent);
                return;
            }
        }
        const std::string v = names_.var(f.var.get());
        const std::string ext = strip_parens(print_c_expr(f.extent, names_));
        if (f.loop_kind == LoopKind::kBlockIdxX || f.loop_kind == LoopKind::kThreadIdxX) {
            KILN_CHECK(f.extent->kind == te::ExprKind::kIntImm, kUnsupported)
                << "CUDA emitter: loop '" << f.var->name << "' bound to " << te::loop_kind_name(f.loop_kind)
                << " has a non-constant extent " << ext;
            const int64_t e = static_cast<const te::IntImmNode&>(*f.extent).value;
            const bool is_block = f.loop_kind == LoopKind::kBlockIdxX;
            (is_block ? grid : block) = std::max(is_block ? grid : block, e);
            pad(indent) << "{\n";
            pad(indent + 1) << "const int64_t " << v << " = (int64_t)" << (is_block ? "blockIdx.x" : "threadIdx.x") << ";\n";
            pad(indent + 1) << "if (" << v << " < " << ext << ") {\n";
            stmt(f.body, indent + 2);
            pad(indent + 1) << "}\n";
            pad(indent) << "}\n";
            return;
        }
        if (f.loop_kind == LoopKind::kUnrolled) pad(indent) << "#pragma unroll\n";
        pad(indent) << "for (int64_t " << v << " = 0; " << v << " < " << ext << "; ++" << v << ") {\n";
        stmt(f.body, indent + 1);
        pad(indent) << "}\n";
    }
    std::ostringstream& pad(int indent) {
        for (int i = 0; i < indent; ++i) os_ << "    ";
        return os_;
    }
    CNames& names_;
    std::ostringstream& os_;
};

}  // namespace

// CudaEmitOptions::stop_flag: the two parameters, and the block-uniform check at each entry's
// start (a block's threads all skip or all run: a warp reduction's shuffles need every lane).
constexpr const char* kStopParams = "const volatile int* __restrict__ kiln_stop, int* __restrict__ kiln_cut";
constexpr const char* kStopCheck =
    "  __shared__ int kiln_stopped;\n"
    "  if (threadIdx.x == 0) kiln_stopped = *kiln_stop;\n"
    "  __syncthreads();\n"
    "  if (kiln_stopped) {\n"
    "    if (threadIdx.x == 0) *kiln_cut = 1;\n"
    "    return;\n"
    "  }\n";

CudaKernel emit_cuda(const tir::PrimFunc& f, const CudaEmitOptions& opts) {
    KILN_CHECK(f.dims.empty(), kUnsupported) << "CUDA emitter: kernel '" << f.name << "' has symbolic dims";
    CudaKernel k;
    CNames names;
    std::vector<const te::BufferNode*> buffers;
    for (const tir::Buffer& b : f.params) buffers.push_back(b.get());
    tir::Stmt body = f.body;
    while (body && body->kind == StmtKind::kAllocate) {  // the stage intermediates: scratch
        const auto& a = static_cast<const tir::AllocateNode&>(*body);
        KILN_CHECK(a.buffer->is_static(), kUnsupported) << "CUDA emitter: intermediate '" << a.buffer->name << "' is symbolic";
        buffers.push_back(a.buffer.get());
        k.scratch_bytes.push_back(static_cast<size_t>(a.buffer->numel()) * dtype_size(a.buffer->dtype));
        k.scratch_names.push_back(a.buffer->name);
        body = a.body;
    }
    std::vector<tir::Stmt> nests;
    if (body && body->kind == StmtKind::kSeq)
        nests = static_cast<const tir::SeqNode&>(*body).stmts;
    else if (body)
        nests.push_back(body);
    std::string signature;
    for (const te::BufferNode* b : buffers)
        signature += std::string(signature.empty() ? "" : ", ") + dtype_c_type(b->dtype) +
                     (f.params_may_alias ? "* " : "* __restrict__ ") + names.buffer(b);
    if (opts.stop_flag) signature += std::string(signature.empty() ? "" : ", ") + kStopParams;
    std::ostringstream os;
    os << cuda_prelude() << "\n";
    for (size_t s = 0; s < nests.size(); ++s) {
        std::ostringstream nest;
        CudaPrinter p(names, nest);
        p.warp_reductions_ = opts.warp_reductions;
        p.stmt(nests[s], 1);
        CudaLaunch l{f.name + "_s" + std::to_string(s), p.grid, p.block};
        KILN_CHECK(l.block <= 1024 && l.grid < (int64_t{1} << 31), kUnsupported)
            << "CUDA emitter: stage " << s << " of '" << f.name << "' launches " << l.grid << " blocks of " << l.block
            << " threads (at most 2^31-1 blocks of 1024)";
        names.reserve_name(l.entry);
        os << "extern \"C\" __global__ void __launch_bounds__(" << std::min<int64_t>(l.block, 1024) << ") " << l.entry
           << "(" << signature << ") {\n"
           << (opts.stop_flag ? kStopCheck : "") << nest.str() << "}\n\n";
        k.launches.push_back(l);
    }
    k.source = os.str();
    return k;
}

}  // namespace kiln::codegen
