// Affine view of int64 index expressions (see affine.h).
//
// Collection walks +, -, neg and *-by-constant, scaling coefficients as it goes (so
// (i*8 + j)*64 becomes i*512 + j*64); everything else is an atom. Coefficients are combined
// with unsigned (wrap-around) arithmetic, which keeps every rewrite exact for int64 semantics.
// After collection, pairs floordiv(x, c) with coefficient c*k and floormod(x, c) with
// coefficient k are replaced by x*k (the division identity x = floordiv(x,c)*c + floormod(x,c),
// true for every sign under floor semantics); this undoes the index split of fused loops.
#include "tir/affine.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace kiln::tir {

using te::BinaryOp;
using te::ExprKind;

namespace {
int64_t wmul(int64_t a, int64_t b) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
int64_t wadd(int64_t a, int64_t b) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}

void add_term(AffineSum& s, const te::Expr& atom, int64_t coef) {
    for (auto& t : s.terms) {
        if (struct_equal(t.first, atom)) {
            t.second = wadd(t.second, coef);
            return;
        }
    }
    s.terms.emplace_back(atom, coef);
}

void collect(const te::Expr& e, int64_t scale, AffineSum& s) {
    if (scale == 0) return;
    if (e->kind == ExprKind::kIntImm) {
        s.constant = wadd(s.constant, wmul(scale, static_cast<const te::IntImmNode&>(*e).value));
        return;
    }
    if (e->dtype == DType::kInt64 && e->kind == ExprKind::kUnary &&
        static_cast<const te::UnaryNode&>(*e).op == te::UnaryOp::kNeg) {
        collect(static_cast<const te::UnaryNode&>(*e).a, wmul(scale, -1), s);
        return;
    }
    if (e->dtype == DType::kInt64 && e->kind == ExprKind::kBinary) {
        const auto& n = static_cast<const te::BinaryNode&>(*e);
        if (n.a->dtype == DType::kInt64 && n.b->dtype == DType::kInt64) {
            if (n.op == BinaryOp::kAdd) {
                collect(n.a, scale, s);
                collect(n.b, scale, s);
                return;
            }
            if (n.op == BinaryOp::kSub) {
                collect(n.a, scale, s);
                collect(n.b, wmul(scale, -1), s);
                return;
            }
            if (n.op == BinaryOp::kMul && n.b->kind == ExprKind::kIntImm) {
                collect(n.a, wmul(scale, static_cast<const te::IntImmNode&>(*n.b).value), s);
                return;
            }
            if (n.op == BinaryOp::kMul && n.a->kind == ExprKind::kIntImm) {
                collect(n.b, wmul(scale, static_cast<const te::IntImmNode&>(*n.a).value), s);
                return;
            }
        }
    }
    add_term(s, e, scale);
}

// floordiv(x, c) / floormod(x, c) with a positive constant c: returns x and c.
bool div_parts(const te::Expr& e, BinaryOp op, te::Expr* x, int64_t* c) {
    if (e->kind != ExprKind::kBinary) return false;
    const auto& n = static_cast<const te::BinaryNode&>(*e);
    if (n.op != op || n.b->kind != ExprKind::kIntImm) return false;
    *c = static_cast<const te::IntImmNode&>(*n.b).value;
    *x = n.a;
    return *c > 0;
}

// One application of the division identity; false when no pair matches.
bool fold_div_mod_pair(AffineSum& s) {
    for (size_t i = 0; i < s.terms.size(); ++i) {
        te::Expr x;
        int64_t c;
        if (!div_parts(s.terms[i].first, BinaryOp::kFloorDiv, &x, &c)) continue;
        int64_t coef_div = s.terms[i].second;
        if (coef_div % c != 0) continue;
        int64_t k = coef_div / c;
        for (size_t j = 0; j < s.terms.size(); ++j) {
            te::Expr y;
            int64_t c2;
            if (!div_parts(s.terms[j].first, BinaryOp::kFloorMod, &y, &c2) || c2 != c) continue;
            if (s.terms[j].second != k || !struct_equal(x, y)) continue;
            s.terms.erase(s.terms.begin() + static_cast<long>(std::max(i, j)));
            s.terms.erase(s.terms.begin() + static_cast<long>(std::min(i, j)));
            collect(x, k, s);
            return true;
        }
    }
    return false;
}
}  // namespace

