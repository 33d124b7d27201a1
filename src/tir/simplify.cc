// The tir simplifier: bottom-up rewriting of expressions with interval knowledge from the
// enclosing loops (a loop var of extent n lies in [0, n-1]), and statement cleanup.
//
// Every rewrite is exact for the interpreter's semantics:
//  - integer identities (x+0, x-0, x*1, x*0, x/1) and reassociation of constants
//    ((x+c1)+c2, (x*c1)*c2) hold in wrap-around arithmetic; float rules are limited to x*1, x/1,
//    x-0 (exact in IEEE);
//  - floordiv/floormod use floor semantics, for which floordiv(x + y*k*c, c) = floordiv(x, c) +
//    y*k holds for every sign; range-based rules (floordiv(x, c) = 0, floormod(x, c) = x,
//    comparisons, min/max) apply only when the interval of x is known (loop vars, constants,
//    and + - * floordiv floormod of those, with no risk of overflow);
//  - loops of extent 1 become their body with the var replaced by 0, loops of extent <= 0 and
//    Ifs with a provable condition are removed.
#include "tir/simplify.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <unordered_map>

#include "support/error.h"
#include "tir/affine.h"

namespace kiln::tir {

using te::BinaryOp;
using te::ExprKind;

namespace {

struct Range {
    int64_t lo, hi;  // inclusive
};
constexpr int64_t kSafe = int64_t{1} << 61;

bool imm_int(const Expr& e, int64_t* v) {
    if (e->kind != ExprKind::kIntImm) return false;
    *v = static_cast<const te::IntImmNode&>(*e).value;
    return true;
}
bool is_float_value(const Expr& e, double v) {
    return e->kind == ExprKind::kFloatImm && static_cast<const te::FloatImmNode&>(*e).value == v;
}
const te::BinaryNode* as_binary(const Expr& e, BinaryOp op) {
    if (e->kind != ExprKind::kBinary) return nullptr;
    const auto* n = static_cast<const te::BinaryNode*>(e.get());
    return n->op == op ? n : nullptr;
}
int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
std::optional<Range> checked(int64_t lo, int64_t hi) {
    if (lo < -kSafe || hi > kSafe || lo > hi) return std::nullopt;
    return Range{lo, hi};
}

// True if `e` mentions variable `v`.
bool mentions(const Expr& e, const te::VarNode* v) {
    if (!e) return false;
    switch (e->kind) {
        case ExprKind::kVar: return e.get() == v;
        case ExprKind::kBinary: {
            const auto& n = static_cast<const te::BinaryNode&>(*e);
            return mentions(n.a, v) || mentions(n.b, v);
        }
        case ExprKind::kUnary: return mentions(static_cast<const te::UnaryNode&>(*e).a, v);
        case ExprKind::kCast: return mentions(static_cast<const te::CastNode&>(*e).a, v);
        case ExprKind::kSelect: {
            const auto& n = static_cast<const te::SelectNode&>(*e);
            return mentions(n.cond, v) || mentions(n.t, v) || mentions(n.f, v);
        }
        case ExprKind::kBufferLoad: return mentions(static_cast<const te::BufferLoadNode&>(*e).index, v);
        default: return false;
    }
}

// True if `e` reads no buffer (its value cannot change while a loop body runs).
bool reads_no_buffer(const Expr& e) {
    switch (e->kind) {
        case ExprKind::kIntImm:
        case ExprKind::kFloatImm:
        case ExprKind::kVar: return true;
        case ExprKind::kBinary: {
            const auto& n = static_cast<const te::BinaryNode&>(*e);
            return reads_no_buffer(n.a) && reads_no_buffer(n.b);
        }
        case ExprKind::kUnary: return reads_no_buffer(static_cast<const te::UnaryNode&>(*e).a);
        case ExprKind::kCast: return reads_no_buffer(static_cast<const te::CastNode&>(*e).a);
        default: return false;
    }
}

// x*k - floordiv(x, c)*(c*k)  ->  floormod(x, c)*k: exact, since x = floordiv(x, c)*c +
// floormod(x, c) for c > 0 (the tail extent of a split of a symbolic extent).
void fold_floormod(AffineSum& s) {
    for (size_t i = 0; i < s.terms.size(); ++i) {
        const te::BinaryNode* d = as_binary(s.terms[i].first, BinaryOp::kFloorDiv);
        int64_t c;
        if (!d || !imm_int(d->b, &c) || c <= 0 || s.terms[i].second % c != 0) continue;
        const int64_t k = -s.terms[i].second / c;
        for (size_t j = 0; j < s.terms.size(); ++j) {
            if (j == i || s.terms[j].second != k || !struct_equal(s.terms[j].first, d->a)) continue;
            s.terms[j].first = te::floormod(d->a, d->b);
            s.terms.erase(s.terms.begin() + static_cast<long>(i));
            return fold_floormod(s);
        }
    }
}

class Simplifier {
public:
    Expr mutate(const Expr& e);
    Stmt mutate(const Stmt& s);

private:
    Stmt shrink_guarded_loop(const ForNode& n, const Expr& ext, const Stmt& body);
    std::optional<Range> bound(const Expr& e) const;
    Expr simplify_binary(BinaryOp op, const Expr& a, const Expr& b);
    Expr simplify_int(BinaryOp op, const Expr& a, const Expr& b);
    Expr divide_affine(bool is_div, const Expr& a, int64_t c);
    Expr drop_aligned_remainder(BinaryOp op, const Expr& a, int64_t c);

