// partition_loops (see the header): collect each vectorized loop's cut points, then rebuild it
// as a sequence of loops, one per piece.
#include "tir/partition_loops.h"

#include <algorithm>
#include <set>

namespace kiln::tir {
namespace {

constexpr size_t kMaxPieces = 8;

bool int_imm(const Expr& e, int64_t* v) {
    if (!e || e->kind != te::ExprKind::kIntImm) return false;
    *v = static_cast<const te::IntImmNode&>(*e).value;
    return true;
}

// e as a * var + k with a > 0 (var itself, var * a, plus or minus constants), else false.
bool affine_in(const Expr& e, const te::VarNode* var, int64_t* a, int64_t* k) {
    if (e.get() == var) {
        *a = 1, *k = 0;
        return true;
    }
    if (e->kind != te::ExprKind::kBinary) return false;
    const auto& b = static_cast<const te::BinaryNode&>(*e);
    int64_t c;
    if (b.op == te::BinaryOp::kMul && b.a.get() == var && int_imm(b.b, &c) && c > 0) {
        *a = c, *k = 0;
        return true;
    }
    if ((b.op == te::BinaryOp::kAdd || b.op == te::BinaryOp::kSub) && int_imm(b.b, &c) && affine_in(b.a, var, a, k)) {
        *k += b.op == te::BinaryOp::kAdd ? c : -c;
        return true;
    }
    return false;
}

int64_t floor_div(int64_t x, int64_t d) { return x / d - ((x % d != 0) && ((x < 0) != (d < 0))); }

// Adds to `cuts` the first index at which a comparison of a * var + k with a constant changes
// value, or where a min / max of it with a constant (a clamp) stops binding.
void collect_cuts(const Expr& e, const te::VarNode* var, std::set<int64_t>& cuts) {
    if (!e) return;
    switch (e->kind) {
        case te::ExprKind::kBinary: {
            using te::BinaryOp;
            const auto& b = static_cast<const te::BinaryNode&>(*e);
            int64_t a, k, c;
            const bool left = int_imm(b.b, &c) && affine_in(b.a, var, &a, &k);
            const bool right = !left && int_imm(b.a, &c) && affine_in(b.b, var, &a, &k);
            if (left || right) {
                BinaryOp op = b.op;
                if (right) {  // c OP x  ->  x OP' c
                    if (op == BinaryOp::kLT) op = BinaryOp::kGT;
                    else if (op == BinaryOp::kLE) op = BinaryOp::kGE;
                    else if (op == BinaryOp::kGT) op = BinaryOp::kLT;
                    else if (op == BinaryOp::kGE) op = BinaryOp::kLE;
                }
                // x < c flips where x >= c first: var >= ceil((c - k) / a); x <= c (a clamp's
                // bound too) where x > c first: var > floor((c - k) / a).
                if (op == BinaryOp::kLT || op == BinaryOp::kGE) cuts.insert(-floor_div(k - c, a));
                if (op == BinaryOp::kLE || op == BinaryOp::kGT || op == BinaryOp::kMin || op == BinaryOp::kMax)
                    cuts.insert(floor_div(c - k, a) + 1);
            }
            collect_cuts(b.a, var, cuts);
            collect_cuts(b.b, var, cuts);
            return;
        }
        case te::ExprKind::kUnary: return collect_cuts(static_cast<const te::UnaryNode&>(*e).a, var, cuts);
        case te::ExprKind::kCast: return collect_cuts(static_cast<const te::CastNode&>(*e).a, var, cuts);
        case te::ExprKind::kSelect: {
            const auto& s = static_cast<const te::SelectNode&>(*e);
            collect_cuts(s.cond, var, cuts);
            collect_cuts(s.t, var, cuts);
            collect_cuts(s.f, var, cuts);
            return;
        }
        case te::ExprKind::kBufferLoad:
            return collect_cuts(static_cast<const te::BufferLoadNode&>(*e).index, var, cuts);
        default: return;
    }
}

// The cuts of a loop body that holds only stores, sequences and ifs (an innermost loop).
bool body_cuts(const Stmt& s, const te::VarNode* var, std::set<int64_t>& cuts) {
    if (!s) return true;
    switch (s->kind) {
        case StmtKind::kStore: {
            const auto& n = static_cast<const StoreNode&>(*s);
            collect_cuts(n.index, var, cuts);
            collect_cuts(n.value, var, cuts);
            return true;
        }
        case StmtKind::kSeq:
            for (const Stmt& c : static_cast<const SeqNode&>(*s).stmts)
                if (!body_cuts(c, var, cuts)) return false;
            return true;
        case StmtKind::kIf: {
            const auto& n = static_cast<const IfNode&>(*s);
            collect_cuts(n.cond, var, cuts);
            return body_cuts(n.then_case, var, cuts) && body_cuts(n.else_case, var, cuts);
        }
        default: return false;  // a nested loop or allocation: leave the loop whole
    }
}

// Loop n (of static `extent`, around `body`) as one loop per piece between the cuts inside it,
// each over its range with the variable offset; null for no cut or more than kMaxPieces pieces.
Stmt split_at_cuts(const ForNode& n, const Stmt& body, int64_t extent, const std::set<int64_t>& cuts) {
    std::vector<int64_t> at = {0};
    for (int64_t c : cuts)
        if (c > 0 && c < extent) at.push_back(c);
    if (at.size() == 1 || at.size() > kMaxPieces) return nullptr;
    at.push_back(extent);
    std::vector<Stmt> pieces;
    for (size_t k = 0; k + 1 < at.size(); ++k) {
        Var v = te::make_var(n.var->name + "_p" + std::to_string(k));
        Stmt piece = substitute(body, {{n.var.get(), Expr(v) + te::int_imm(at[k])}});
        pieces.push_back(make_for(v, te::int_imm(at[k + 1] - at[k]), n.loop_kind, piece));
    }
    return make_seq(std::move(pieces));
}

Stmt partition_for(const ForNode& n) {
    int64_t extent;
    std::set<int64_t> cuts;
    if (n.loop_kind != te::LoopKind::kVectorized || !int_imm(n.extent, &extent) ||
        !body_cuts(n.body, n.var.get(), cuts))
        return nullptr;
    return split_at_cuts(n, n.body, extent, cuts);
}

// The cuts of the select conditions in `e` (their comparisons of a * var + k with constants).
void select_cuts(const Expr& e, const te::VarNode* var, std::set<int64_t>& cuts) {
    if (!e) return;
    switch (e->kind) {
        case te::ExprKind::kSelect: {
            const auto& s = static_cast<const te::SelectNode&>(*e);
            collect_cuts(s.cond, var, cuts);
            select_cuts(s.t, var, cuts);
            select_cuts(s.f, var, cuts);
            return;
        }
        case te::ExprKind::kBinary: {
            const auto& b = static_cast<const te::BinaryNode&>(*e);
            select_cuts(b.a, var, cuts);
            select_cuts(b.b, var, cuts);
            return;
        }
        case te::ExprKind::kUnary: return select_cuts(static_cast<const te::UnaryNode&>(*e).a, var, cuts);
        case te::ExprKind::kCast: return select_cuts(static_cast<const te::CastNode&>(*e).a, var, cuts);
        default: return;
    }
}

void stmt_select_cuts(const Stmt& s, const te::VarNode* var, std::set<int64_t>& cuts) {
    if (!s) return;
    switch (s->kind) {
        case StmtKind::kStore: return select_cuts(static_cast<const StoreNode&>(*s).value, var, cuts);
        case StmtKind::kSeq:
            for (const Stmt& c : static_cast<const SeqNode&>(*s).stmts) stmt_select_cuts(c, var, cuts);
            return;
        case StmtKind::kIf: {
            const auto& n = static_cast<const IfNode&>(*s);
            stmt_select_cuts(n.then_case, var, cuts);
            return stmt_select_cuts(n.else_case, var, cuts);
        }
        case StmtKind::kFor: return stmt_select_cuts(static_cast<const ForNode&>(*s).body, var, cuts);
        case StmtKind::kAllocate: return stmt_select_cuts(static_cast<const AllocateNode&>(*s).body, var, cuts);
        default: return;
    }
}

bool holds_vector_loop(const Stmt& s) {
    if (!s) return false;
    switch (s->kind) {
        case StmtKind::kFor: {
            const auto& n = static_cast<const ForNode&>(*s);
            return n.loop_kind == te::LoopKind::kVectorized || holds_vector_loop(n.body);
        }
        case StmtKind::kSeq:
            for (const Stmt& c : static_cast<const SeqNode&>(*s).stmts)
                if (holds_vector_loop(c)) return true;
            return false;
        case StmtKind::kIf: {
            const auto& n = static_cast<const IfNode&>(*s);
            return holds_vector_loop(n.then_case) || holds_vector_loop(n.else_case);
        }
        case StmtKind::kAllocate: return holds_vector_loop(static_cast<const AllocateNode&>(*s).body);
        default: return false;
    }
}

// A serial loop around a vectorized one, split where a select on its variable flips: a Concat
// along the last axis at a multiple of the vector length (`select(i_o < 100, a, b)` once the
// simplifier dropped the aligned lane, YOLO's heads) reads both inputs in every lane otherwise.
// Only select conditions cut here: a serial loop's clamps (a pad's edge rows) stay whole.
Stmt partition_serial(const ForNode& n, const Stmt& body) {
    int64_t extent;
    if (n.loop_kind != te::LoopKind::kSerial || !int_imm(n.extent, &extent) || !holds_vector_loop(body)) return nullptr;
    std::set<int64_t> cuts;
    stmt_select_cuts(body, n.var.get(), cuts);
    return split_at_cuts(n, body, extent, cuts);
}

}  // namespace

PrimFunc partition_loops(PrimFunc f) {
    // Innermost first: a vectorized loop without nested loops splits on its own (its body is
    // unchanged by the rewrite); a serial loop splits around its rewritten body.
    f.body = rewrite_loops(f.body, [](const ForNode& n, const Stmt& body) {
        if (n.loop_kind == te::LoopKind::kVectorized) return partition_for(n);
        return partition_serial(n, body);
    });
    return f;
}

}  // namespace kiln::tir
