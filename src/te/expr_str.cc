// Printing (expr_str) and variable substitution of expressions.
//
// The printer uses C-like precedence so output reads naturally: `i0*64 + i1`, `(x + 1)*y`;
// multiplicative operators print without spaces, additive and comparisons with. Non-infix ops
// print as calls: floordiv(a, b), min(a, b), exp(x), f32(x) for casts, A[i, j] for tensor reads
// and A[idx] for buffer loads.
#include <cmath>
#include <cstdio>
#include <string>

#include "te/expr.h"
#include "te/tensor.h"

namespace kiln::te {

namespace {
// Higher binds tighter; 0 means "printed as a call" (never needs parens).
int precedence(const Expr& e) {
    if (e->kind == ExprKind::kUnary && static_cast<const UnaryNode&>(*e).op == UnaryOp::kNeg)
        return 6;
    if (e->kind != ExprKind::kBinary) return 10;
    switch (static_cast<const BinaryNode&>(*e).op) {
        case BinaryOp::kMul:
        case BinaryOp::kDiv:
        case BinaryOp::kMod: return 5;
        case BinaryOp::kAdd:
        case BinaryOp::kSub: return 4;
        case BinaryOp::kLT:
        case BinaryOp::kLE:
        case BinaryOp::kGT:
        case BinaryOp::kGE: return 3;
        case BinaryOp::kEQ:
        case BinaryOp::kNE: return 2;
        case BinaryOp::kAnd: return 1;
        case BinaryOp::kOr: return 0;
        default: return 10;
    }
}

const char* infix(BinaryOp op) {
    switch (op) {
        case BinaryOp::kAdd: return " + ";
        case BinaryOp::kSub: return " - ";
        case BinaryOp::kMul: return "*";
        case BinaryOp::kDiv: return "/";
        case BinaryOp::kMod: return " % ";
        case BinaryOp::kLT: return " < ";
        case BinaryOp::kLE: return " <= ";
        case BinaryOp::kGT: return " > ";
        case BinaryOp::kGE: return " >= ";
        case BinaryOp::kEQ: return " == ";
        case BinaryOp::kNE: return " != ";
        case BinaryOp::kAnd: return " && ";
        case BinaryOp::kOr: return " || ";
        default: return nullptr;
    }
}

std::string float_str(double v) {
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (std::isnan(v)) return "nan";
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.9g", v);
    std::string s = buf;
    if (s.find_first_of(".en") == std::string::npos) s += ".0";
    return s;
}

std::string paren_if(const Expr& e, bool need) {
    std::string s = expr_str(e);
    return need ? "(" + s + ")" : s;
}

std::string join(const std::vector<Expr>& xs) {
    std::string s;
    for (size_t i = 0; i < xs.size(); ++i) s += (i ? ", " : "") + expr_str(xs[i]);
    return s;
}

const char* reduce_name(ReduceOp op) {
    switch (op) {
        case ReduceOp::kSum: return "sum";
        case ReduceOp::kMax: return "max_reduce";
        case ReduceOp::kMin: return "min_reduce";
        case ReduceOp::kProd: return "prod_reduce";
    }
    return "?";
}
}  // namespace

std::string expr_str(const Expr& e) {
    if (!e) return "<null>";
    switch (e->kind) {
        case ExprKind::kIntImm: {
            int64_t v = static_cast<const IntImmNode&>(*e).value;
            if (e->dtype == DType::kBool) return v ? "true" : "false";
            if (e->dtype == DType::kUInt64) return std::to_string(static_cast<uint64_t>(v));
            return std::to_string(v);
        }
        case ExprKind::kFloatImm: return float_str(static_cast<const FloatImmNode&>(*e).value);
        case ExprKind::kVar: return static_cast<const VarNode&>(*e).name;
        case ExprKind::kBinary: {
            const auto& n = static_cast<const BinaryNode&>(*e);
            const char* op = infix(n.op);
            if (!op)
                return std::string(binary_op_name(n.op)) + "(" + expr_str(n.a) + ", " +
                       expr_str(n.b) + ")";
            int p = precedence(e);
            bool assoc = n.op == BinaryOp::kAdd || n.op == BinaryOp::kMul;
            return paren_if(n.a, precedence(n.a) < p) + op +
                   paren_if(n.b, precedence(n.b) < p || (!assoc && precedence(n.b) == p));
        }
        case ExprKind::kUnary: {
            const auto& n = static_cast<const UnaryNode&>(*e);
            if (n.op == UnaryOp::kNeg) return "-" + paren_if(n.a, precedence(n.a) <= 6);
            if (n.op == UnaryOp::kNot) return "!" + paren_if(n.a, precedence(n.a) < 10);
            return std::string(unary_op_name(n.op)) + "(" + expr_str(n.a) + ")";
        }
        case ExprKind::kSelect: {
            const auto& n = static_cast<const SelectNode&>(*e);
            return "select(" + expr_str(n.cond) + ", " + expr_str(n.t) + ", " + expr_str(n.f) + ")";
        }
        case ExprKind::kCast: {
            const auto& n = static_cast<const CastNode&>(*e);
            return std::string(dtype_name(n.dtype)) + "(" + expr_str(n.a) + ")";
        }
        case ExprKind::kTensorRead: {
            const auto& n = static_cast<const TensorReadNode&>(*e);
            return n.tensor->name + "[" + join(n.indices) + "]";
        }
        case ExprKind::kBufferLoad: {
            const auto& n = static_cast<const BufferLoadNode&>(*e);
            return n.buffer->name + "[" + expr_str(n.index) + "]";
        }
        case ExprKind::kReduce: {
            const auto& n = static_cast<const ReduceNode&>(*e);
            std::string axes;
            for (size_t i = 0; i < n.axes.size(); ++i) {
                axes += (i ? ", " : "") + n.axes[i]->var->name + " in 0.." +
                        expr_str(n.axes[i]->extent_expr());
            }
            return std::string(reduce_name(n.op)) + "(" + expr_str(n.source) + ", [" + axes + "])";
        }
    }
    return "<?>";
}

Expr substitute(const Expr& e, const std::unordered_map<const VarNode*, Expr>& vmap) {
    if (!e || vmap.empty()) return e;
    switch (e->kind) {
        case ExprKind::kIntImm:
        case ExprKind::kFloatImm: return e;
        case ExprKind::kVar: {
            auto it = vmap.find(static_cast<const VarNode*>(e.get()));
            return it == vmap.end() ? e : it->second;
        }
        case ExprKind::kBinary: {
            const auto& n = static_cast<const BinaryNode&>(*e);
            Expr a = substitute(n.a, vmap), b = substitute(n.b, vmap);
            if (a == n.a && b == n.b) return e;
            return std::make_shared<BinaryNode>(n.dtype, n.op, a, b);
        }
        case ExprKind::kUnary: {
            const auto& n = static_cast<const UnaryNode&>(*e);
            Expr a = substitute(n.a, vmap);
            return a == n.a ? e : std::make_shared<UnaryNode>(n.dtype, n.op, a);
        }
        case ExprKind::kSelect: {
            const auto& n = static_cast<const SelectNode&>(*e);
            Expr c = substitute(n.cond, vmap), t = substitute(n.t, vmap), f = substitute(n.f, vmap);
            if (c == n.cond && t == n.t && f == n.f) return e;
            return std::make_shared<SelectNode>(n.dtype, c, t, f);
        }
        case ExprKind::kCast: {
            const auto& n = static_cast<const CastNode&>(*e);
            Expr a = substitute(n.a, vmap);
            return a == n.a ? e : std::make_shared<CastNode>(n.dtype, a);
        }
        case ExprKind::kTensorRead: {
            const auto& n = static_cast<const TensorReadNode&>(*e);
            std::vector<Expr> idx;
            bool same = true;
            for (const auto& i : n.indices) {
                idx.push_back(substitute(i, vmap));
                same = same && idx.back() == i;
            }
            return same ? e : std::make_shared<TensorReadNode>(n.dtype, n.tensor, std::move(idx));
        }
        case ExprKind::kBufferLoad: {
            const auto& n = static_cast<const BufferLoadNode&>(*e);
            Expr i = substitute(n.index, vmap);
            return i == n.index ? e : std::make_shared<BufferLoadNode>(n.dtype, n.buffer, i);
        }
        case ExprKind::kReduce: {
            const auto& n = static_cast<const ReduceNode&>(*e);
            Expr s = substitute(n.source, vmap);
            return s == n.source ? e : std::make_shared<ReduceNode>(n.dtype, n.op, s, n.axes);
        }
    }
    return e;
}

}  // namespace kiln::te