    std::unordered_map<const te::VarNode*, Range> ranges_;
};

std::optional<Range> Simplifier::bound(const Expr& e) const {
    if (e->dtype != DType::kInt64) return std::nullopt;
    switch (e->kind) {
        case ExprKind::kIntImm:
            return checked(static_cast<const te::IntImmNode&>(*e).value,
                           static_cast<const te::IntImmNode&>(*e).value);
        case ExprKind::kVar: {
            auto it = ranges_.find(static_cast<const te::VarNode*>(e.get()));
            if (it == ranges_.end()) return std::nullopt;
            return it->second;
        }
        case ExprKind::kBinary: {
            const auto& n = static_cast<const te::BinaryNode&>(*e);
            if (n.a->dtype != DType::kInt64 || n.b->dtype != DType::kInt64) return std::nullopt;
            auto a = bound(n.a);
            auto b = bound(n.b);
            int64_t c;
            if (n.op == BinaryOp::kFloorMod && imm_int(n.b, &c) && c > 0 && !a)
                return Range{0, c - 1};  // any x (a symbolic dim): floormod(x, c) in [0, c)
            if (!a || !b) return std::nullopt;
            switch (n.op) {
                case BinaryOp::kAdd: return checked(a->lo + b->lo, a->hi + b->hi);
                case BinaryOp::kSub: return checked(a->lo - b->hi, a->hi - b->lo);
                case BinaryOp::kMul: {
                    // |operands| <= 2^61 would overflow; only multiply small ranges.
                    const int64_t lim = int64_t{1} << 30;
                    if (a->lo < -lim || a->hi > lim || b->lo < -lim || b->hi > lim)
                        return std::nullopt;
                    int64_t p[4] = {a->lo * b->lo, a->lo * b->hi, a->hi * b->lo, a->hi * b->hi};
                    return checked(*std::min_element(p, p + 4), *std::max_element(p, p + 4));
                }
                case BinaryOp::kFloorDiv:
                    if (b->lo != b->hi || b->lo <= 0) return std::nullopt;
                    return checked(floor_div(a->lo, b->lo), floor_div(a->hi, b->lo));
                case BinaryOp::kFloorMod:
                    if (b->lo != b->hi || b->lo <= 0) return std::nullopt;
                    if (a->lo >= 0 && a->hi < b->lo) return a;
                    return Range{0, b->lo - 1};
                case BinaryOp::kMin: return checked(std::min(a->lo, b->lo), std::min(a->hi, b->hi));
                case BinaryOp::kMax: return checked(std::max(a->lo, b->lo), std::max(a->hi, b->hi));
                default: return std::nullopt;
            }
        }
        default: return std::nullopt;
    }
}

// m*A + r < c  ->  A < c/m  (and >= alike) when every other term's coefficient is a multiple of
// m, the remainder term r lies in [0, m) and m divides c: a Concat's boundary at a multiple of
// the vector length, seen from a loop split by it (`i_o*16 + i_i < 1600` is `i_o < 100`), so
// that the condition no longer reads the inner loop and unswitch_loops can hoist it.
Expr Simplifier::drop_aligned_remainder(BinaryOp op, const Expr& a, int64_t c) {
    AffineSum sa = to_affine(a);
    if (sa.constant != 0 || sa.terms.size() < 2) return nullptr;
    for (size_t j = 0; j < sa.terms.size(); ++j) {
        if (sa.terms[j].second != 1) continue;
        int64_t m = 0;
        for (size_t k = 0; k < sa.terms.size(); ++k)
            if (k != j) m = std::gcd(m, sa.terms[k].second);
        if (m <= 1 || c % m != 0) continue;
        auto r = bound(sa.terms[j].first);
        if (!r || r->lo < 0 || r->hi >= m) continue;
        AffineSum q;
        for (size_t k = 0; k < sa.terms.size(); ++k)
            if (k != j) q.terms.emplace_back(sa.terms[k].first, sa.terms[k].second / m);
        return simplify_binary(op, from_affine(q), te::int_imm(c / m));
    }
    return nullptr;
}

Expr Simplifier::simplify_int(BinaryOp op, const Expr& a, const Expr& b) {
    const DType t = a->dtype;
    int64_t c = 0;
    const bool bc = imm_int(b, &c);
    auto ra = bound(a), rb = bound(b);
    auto boolean = [](bool v) { return te::int_imm(v ? 1 : 0, DType::kBool); };
    switch (op) {
        case BinaryOp::kAdd: {
            if (bc && c == 0) return a;
            int64_t c1;
            if (bc) {
                if (auto* n = as_binary(a, BinaryOp::kAdd); n && imm_int(n->b, &c1))
                    return simplify_binary(BinaryOp::kAdd, n->a,
                                           te::binary(BinaryOp::kAdd, n->b, b));
                if (auto* n = as_binary(a, BinaryOp::kSub); n && imm_int(n->b, &c1))
                    return simplify_binary(BinaryOp::kAdd, n->a,
                                           te::binary(BinaryOp::kSub, b, n->b));
            }
            break;
        }
        case BinaryOp::kSub: {
            if (bc && c == 0) return a;
            if (a == b) return te::int_imm(0, t);
            int64_t c1;
            if (bc) {
                if (auto* n = as_binary(a, BinaryOp::kAdd); n && imm_int(n->b, &c1))
                    return simplify_binary(BinaryOp::kAdd, n->a,
                                           te::binary(BinaryOp::kSub, n->b, b));
            }
            break;
        }
        case BinaryOp::kMul: {
            if (bc && c == 1) return a;
            if (bc && c == 0) return te::int_imm(0, t);
            int64_t c1;
            if (bc) {
                if (auto* n = as_binary(a, BinaryOp::kMul); n && imm_int(n->b, &c1))
                    return simplify_binary(BinaryOp::kMul, n->a,
                                           te::binary(BinaryOp::kMul, n->b, b));
            }
            break;
        }
        case BinaryOp::kDiv:
            if (bc && c == 1) return a;
            if (bc && c > 0 && ra && ra->lo >= 0 && ra->hi < c) return te::int_imm(0, t);
            break;
        case BinaryOp::kMod:
            if (bc && c == 1) return te::int_imm(0, t);
            if (bc && c > 0 && ra && ra->lo >= 0 && ra->hi < c) return a;
            break;
        case BinaryOp::kFloorDiv:
        case BinaryOp::kFloorMod: {
            const bool is_div = op == BinaryOp::kFloorDiv;
            if (bc && c == 1) return is_div ? a : te::int_imm(0, t);
            if (!bc || c <= 0 || t != DType::kInt64) break;
            if (ra && floor_div(ra->lo, c) == floor_div(ra->hi, c)) {
                int64_t q = floor_div(ra->lo, c);
                if (is_div) return te::int_imm(q, t);
                if (q == 0) return a;
            }
            if (Expr r = divide_affine(is_div, a, c)) return r;
            break;
        }
        case BinaryOp::kMin:
        case BinaryOp::kMax:
            if (a == b) return a;
            if (ra && rb) {
                bool a_le_b = ra->hi <= rb->lo, b_le_a = rb->hi <= ra->lo;
                if (a_le_b) return op == BinaryOp::kMin ? a : b;
                if (b_le_a) return op == BinaryOp::kMin ? b : a;
            }
            break;
        case BinaryOp::kLT:
        case BinaryOp::kLE:
        case BinaryOp::kGT:
        case BinaryOp::kGE:
        case BinaryOp::kEQ:
        case BinaryOp::kNE: {
            if (!ra || !rb) break;
            if (bc && t == DType::kInt64) {
                // x + k < c  ->  x < c - k (ranges are known, so nothing overflows).
                AffineSum sa = to_affine(a);
                if (sa.constant != 0 && !sa.terms.empty()) {
                    int64_t k0 = sa.constant;
                    sa.constant = 0;
                    return simplify_binary(op, from_affine(sa), te::int_imm(c - k0));
                }
            }
            if (bc && t == DType::kInt64 && (op == BinaryOp::kLT || op == BinaryOp::kGE))
                if (Expr r = drop_aligned_remainder(op, a, c)) return r;
            const bool lt = ra->hi < rb->lo;
            const bool ge = ra->lo >= rb->hi;
            const bool le = ra->hi <= rb->lo;
            const bool gt = ra->lo > rb->hi;
            switch (op) {
                case BinaryOp::kLT:
                    if (lt) return boolean(true);
                    if (ge) return boolean(false);
                    break;
                case BinaryOp::kLE:
                    if (le) return boolean(true);
                    if (gt) return boolean(false);
                    break;
                case BinaryOp::kGT:
                    if (gt) return boolean(true);
                    if (le) return boolean(false);
                    break;
                case BinaryOp::kGE:
                    if (ge) return boolean(true);
                    if (lt) return boolean(false);
                    break;
                case BinaryOp::kEQ:
                    if (lt || gt) return boolean(false);
                    break;
                default:
                    if (lt || gt) return boolean(true);
                    break;
            }
            break;
        }
        case BinaryOp::kAnd:
            if (bc) return c ? a : boolean(false);
            break;
        case BinaryOp::kOr:
            if (bc) return c ? boolean(true) : a;
            break;
        default: break;
    }
    return te::binary(op, a, b);
}

// floordiv / floormod of an affine sum by c > 0 (floor semantics; exact for every sign):
//   a = c*Q + R  (Q: terms with coefficients divisible by c, plus floor(const/c))
//   floordiv(a, c) = Q + floordiv(R, c), floormod(a, c) = floormod(R, c);
// and when R = k*M + S with c % k == 0 and S known in [0, k):
//   floordiv(R, c) = floordiv(M, c/k), floormod(R, c) = floormod(M, c/k)*k + S.
// Returns null when nothing applies.
Expr Simplifier::divide_affine(bool is_div, const Expr& a, int64_t c) {
    AffineSum sum = to_affine(a);
    AffineSum q, r;
    q.constant = floor_div(sum.constant, c);
    r.constant = sum.constant - q.constant * c;
    for (const auto& t : sum.terms) {
        if (t.second % c == 0) {
            q.terms.emplace_back(t.first, t.second / c);
        } else {
            r.terms.push_back(t);
        }
    }
    auto finish = [&](Expr rest_div, Expr rest_mod) -> Expr {
        if (!is_div) return rest_mod;
        AffineSum out = q;
        AffineSum extra = to_affine(rest_div);
        for (const auto& t : extra.terms) out.terms.push_back(t);
        out.constant += extra.constant;
        return from_affine(to_affine(from_affine(out)));
    };
    if (r.terms.empty()) return finish(te::int_imm(0), te::int_imm(r.constant));
    Expr rest = from_affine(r);
    auto rr = bound(rest);
    if (rr && rr->lo >= 0 && rr->hi < c) return finish(te::int_imm(0), rest);
    // Split R = k*M + S with S in [0, k), trying the largest k first.
    std::vector<int64_t> ks;
    for (const auto& t : r.terms) {
        int64_t k = t.second < 0 ? -t.second : t.second;
        if (k > 1 && c % k == 0) ks.push_back(k);
    }
    std::sort(ks.rbegin(), ks.rend());
    for (int64_t k : ks) {
        AffineSum m, srest;
        srest.constant = r.constant;
        for (const auto& t : r.terms) {
            if (t.second % k == 0) {
                m.terms.emplace_back(t.first, t.second / k);
            } else {
                srest.terms.push_back(t);
            }
        }
        Expr s_expr = from_affine(srest);
        auto rs = bound(s_expr);
        if (!rs || rs->lo < 0 || rs->hi >= k) continue;
        Expr mk = from_affine(m);
        Expr ck = te::int_imm(c / k);
        Expr div = simplify_binary(BinaryOp::kFloorDiv, mk, ck);
        Expr mod = simplify_binary(
            BinaryOp::kAdd,
            simplify_binary(BinaryOp::kMul, simplify_binary(BinaryOp::kFloorMod, mk, ck),
                            te::int_imm(k)),
            s_expr);
        return finish(div, mod);
    }
    if (q.terms.empty() && q.constant == 0) return nullptr;
    return finish(te::binary(BinaryOp::kFloorDiv, rest, te::int_imm(c)),
                  te::binary(BinaryOp::kFloorMod, rest, te::int_imm(c)));
}

Expr Simplifier::simplify_binary(BinaryOp op, const Expr& a0, const Expr& b0) {
    Expr a = a0, b = b0;
    const bool commutative = op == BinaryOp::kAdd || op == BinaryOp::kMul || op == BinaryOp::kMin ||
                             op == BinaryOp::kMax || op == BinaryOp::kEQ || op == BinaryOp::kNE ||
                             op == BinaryOp::kAnd || op == BinaryOp::kOr;
    auto is_imm = [](const Expr& e) {
        return e->kind == ExprKind::kIntImm || e->kind == ExprKind::kFloatImm;
    };
    if (is_imm(a) && is_imm(b)) return te::binary(op, a, b);  // folds (unless int division by zero)
    if (commutative && is_imm(a)) std::swap(a, b);
    if (a->dtype != b->dtype) return te::binary(op, a, b);
    if (!dtype_is_float(a->dtype)) {
        Expr r = simplify_int(op, a, b);
        if (r->dtype == DType::kInt64 && r->kind == ExprKind::kBinary) {
            BinaryOp rop = static_cast<const te::BinaryNode&>(*r).op;
            if (rop == BinaryOp::kAdd || rop == BinaryOp::kSub || rop == BinaryOp::kMul) {
                AffineSum sum = to_affine(r);
                fold_floormod(sum);
                r = from_affine(sum);
            }
        }
        return r;
    }
    if ((op == BinaryOp::kMul || op == BinaryOp::kDiv) && is_float_value(b, 1.0)) return a;
    if (op == BinaryOp::kSub && is_float_value(b, 0.0)) return a;
    return te::binary(op, a, b);
}

Expr Simplifier::mutate(const Expr& e) {
    switch (e->kind) {
        case ExprKind::kIntImm:
        case ExprKind::kFloatImm:
        case ExprKind::kVar: return e;
        case ExprKind::kBinary: {
            const auto& n = static_cast<const te::BinaryNode&>(*e);
            Expr a = mutate(n.a), b = mutate(n.b);
            Expr r = simplify_binary(n.op, a, b);
            // A hand-built node with mixed operand dtypes: keep its dtype, only simplify inside.
            if (r->dtype != n.dtype) r = std::make_shared<te::BinaryNode>(n.dtype, n.op, a, b);
            return r;
        }
        case ExprKind::kUnary: {
            const auto& n = static_cast<const te::UnaryNode&>(*e);
            Expr a = mutate(n.a);
            return a == n.a ? e : te::unary(n.op, a);
        }
        case ExprKind::kSelect: {
            const auto& n = static_cast<const te::SelectNode&>(*e);
            Expr c = mutate(n.cond), t = mutate(n.t), f = mutate(n.f);
            int64_t v;
            if (imm_int(c, &v)) return v ? t : f;
            if (c == n.cond && t == n.t && f == n.f) return e;
            return std::make_shared<te::SelectNode>(n.dtype, c, t, f);
        }
        case ExprKind::kCast: {
            const auto& n = static_cast<const te::CastNode&>(*e);
            Expr a = mutate(n.a);
            return te::cast(n.dtype, a);
        }
        case ExprKind::kBufferLoad: {
            const auto& n = static_cast<const te::BufferLoadNode&>(*e);
            Expr i = mutate(n.index);
            return i == n.index ? e : std::make_shared<te::BufferLoadNode>(n.dtype, n.buffer, i);
        }
        case ExprKind::kTensorRead: {
            const auto& n = static_cast<const te::TensorReadNode&>(*e);
            std::vector<Expr> idx;
            for (const auto& i : n.indices) idx.push_back(mutate(i));
            return std::make_shared<te::TensorReadNode>(n.dtype, n.tensor, std::move(idx));
        }
        case ExprKind::kReduce: {
            const auto& n = static_cast<const te::ReduceNode&>(*e);
            return std::make_shared<te::ReduceNode>(n.dtype, n.op, mutate(n.source), n.axes);
        }
    }
    return e;
}

Stmt Simplifier::mutate(const Stmt& s) {
    if (!s) return nullptr;
    switch (s->kind) {
        case StmtKind::kFor: {
            const auto& n = static_cast<const ForNode&>(*s);
            Expr ext = mutate(n.extent);
            int64_t v;
            if (imm_int(ext, &v)) {
                if (v <= 0) return nullptr;
                if (v == 1)
                    return mutate(
                        substitute(n.body, {{n.var.get(), te::int_imm(0, n.var->dtype)}}));
                ranges_[n.var.get()] = Range{0, v - 1};
            }
            Stmt body = mutate(n.body);
            // for v in 0..n { if (v < c) body }  ->  for v in 0..min(n, c) { body }
            if (body && body->kind == StmtKind::kIf && imm_int(ext, &v)) {
                const auto& g = static_cast<const IfNode&>(*body);
                int64_t c;
                const te::BinaryNode* lt = as_binary(g.cond, BinaryOp::kLT);
                if (!g.else_case && lt && lt->a == n.var && imm_int(lt->b, &c) && c < v) {
                    ranges_.erase(n.var.get());
                    if (c <= 0) return nullptr;
                    ext = te::int_imm(c);
                    ranges_[n.var.get()] = Range{0, c - 1};
                    body = c == 1 ? mutate(substitute(g.then_case, {{n.var.get(), te::int_imm(0)}}))
                                  : mutate(g.then_case);
                    if (c == 1) {
                        ranges_.erase(n.var.get());
                        return body;
                    }
                }
            }
            ranges_.erase(n.var.get());
            if (!body) return nullptr;
            if (Stmt shrunk = shrink_guarded_loop(n, ext, body)) return shrunk;
            return make_for(n.var, ext, n.loop_kind, body);
        }
        case StmtKind::kStore: {
            const auto& n = static_cast<const StoreNode&>(*s);
            return make_store(n.buffer, mutate(n.index), mutate(n.value));
        }
        case StmtKind::kSeq: {
            std::vector<Stmt> out;
            for (const auto& c : static_cast<const SeqNode&>(*s).stmts) out.push_back(mutate(c));
            Stmt r = make_seq(std::move(out));
            if (r && r->kind == StmtKind::kSeq && static_cast<const SeqNode&>(*r).stmts.empty())
                return nullptr;
            return r;
        }
        case StmtKind::kIf: {
            const auto& n = static_cast<const IfNode&>(*s);
            Expr c = mutate(n.cond);
            int64_t v;
            if (imm_int(c, &v)) return mutate(v ? n.then_case : n.else_case);
            Stmt t = mutate(n.then_case), f = mutate(n.else_case);
            if (!t && !f) return nullptr;
            if (!t) return make_if(te::unary(te::UnaryOp::kNot, c), f);
            return make_if(c, t, f);
        }
        case StmtKind::kAllocate: {
            const auto& n = static_cast<const AllocateNode&>(*s);
            Stmt body = mutate(n.body);
            return body ? make_allocate(n.buffer, body) : nullptr;
        }
        case StmtKind::kPrefetch: {
            const auto& n = static_cast<const PrefetchNode&>(*s);
            return make_prefetch(n.buffer, mutate(n.index));
        }
    }
    return s;
}

// for v in 0..n { if (v + a < b) body }  ->  for v in 0..min(n, b - a) { body }, where a and b
// do not mention v and read no buffer (so the body cannot change them), for a symbolic bound b (a tail guard over a symbolic extent; constant
// bounds are the rule in mutate(), which keeps static kernels as they were). A negative extent
// runs no iteration, as an If that is false for every v.
Stmt Simplifier::shrink_guarded_loop(const ForNode& n, const Expr& ext, const Stmt& body) {
    if (body->kind != StmtKind::kIf) return nullptr;
    const auto& g = static_cast<const IfNode&>(*body);
    const te::BinaryNode* lt = as_binary(g.cond, BinaryOp::kLT);
    int64_t c;
    if (g.else_case || !lt || imm_int(lt->b, &c) || lt->a->dtype != DType::kInt64 ||
        mentions(lt->b, n.var.get()) || !reads_no_buffer(lt->a) || !reads_no_buffer(lt->b))
        return nullptr;
    AffineSum sum = to_affine(lt->a);
    AffineSum rest;
    rest.constant = sum.constant;
    bool found = false;
    for (const auto& t : sum.terms) {
        if (t.first.get() == n.var.get() && t.second == 1 && !found) {
            found = true;
        } else if (mentions(t.first, n.var.get())) {
            return nullptr;
        } else {
            rest.terms.push_back(t);
        }
    }
    if (!found) return nullptr;
    Expr limit = simplify_binary(BinaryOp::kSub, lt->b, from_affine(rest));
    Expr new_ext = simplify_binary(BinaryOp::kMin, ext, limit);
    return make_for(n.var, new_ext, n.loop_kind, g.then_case);
}

}  // namespace

te::Expr simplify(const te::Expr& e) {
    if (!e) return e;
    Simplifier s;
    return s.mutate(e);
}

Stmt simplify(const Stmt& st) {
    Simplifier s;
    return s.mutate(st);
}

PrimFunc simplify(PrimFunc f) {
    Simplifier s;
    f.body = s.mutate(f.body);
    if (!f.body) f.body = std::make_shared<SeqNode>(std::vector<Stmt>{});
    return f;
}

}  // namespace kiln::tir
