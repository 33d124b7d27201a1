// gathers_to_stage (see the header): one walk over the loop body's stores and their values.
#include "codegen/staged_gathers.h"

#include "codegen/one_vector_loop.h"
#include "tir/affine.h"

namespace kiln::codegen {
namespace {

using te::BinaryOp;
using te::ExprKind;
using te::UnaryOp;
using tir::StmtKind;

bool has_load(const te::Expr& e) {
    switch (e->kind) {
        case ExprKind::kBufferLoad: return true;
        case ExprKind::kBinary: {
            const auto& b = static_cast<const te::BinaryNode&>(*e);
            return has_load(b.a) || has_load(b.b);
        }
        case ExprKind::kUnary: return has_load(static_cast<const te::UnaryNode&>(*e).a);
        case ExprKind::kCast: return has_load(static_cast<const te::CastNode&>(*e).a);
        case ExprKind::kSelect: {
            const auto& s = static_cast<const te::SelectNode&>(*e);
            return has_load(s.cond) || has_load(s.t) || has_load(s.f);
        }
        default: return false;
    }
}

/// What the walk over a loop body's values found.
struct Walk {
    const te::VarNode* v;
    std::vector<te::Expr> gathers;  // BufferLoads
    std::vector<const te::BufferNode*> stored;
    bool costly = false;  // a transcendental, a float division or a power
    bool ok = true;       // false: a load neither linear in v nor stageable, or an unknown node

    void value(const te::Expr& e) {
        if (!ok) return;
        switch (e->kind) {
            case ExprKind::kIntImm:
            case ExprKind::kFloatImm:
            case ExprKind::kVar: return;
            case ExprKind::kBinary: {
                const auto& b = static_cast<const te::BinaryNode&>(*e);
                if (b.op == BinaryOp::kPow || ((b.op == BinaryOp::kDiv || b.op == BinaryOp::kMod) && dtype_is_float(b.dtype)))
                    costly = true;
                value(b.a);
                value(b.b);
                return;
            }
            case ExprKind::kUnary: {
                const auto& u = static_cast<const te::UnaryNode&>(*e);
                switch (u.op) {
                    case UnaryOp::kNeg: case UnaryOp::kNot: case UnaryOp::kAbs: case UnaryOp::kIsNaN:
                    case UnaryOp::kBitNot: case UnaryOp::kFloor: case UnaryOp::kCeil: case UnaryOp::kRound: break;
                    default: costly = true;
                }
                value(u.a);
                return;
            }
            case ExprKind::kCast: value(static_cast<const te::CastNode&>(*e).a); return;
            case ExprKind::kSelect: {
                const auto& s = static_cast<const te::SelectNode&>(*e);
                value(s.cond);
                value(s.t);
                value(s.f);
                return;
            }
            case ExprKind::kBufferLoad: {
                const auto& l = static_cast<const te::BufferLoadNode&>(*e);
                if (index_step(l.index, v)) {  // linear: GCC vectorizes it (contiguous or strided)
                    value(l.index);
                    return;
                }
                // A gather: staged if its index reads nothing and its buffer holds plain floats.
                if (has_load(l.index) || (l.buffer->dtype != DType::kFloat32 && l.buffer->dtype != DType::kFloat64)) {
                    ok = false;
                    return;
                }
                for (const te::Expr& g : gathers)
                    if (tir::struct_equal(g, e)) return;
                gathers.push_back(e);
                return;
            }
            default: ok = false; return;
        }
    }

    void stmt(const tir::Stmt& s) {
        if (!ok) return;
        switch (s->kind) {
            case StmtKind::kStore: {
                const auto& st = static_cast<const tir::StoreNode&>(*s);
                // Unit stride in v (or invariant), else the math loop would not vectorize either.
                const std::optional<int64_t> step = index_step(st.index, v);
                if (!(step == 0 || step == 1) || has_load(st.index)) {
                    ok = false;
                    return;
                }
                stored.push_back(st.buffer.get());
                value(st.value);
                return;
            }
            case StmtKind::kSeq:
                for (const auto& x : static_cast<const tir::SeqNode&>(*s).stmts) stmt(x);
                return;
            default: ok = false; return;  // loops, Ifs, allocations, prefetches: left as they are
        }
    }
};

}  // namespace

std::vector<te::Expr> gathers_to_stage(const tir::ForNode& f) {
    if (f.loop_kind != te::LoopKind::kVectorized || f.extent->kind != ExprKind::kIntImm) return {};
    const int64_t n = static_cast<const te::IntImmNode&>(*f.extent).value;
    if (n < 2 || n > 64) return {};
    Walk w{f.var.get()};
    w.stmt(f.body);
    if (!w.ok || !w.costly) return {};
    for (const te::Expr& g : w.gathers)
        for (const te::BufferNode* b : w.stored)
            if (static_cast<const te::BufferLoadNode&>(*g).buffer.get() == b) return {};
    return w.gathers;
}

}  // namespace kiln::codegen
