// unswitch_loops (see the header): find an invariant select in a loop body, split the body on
// its condition, repeat in each copy.
#include "tir/unswitch_loops.h"

#include <memory>
#include <string>
#include <unordered_set>

namespace kiln::tir {
namespace {

constexpr int kMaxCopies = 64;

using VarSet = std::unordered_set<const te::VarNode*>;

void bound_vars(const Stmt& s, VarSet& out) {
    if (!s) return;
    switch (s->kind) {
        case StmtKind::kFor: {
            const auto& n = static_cast<const ForNode&>(*s);
            out.insert(n.var.get());
            bound_vars(n.body, out);
            return;
        }
        case StmtKind::kSeq:
            for (const Stmt& c : static_cast<const SeqNode&>(*s).stmts) bound_vars(c, out);
            return;
        case StmtKind::kIf: {
            const auto& n = static_cast<const IfNode&>(*s);
            bound_vars(n.then_case, out);
            bound_vars(n.else_case, out);
            return;
        }
        case StmtKind::kAllocate: return bound_vars(static_cast<const AllocateNode&>(*s).body, out);
        case StmtKind::kStore:
        case StmtKind::kPrefetch: return;
    }
}

/// Whether `e` reads no memory and none of `vars` (a condition fixed for the body).
bool invariant(const Expr& e, const VarSet& vars) {
    if (!e) return true;
    switch (e->kind) {
        case te::ExprKind::kIntImm:
        case te::ExprKind::kFloatImm: return true;
        case te::ExprKind::kVar: return !vars.count(static_cast<const te::VarNode*>(e.get()));
        case te::ExprKind::kBinary: {
            const auto& b = static_cast<const te::BinaryNode&>(*e);
            return invariant(b.a, vars) && invariant(b.b, vars);
        }
        case te::ExprKind::kUnary: return invariant(static_cast<const te::UnaryNode&>(*e).a, vars);
        case te::ExprKind::kCast: return invariant(static_cast<const te::CastNode&>(*e).a, vars);
        case te::ExprKind::kSelect: {
            const auto& s = static_cast<const te::SelectNode&>(*e);
            return invariant(s.cond, vars) && invariant(s.t, vars) && invariant(s.f, vars);
        }
        default: return false;  // memory reads, reductions
    }
}

/// The condition of the first select in `e` whose condition is invariant and reads the loop's
/// own variable (`outer`), or null. A condition on the dims alone is the same for every
/// iteration of every loop: a symbolic row reduction's tail lanes (16 such selects in the
/// combine of a lane_reduce) split its body 64 times over for nothing, a 1.4 MB kernel.
Expr find_in_expr(const Expr& e, const VarSet& vars, const VarSet& outer) {
    if (!e) return nullptr;
    switch (e->kind) {
        case te::ExprKind::kBinary: {
            const auto& b = static_cast<const te::BinaryNode&>(*e);
            if (Expr c = find_in_expr(b.a, vars, outer)) return c;
            return find_in_expr(b.b, vars, outer);
        }
        case te::ExprKind::kUnary: return find_in_expr(static_cast<const te::UnaryNode&>(*e).a, vars, outer);
        case te::ExprKind::kCast: return find_in_expr(static_cast<const te::CastNode&>(*e).a, vars, outer);
        case te::ExprKind::kBufferLoad: return find_in_expr(static_cast<const te::BufferLoadNode&>(*e).index, vars, outer);
        case te::ExprKind::kSelect: {
            const auto& s = static_cast<const te::SelectNode&>(*e);
            if (invariant(s.cond, vars) && !invariant(s.cond, outer)) return s.cond;
            if (Expr c = find_in_expr(s.cond, vars, outer)) return c;
            if (Expr c = find_in_expr(s.t, vars, outer)) return c;
            return find_in_expr(s.f, vars, outer);
        }
        default: return nullptr;
    }
}

Expr find_in_stmt(const Stmt& s, const VarSet& vars, const VarSet& outer) {
    if (!s) return nullptr;
    switch (s->kind) {
        case StmtKind::kFor: return find_in_stmt(static_cast<const ForNode&>(*s).body, vars, outer);
        case StmtKind::kSeq:
            for (const Stmt& c : static_cast<const SeqNode&>(*s).stmts)
                if (Expr e = find_in_stmt(c, vars, outer)) return e;
            return nullptr;
        case StmtKind::kIf: {
            const auto& n = static_cast<const IfNode&>(*s);
            if (Expr e = find_in_expr(n.cond, vars, outer)) return e;
            if (Expr e = find_in_stmt(n.then_case, vars, outer)) return e;
            return find_in_stmt(n.else_case, vars, outer);
        }
        case StmtKind::kAllocate: return find_in_stmt(static_cast<const AllocateNode&>(*s).body, vars, outer);
        case StmtKind::kStore: {
            const auto& n = static_cast<const StoreNode&>(*s);
            if (Expr e = find_in_expr(n.index, vars, outer)) return e;
            return find_in_expr(n.value, vars, outer);
        }
        case StmtKind::kPrefetch: return nullptr;
    }
    return nullptr;
}

/// `e` with every select on condition `cond` (the same text) replaced by its `take` branch.
Expr decide(const Expr& e, const std::string& cond, bool take) {
    if (!e) return e;
    switch (e->kind) {
        case te::ExprKind::kBinary: {
            const auto& b = static_cast<const te::BinaryNode&>(*e);
            Expr a = decide(b.a, cond, take), c = decide(b.b, cond, take);
            return a == b.a && c == b.b ? e : te::binary(b.op, a, c);
        }
        case te::ExprKind::kUnary: {
            const auto& u = static_cast<const te::UnaryNode&>(*e);
            Expr a = decide(u.a, cond, take);
            return a == u.a ? e : te::unary(u.op, a);
        }
        case te::ExprKind::kCast: {
            const auto& c = static_cast<const te::CastNode&>(*e);
            Expr a = decide(c.a, cond, take);
            return a == c.a ? e : te::cast(c.dtype, a);
        }
        case te::ExprKind::kBufferLoad: {
            const auto& l = static_cast<const te::BufferLoadNode&>(*e);
            Expr i = decide(l.index, cond, take);
            return i == l.index ? e : std::make_shared<te::BufferLoadNode>(l.dtype, l.buffer, i);
        }
        case te::ExprKind::kSelect: {
            const auto& s = static_cast<const te::SelectNode&>(*e);
            if (te::expr_str(s.cond) == cond) return decide(take ? s.t : s.f, cond, take);
            Expr c = decide(s.cond, cond, take), t = decide(s.t, cond, take), f = decide(s.f, cond, take);
            return c == s.cond && t == s.t && f == s.f ? e : te::select(c, t, f);
        }
        default: return e;
    }
}

Stmt decide(const Stmt& s, const std::string& cond, bool take) {
    if (!s) return s;
    switch (s->kind) {
        case StmtKind::kFor: {
            const auto& n = static_cast<const ForNode&>(*s);
            return make_for(n.var, n.extent, n.loop_kind, decide(n.body, cond, take));
        }
        case StmtKind::kSeq: {
            std::vector<Stmt> out;
            for (const Stmt& c : static_cast<const SeqNode&>(*s).stmts) out.push_back(decide(c, cond, take));
            return make_seq(std::move(out));
        }
        case StmtKind::kIf: {
            const auto& n = static_cast<const IfNode&>(*s);
            return make_if(decide(n.cond, cond, take), decide(n.then_case, cond, take), decide(n.else_case, cond, take));
        }
        case StmtKind::kAllocate: {
            const auto& n = static_cast<const AllocateNode&>(*s);
            return make_allocate(n.buffer, decide(n.body, cond, take));
        }
        case StmtKind::kStore: {
            const auto& n = static_cast<const StoreNode&>(*s);
            return make_store(n.buffer, decide(n.index, cond, take), decide(n.value, cond, take));
        }
        case StmtKind::kPrefetch: return s;
    }
    return s;
}

/// `body` split on its invariant selects' conditions, `copies` counting the copies made.
Stmt unswitch_body(const Stmt& body, const VarSet& inner, const VarSet& outer, int& copies) {
    if (copies >= kMaxCopies) return body;
    Expr cond = find_in_stmt(body, inner, outer);
    if (!cond) return body;
    ++copies;
    const std::string text = te::expr_str(cond);
    Stmt then_case = unswitch_body(decide(body, text, true), inner, outer, copies);
    Stmt else_case = unswitch_body(decide(body, text, false), inner, outer, copies);
    return make_if(cond, then_case, else_case);
}

bool holds_loop(const Stmt& s) {
    VarSet v;
    bound_vars(s, v);
    return !v.empty();
}

}  // namespace

PrimFunc unswitch_loops(PrimFunc f) {
    f.body = rewrite_loops(f.body, [](const ForNode& n, const Stmt& body) -> Stmt {
        if (n.loop_kind != te::LoopKind::kParallel || !holds_loop(body)) return nullptr;
        VarSet inner;
        bound_vars(body, inner);
        int copies = 0;
        const VarSet outer = {n.var.get()};
        Stmt split = unswitch_body(body, inner, outer, copies);
        return split == body ? nullptr : make_for(n.var, n.extent, n.loop_kind, split);
    });
    return f;
}

}  // namespace kiln::tir
