#include "codegen/invariant_divisions.h"

#include <unordered_set>

namespace kiln::codegen {
namespace {

using te::ExprKind;
using tir::StmtKind;

class Collector {
public:
    std::vector<te::Expr> found;

    void stmt(const tir::Stmt& s) {
        if (!s) return;
        switch (s->kind) {
            case StmtKind::kFor: {  // an expression can only read the loops around it: those open here
                const auto& f = static_cast<const tir::ForNode&>(*s);
                expr(f.extent);
                inner_.insert(f.var.get());
                stmt(f.body);
                inner_.erase(f.var.get());
                break;
            }
            case StmtKind::kStore: {
                const auto& st = static_cast<const tir::StoreNode&>(*s);
                expr(st.index);
                expr(st.value);
                break;
            }
            case StmtKind::kSeq:
                for (const auto& x : static_cast<const tir::SeqNode&>(*s).stmts) stmt(x);
                break;
            case StmtKind::kIf: {
                const auto& i = static_cast<const tir::IfNode&>(*s);
                expr(i.cond);
                stmt(i.then_case);
                stmt(i.else_case);
                break;
            }
            case StmtKind::kAllocate: stmt(static_cast<const tir::AllocateNode&>(*s).body); break;
            case StmtKind::kPrefetch: expr(static_cast<const tir::PrefetchNode&>(*s).index); break;
        }
    }

private:
    /// Whether `e` is invariant in the inner loops and free of loads; records the divisions.
    bool expr(const te::Expr& e) {
        if (!e) return true;
        switch (e->kind) {
            case ExprKind::kIntImm: case ExprKind::kFloatImm: return true;
            case ExprKind::kVar: return !inner_.count(static_cast<const te::VarNode*>(e.get()));
            case ExprKind::kBinary: {
                const auto& b = static_cast<const te::BinaryNode&>(*e);
                const bool ia = expr(b.a), ib = expr(b.b);
                const bool inv = ia && ib;
                if (inv && (b.op == te::BinaryOp::kFloorDiv || b.op == te::BinaryOp::kFloorMod) &&
                    dtype_is_int(e->dtype) && b.b->kind != ExprKind::kIntImm)
                    found.push_back(e);
                return inv;
            }
            case ExprKind::kUnary: return expr(static_cast<const te::UnaryNode&>(*e).a);
            case ExprKind::kCast: return expr(static_cast<const te::CastNode&>(*e).a);
            case ExprKind::kSelect: {
                const auto& s = static_cast<const te::SelectNode&>(*e);
                const bool c = expr(s.cond), t = expr(s.t), f = expr(s.f);
                return c && t && f;
            }
            case ExprKind::kBufferLoad: expr(static_cast<const te::BufferLoadNode&>(*e).index); return false;
            default: return false;
        }
    }

    std::unordered_set<const te::VarNode*> inner_;
};

}  // namespace

std::vector<te::Expr> invariant_divisions(const tir::Stmt& body) {
    Collector c;
    c.stmt(body);
    return std::move(c.found);
}

}  // namespace kiln::codegen
