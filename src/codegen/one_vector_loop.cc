// keep_for_vectorizer (see the header): a walk over the loop body's load and store indices.
#include "codegen/one_vector_loop.h"

#include "codegen/c_expr_printer.h"
#include "tir/affine.h"

namespace kiln::codegen {
namespace {

using te::ExprKind;
using tir::StmtKind;

bool unit_or_invariant(const te::Expr& e, const te::VarNode* v) {
    const std::optional<int64_t> step = index_step(e, v);
    return step == 0 || step == 1;
}

/// Whether every load inside `e` has a unit-stride or invariant index in `v`.
bool loads_ok(const te::Expr& e, const te::VarNode* v) {
    if (!e) return true;
    switch (e->kind) {
        case ExprKind::kBinary: {
            const auto& b = static_cast<const te::BinaryNode&>(*e);
            return loads_ok(b.a, v) && loads_ok(b.b, v);
        }
        case ExprKind::kUnary: return loads_ok(static_cast<const te::UnaryNode&>(*e).a, v);
        case ExprKind::kCast: return loads_ok(static_cast<const te::CastNode&>(*e).a, v);
        case ExprKind::kSelect: {
            const auto& s = static_cast<const te::SelectNode&>(*e);
            return loads_ok(s.cond, v) && loads_ok(s.t, v) && loads_ok(s.f, v);
        }
        case ExprKind::kBufferLoad: {
            const auto& l = static_cast<const te::BufferLoadNode&>(*e);
            return unit_or_invariant(l.index, v) && loads_ok(l.index, v);
        }
        case ExprKind::kIntImm:
        case ExprKind::kFloatImm:
        case ExprKind::kVar: return true;
        default: return false;  // no TensorRead or Reduce in tir: refuse rather than guess
    }
}

bool accesses_ok(const tir::Stmt& s, const te::VarNode* v) {
    if (!s) return true;
    switch (s->kind) {
        case StmtKind::kFor: {
            const auto& f = static_cast<const tir::ForNode&>(*s);
            return loads_ok(f.extent, v) && accesses_ok(f.body, v);
        }
        case StmtKind::kStore: {
            const auto& st = static_cast<const tir::StoreNode&>(*s);
            return unit_or_invariant(st.index, v) && loads_ok(st.index, v) && loads_ok(st.value, v);
        }
        case StmtKind::kSeq:
            for (const auto& x : static_cast<const tir::SeqNode&>(*s).stmts)
                if (!accesses_ok(x, v)) return false;
            return true;
        case StmtKind::kIf: {
            const auto& i = static_cast<const tir::IfNode&>(*s);
            return loads_ok(i.cond, v) && accesses_ok(i.then_case, v) && accesses_ok(i.else_case, v);
        }
        case StmtKind::kAllocate: return accesses_ok(static_cast<const tir::AllocateNode&>(*s).body, v);
        case StmtKind::kPrefetch: return false;  // one per lane would be no vector operation
    }
    return false;
}

}  // namespace

std::optional<int64_t> index_step(const te::Expr& e, const te::VarNode* v) {
    int64_t step = 0;
    if (!expr_uses_var(e, v)) return step;
    for (const auto& [atom, coeff] : tir::to_affine(e).terms) {
        if (!expr_uses_var(atom, v)) continue;
        if (atom.get() != v) return std::nullopt;
        step = coeff;  // atoms are distinct: v is one term at most
    }
    return step;
}

bool keep_for_vectorizer(const tir::ForNode& f) {
    if (f.loop_kind != te::LoopKind::kVectorized || f.extent->kind != ExprKind::kIntImm) return false;
    const int64_t n = static_cast<const te::IntImmNode&>(*f.extent).value;
    return n > 1 && n <= 16 && accesses_ok(f.body, f.var.get());
}

}  // namespace kiln::codegen
