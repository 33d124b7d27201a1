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

Stmt partition_for(const ForNode& n) {
    int64_t extent;
    std::set<int64_t> cuts;
    if (n.loop_kind != te::LoopKind::kVectorized || !int_imm(n.extent, &extent) ||
        !body_cuts(n.body, n.var.get(), cuts))
        return nullptr;
    std::vector<int64_t> at = {0};
    for (int64_t c : cuts)
        if (c > 0 && c < extent) at.push_back(c);
    if (at.size() == 1 || at.size() > kMaxPieces) return nullptr;
    at.push_back(extent);
    std::vector<Stmt> pieces;
    for (size_t k = 0; k + 1 < at.size(); ++k) {
        Var v = te::make_var(n.var->name + "_p" + std::to_string(k));
        Stmt body = substitute(n.body, {{n.var.get(), Expr(v) + te::int_imm(at[k])}});
        pieces.push_back(make_for(v, te::int_imm(at[k + 1] - at[k]), n.loop_kind, body));
    }
    return make_seq(std::move(pieces));
}

}  // namespace

PrimFunc partition_loops(PrimFunc f) {
    // Only a loop without nested loops splits, so rewriting innermost first changes nothing.
    f.body = rewrite_loops(f.body, [](const ForNode& n, const Stmt&) { return partition_for(n); });
    return f;
}

}  // namespace kiln::tir