bool struct_equal(const te::Expr& a, const te::Expr& b) {
    if (a == b) return true;
    if (!a || !b || a->kind != b->kind || a->dtype != b->dtype) return false;
    switch (a->kind) {
        case ExprKind::kIntImm:
            return static_cast<const te::IntImmNode&>(*a).value ==
                   static_cast<const te::IntImmNode&>(*b).value;
        case ExprKind::kFloatImm: {
            double x = static_cast<const te::FloatImmNode&>(*a).value,
                   y = static_cast<const te::FloatImmNode&>(*b).value;
            return x == y && std::signbit(x) == std::signbit(y);
        }
        case ExprKind::kVar: return false;  // identity only (checked above)
        case ExprKind::kBinary: {
            const auto& x = static_cast<const te::BinaryNode&>(*a);
            const auto& y = static_cast<const te::BinaryNode&>(*b);
            return x.op == y.op && struct_equal(x.a, y.a) && struct_equal(x.b, y.b);
        }
        case ExprKind::kUnary: {
            const auto& x = static_cast<const te::UnaryNode&>(*a);
            const auto& y = static_cast<const te::UnaryNode&>(*b);
            return x.op == y.op && struct_equal(x.a, y.a);
        }
        case ExprKind::kCast:
            return struct_equal(static_cast<const te::CastNode&>(*a).a,
                                static_cast<const te::CastNode&>(*b).a);
        case ExprKind::kSelect: {
            const auto& x = static_cast<const te::SelectNode&>(*a);
            const auto& y = static_cast<const te::SelectNode&>(*b);
            return struct_equal(x.cond, y.cond) && struct_equal(x.t, y.t) && struct_equal(x.f, y.f);
        }
        case ExprKind::kBufferLoad: {
            const auto& x = static_cast<const te::BufferLoadNode&>(*a);
            const auto& y = static_cast<const te::BufferLoadNode&>(*b);
            return x.buffer == y.buffer && struct_equal(x.index, y.index);
        }
        default: return false;  // TensorRead / Reduce: compared by identity only
    }
}

AffineSum to_affine(const te::Expr& e) {
    AffineSum s;
    collect(e, 1, s);
    while (fold_div_mod_pair(s)) {
    }
    std::vector<std::pair<te::Expr, int64_t>> kept;
    for (auto& t : s.terms)
        if (t.second != 0) kept.push_back(std::move(t));
    s.terms = std::move(kept);
    return s;
}

te::Expr from_affine(const AffineSum& s) {
    // Largest coefficient first: row-major indices read outermost-first (i*512 + j*64 + k).
    auto terms = s.terms;
    auto mag_of = [](int64_t v) {
        uint64_t u = static_cast<uint64_t>(v);
        return v < 0 ? uint64_t{0} - u : u;
    };
    std::stable_sort(terms.begin(), terms.end(), [&](const auto& x, const auto& y) {
        return mag_of(x.second) > mag_of(y.second);
    });
    te::Expr out;
    for (const auto& [atom, coef] : terms) {
        if (coef == 0) continue;
        int64_t mag = coef < 0 && coef != INT64_MIN ? -coef : coef;
        bool negative = coef < 0 && coef != INT64_MIN;
        te::Expr term = mag == 1 ? atom
                                 : std::make_shared<te::BinaryNode>(DType::kInt64, BinaryOp::kMul,
                                                                    atom, te::int_imm(mag));
        if (!out) {
            out = negative ? std::make_shared<te::BinaryNode>(DType::kInt64, BinaryOp::kMul, atom,
                                                              te::int_imm(coef))
                           : term;
        } else {
            out = std::make_shared<te::BinaryNode>(
                DType::kInt64, negative ? BinaryOp::kSub : BinaryOp::kAdd, out, term);
        }
    }
    if (!out) return te::int_imm(s.constant);
    if (s.constant > 0)
        return std::make_shared<te::BinaryNode>(DType::kInt64, BinaryOp::kAdd, out,
                                                te::int_imm(s.constant));
    if (s.constant < 0 && s.constant != INT64_MIN) {
        return std::make_shared<te::BinaryNode>(DType::kInt64, BinaryOp::kSub, out,
                                                te::int_imm(-s.constant));
    }
    if (s.constant != 0)
        return std::make_shared<te::BinaryNode>(DType::kInt64, BinaryOp::kAdd, out,
                                                te::int_imm(s.constant));
    return out;
}

}  // namespace kiln::tir
