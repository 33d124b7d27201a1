// Symbolic dims: validation, splitting into the static/symbolic forms, evaluation with overflow
// checks, structural equality (te/dims.h).
#include "te/dims.h"

#include <algorithm>
#include <limits>

#include "support/error.h"

namespace kiln::te {

namespace {
bool dim_op(BinaryOp op) {
    return op == BinaryOp::kAdd || op == BinaryOp::kSub || op == BinaryOp::kMul ||
           op == BinaryOp::kFloorDiv || op == BinaryOp::kFloorMod || op == BinaryOp::kMin ||
           op == BinaryOp::kMax;
}

// True when `e` only uses Vars, IntImms and dim operators.
bool valid_dim(const Expr& e) {
    if (!e || dtype_is_float(e->dtype)) return false;
    switch (e->kind) {
        case ExprKind::kIntImm:
        case ExprKind::kVar: return true;
        case ExprKind::kCast: return valid_dim(static_cast<const CastNode&>(*e).a);
        case ExprKind::kBinary: {
            const auto& n = static_cast<const BinaryNode&>(*e);
            return dim_op(n.op) && valid_dim(n.a) && valid_dim(n.b);
        }
        default: return false;
    }
}

int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
}  // namespace

Var make_dim(const std::string& name) { return make_var(name, DType::kInt64); }

bool const_int(const Expr& e, int64_t* v) {
    if (!e || e->kind != ExprKind::kIntImm) return false;
    *v = static_cast<const IntImmNode&>(*e).value;
    return true;
}

Expr check_dim_expr(const Expr& e, const std::string& what) {
    KILN_CHECK(valid_dim(e), kInvalidArgument)
        << what << ": a dim must be an integer expression of dim Vars (+ - * floordiv floormod "
           "min max), got " << (e ? expr_str(e) : "null");
    Expr out = cast(DType::kInt64, e);
    int64_t v;
    KILN_CHECK(!const_int(out, &v) || v >= 0, kInvalidArgument)
        << what << ": negative dimension " << v;
    return out;
}

SplitDims split_dims(const std::vector<Expr>& dims, const std::string& what) {
    SplitDims out;
    bool symbolic = false;
    std::vector<Expr> exprs;
    for (const auto& d : dims) {
        Expr e = check_dim_expr(d, what);
        int64_t v;
        if (const_int(e, &v)) {
            out.shape.push_back(v);
        } else {
            out.shape.push_back(kDynamicDim);
            symbolic = true;
        }
        exprs.push_back(e);
    }
    if (symbolic) out.sym = std::move(exprs);
    return out;
}

void collect_dim_vars(const Expr& e, std::vector<Var>& out) {
    if (!e) return;
    switch (e->kind) {
        case ExprKind::kVar: {
            for (const auto& v : out)
                if (v.get() == e.get()) return;
            out.push_back(std::static_pointer_cast<const VarNode>(e));
            return;
        }
        case ExprKind::kCast: collect_dim_vars(static_cast<const CastNode&>(*e).a, out); return;
        case ExprKind::kBinary: {
            const auto& n = static_cast<const BinaryNode&>(*e);
            collect_dim_vars(n.a, out);
            collect_dim_vars(n.b, out);
            return;
        }
        default: return;
    }
}

int64_t eval_dim(const Expr& e, const DimValues& dims) {
    KILN_CHECK(valid_dim(e), kInvalidArgument) << "not a dim expression: " << expr_str(e);
    switch (e->kind) {
        case ExprKind::kIntImm: return static_cast<const IntImmNode&>(*e).value;
        case ExprKind::kVar: {
            auto it = dims.find(static_cast<const VarNode*>(e.get()));
            KILN_CHECK(it != dims.end(), kInvalidArgument)
                << "dim '" << static_cast<const VarNode&>(*e).name << "' has no value";
            return it->second;
        }
        case ExprKind::kCast: return eval_dim(static_cast<const CastNode&>(*e).a, dims);
        default: break;
    }
    const auto& n = static_cast<const BinaryNode&>(*e);
    int64_t a = eval_dim(n.a, dims), b = eval_dim(n.b, dims), r = 0;
    bool overflow = false;
    switch (n.op) {
        case BinaryOp::kAdd: overflow = __builtin_add_overflow(a, b, &r); break;
        case BinaryOp::kSub: overflow = __builtin_sub_overflow(a, b, &r); break;
        case BinaryOp::kMul: overflow = __builtin_mul_overflow(a, b, &r); break;
        case BinaryOp::kMin: r = std::min(a, b); break;
        case BinaryOp::kMax: r = std::max(a, b); break;
        default: {  // floordiv / floormod
            KILN_CHECK(b != 0, kInvalidArgument) << "dim expression " << expr_str(e) << ": division by zero";
            overflow = a == std::numeric_limits<int64_t>::min() && b == -1;
            if (!overflow) r = n.op == BinaryOp::kFloorDiv ? floor_div(a, b) : a - floor_div(a, b) * b;
        }
    }
    KILN_CHECK(!overflow, kInvalidArgument) << "dim expression " << expr_str(e) << " overflows int64";
    return r;
}

bool same_dim(const Expr& a, const Expr& b) {
    if (a == b) return true;
    if (!a || !b || a->kind != b->kind || a->dtype != b->dtype) return false;
    switch (a->kind) {
        case ExprKind::kIntImm:
            return static_cast<const IntImmNode&>(*a).value == static_cast<const IntImmNode&>(*b).value;
        case ExprKind::kCast:
            return same_dim(static_cast<const CastNode&>(*a).a, static_cast<const CastNode&>(*b).a);
        case ExprKind::kBinary: {
            const auto& x = static_cast<const BinaryNode&>(*a);
            const auto& y = static_cast<const BinaryNode&>(*b);
            return x.op == y.op && same_dim(x.a, y.a) && same_dim(x.b, y.b);
        }
        default: return false;  // Vars: identity only (checked above)
    }
}

bool same_dims(const std::vector<Expr>& a, const std::vector<Expr>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (!same_dim(a[i], b[i])) return false;
    return true;
}

Expr dims_product(const std::vector<Expr>& dims) {
    Expr n;
    for (const auto& d : dims) n = n ? binary(BinaryOp::kMul, n, d) : d;
    return n ? n : int_imm(1);
}

}  // namespace kiln::te
