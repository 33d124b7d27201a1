#include "codegen/cuda_emitter.h"

#include <algorithm>
#include <sstream>

#include "codegen/c_expr_printer.h"
#include "codegen/cuda_prelude.h"
#include "support/error.h"

namespace kiln::codegen {
namespace {

using te::LoopKind;
using tir::StmtKind;

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
        }
    }

    int64_t grid = 1, block = 1;

private:
    void loop(const tir::ForNode& f, int indent) {
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

CudaKernel emit_cuda(const tir::PrimFunc& f) {
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
    std::ostringstream os;
    os << cuda_prelude() << "\n";
    for (size_t s = 0; s < nests.size(); ++s) {
        std::ostringstream nest;
        CudaPrinter p(names, nest);
        p.stmt(nests[s], 1);
        CudaLaunch l{f.name + "_s" + std::to_string(s), p.grid, p.block};
        KILN_CHECK(l.block <= 1024 && l.grid < (int64_t{1} << 31), kUnsupported)
            << "CUDA emitter: stage " << s << " of '" << f.name << "' launches " << l.grid << " blocks of " << l.block
            << " threads (at most 2^31-1 blocks of 1024)";
        names.reserve_name(l.entry);
        os << "extern \"C\" __global__ void __launch_bounds__(" << std::min<int64_t>(l.block, 1024) << ") " << l.entry
           << "(" << signature << ") {\n"
           << nest.str() << "}\n\n";
        k.launches.push_back(l);
    }
    k.source = os.str();
    return k;
}

}  // namespace kiln::codegen
