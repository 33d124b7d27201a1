// Expression construction: dtype unification, cheap constant folding, reductions, printing and
// substitution.
//
// Dtype rule of binary(): both operands are converted to one common dtype first.
//   - equal dtypes: unchanged;
//   - an immediate against a non-immediate takes the other side's dtype (so `x + 1` stays in
//     x's dtype), except a float immediate against an int expression, which promotes to float;
//   - otherwise float beats int (the wider float wins), a wider int beats a narrower one, and
//     bool loses to everything.
// Comparisons and And/Or yield bool; all other ops the common dtype. When both operands are
// immediates the result is folded with the interpreter's scalar semantics (te/scalar_eval.cc).
#include "te/expr.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "support/error.h"
#include "te/dims.h"

namespace kiln::te {

namespace {
bool is_imm(const Expr& e) {
    return e->kind == ExprKind::kIntImm || e->kind == ExprKind::kFloatImm;
}
bool is_float_t(DType t) {
    return dtype_is_float(t);
}
int int_rank(DType t) {
    return t == DType::kBool ? 0 : static_cast<int>(dtype_size(t));
}

DType unify(const Expr& a, const Expr& b) {
    DType ta = a->dtype, tb = b->dtype;
    if (ta == tb) return ta;
    bool ia = is_imm(a), ib = is_imm(b);
    if (ia != ib) {
        const Expr& imm = ia ? a : b;
        const Expr& other = ia ? b : a;
        if (is_float_t(imm->dtype) && !is_float_t(other->dtype)) return imm->dtype;
        return other->dtype;
    }
    bool fa = is_float_t(ta), fb = is_float_t(tb);
    if (fa && !fb) return ta;
    if (fb && !fa) return tb;
    if (fa && fb)
        return (ta == DType::kFloat64 || tb == DType::kFloat64) ? DType::kFloat64 : DType::kFloat32;
    return int_rank(tb) > int_rank(ta) ? tb : ta;
}

bool is_comparison(BinaryOp op) {
    return op == BinaryOp::kEQ || op == BinaryOp::kNE || op == BinaryOp::kLT ||
           op == BinaryOp::kLE || op == BinaryOp::kGT || op == BinaryOp::kGE;
}

Expr make_reduce(ReduceOp op, Expr source, std::vector<IterVar> axes) {
    for (const auto& ax : axes) {
        KILN_CHECK(ax && ax->is_reduce, kInvalidArgument)
            << "reduction over axis '" << (ax ? ax->var->name : "null")
            << "' which is not a reduce_axis";
    }
    DType t = source->dtype;
    return std::make_shared<ReduceNode>(t, op, std::move(source), std::move(axes));
}
}  // namespace

const char* binary_op_name(BinaryOp op) {
    static const char* kNames[] = {"add", "sub", "mul", "div", "floordiv", "floormod",
                                   "mod", "min", "max", "pow", "eq",       "ne",
                                   "lt",  "le",  "gt",  "ge",  "and",      "or",
                                   "bitand", "bitor", "bitxor", "shl", "shr"};
    static_assert(sizeof(kNames) / sizeof(kNames[0]) == static_cast<size_t>(BinaryOp::kCount));
    return kNames[static_cast<size_t>(op)];
}

const char* unary_op_name(UnaryOp op) {
    static const char* kNames[] = {"neg",     "not", "abs",   "exp",  "log",   "sqrt", "tanh",
                                   "sigmoid", "erf", "floor", "ceil", "round", "sin",  "cos",
                                   "tan",     "asin", "acos",  "atan", "sinh",  "cosh", "asinh",
                                   "acosh",   "atanh", "log1p", "isnan", "bitnot"};
    static_assert(sizeof(kNames) / sizeof(kNames[0]) == static_cast<size_t>(UnaryOp::kCount));
    return kNames[static_cast<size_t>(op)];
}

IterVar make_iter_var(const std::string& name, int64_t extent, bool is_reduce) {
    KILN_CHECK(extent >= 0, kInvalidArgument)
        << "iter var '" << name << "': negative extent " << extent;
    auto iv = std::make_shared<IterVarNode>();
    iv->var = make_var(name);
    iv->extent = extent;
    iv->is_reduce = is_reduce;
    return iv;
}

Expr IterVarNode::extent_expr() const { return sym_extent ? sym_extent : int_imm(extent); }

IterVar make_iter_var(const std::string& name, Expr extent, bool is_reduce) {
    Expr e = check_dim_expr(extent, "iter var '" + name + "'");
    int64_t v;
    if (const_int(e, &v)) return make_iter_var(name, v, is_reduce);
    IterVar iv = make_iter_var(name, int64_t{0}, is_reduce);
    iv->extent = kDynamicDim;
    iv->sym_extent = e;
    return iv;
}

int64_t BufferNode::numel() const {
    KILN_ICHECK(is_static()) << "numel() of buffer '" << name << "' with a symbolic shape";
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

std::vector<Expr> BufferNode::shape_exprs() const {
    if (!sym_shape.empty()) return sym_shape;
    std::vector<Expr> out;
    for (int64_t d : shape) out.push_back(int_imm(d));
    return out;
}

Expr BufferNode::numel_expr() const {
    return is_static() ? int_imm(numel()) : dims_product(sym_shape);
}

Buffer make_sym_buffer(const std::string& name, DType dtype, const std::vector<Expr>& shape) {
    SplitDims d = split_dims(shape, "buffer '" + name + "'");
    Buffer b = make_buffer(name, dtype, std::move(d.shape));
    b->sym_shape = std::move(d.sym);
    return b;
}

Buffer make_buffer(const std::string& name, DType dtype, std::vector<int64_t> shape) {
    auto b = std::make_shared<BufferNode>();
    b->name = name;
    b->dtype = dtype;
    b->shape = std::move(shape);
    return b;
}

Expr int_imm(int64_t v, DType t) {
    KILN_ICHECK(!is_float_t(t)) << "int_imm with float dtype " << dtype_name(t);
    return std::make_shared<IntImmNode>(t, wrap_int(t, v));
}
Expr float_imm(double v, DType t) {
    KILN_ICHECK(is_float_t(t)) << "float_imm with non-float dtype " << dtype_name(t);
    DType ct = compute_dtype(t);
    return std::make_shared<FloatImmNode>(ct, round_float(ct, v));
}
Expr make_const(DType t, double v) {
    if (is_float_t(t)) return float_imm(v, t);
    return int_imm(float_to_int(t, v), t);
}
Var make_var(const std::string& name, DType t) {
    return std::make_shared<VarNode>(name, t);
}

DType compute_dtype(DType storage) {
    if (storage == DType::kFloat16 || storage == DType::kBFloat16 || dtype_is_lowp_float(storage))
        return DType::kFloat32;
    if (storage == DType::kInt4) return DType::kInt8;  // i4/u4 compute as i8/u8, wrap on store
    if (storage == DType::kUInt4) return DType::kUInt8;
    return storage;
}

Expr cast(DType t, Expr a) {
    KILN_ICHECK(a != nullptr) << "cast of a null expression";
    if (a->dtype == t) return a;
    if (a->kind == ExprKind::kIntImm) {
        int64_t v = static_cast<const IntImmNode&>(*a).value;
        if (is_float_t(t))
            return std::make_shared<FloatImmNode>(t, round_float(t, int_to_float(a->dtype, v)));
        return int_imm(v, t);
    }
    if (a->kind == ExprKind::kFloatImm) {
        double v = static_cast<const FloatImmNode&>(*a).value;
        if (is_float_t(t)) return std::make_shared<FloatImmNode>(t, round_float(t, v));
        return int_imm(float_to_int(t, v), t);
    }
    return std::make_shared<CastNode>(t, std::move(a));
}

Expr binary(BinaryOp op, Expr a, Expr b) {
    KILN_ICHECK(a != nullptr && b != nullptr)
        << "binary " << binary_op_name(op) << " of a null expression";
    DType t;
    if (op == BinaryOp::kAnd || op == BinaryOp::kOr) {
        t = DType::kBool;
        a = cast(DType::kBool, std::move(a));
        b = cast(DType::kBool, std::move(b));
    } else {
        t = unify(a, b);
        a = cast(t, std::move(a));
        b = cast(t, std::move(b));
    }
    DType rt =
        (is_comparison(op) || op == BinaryOp::kAnd || op == BinaryOp::kOr) ? DType::kBool : t;
    if (a->kind == ExprKind::kIntImm && b->kind == ExprKind::kIntImm) {
        int64_t out;
        if (eval_int_binary(op, t, static_cast<const IntImmNode&>(*a).value,
                            static_cast<const IntImmNode&>(*b).value, &out)) {
            return int_imm(out, rt);
        }
    } else if (a->kind == ExprKind::kFloatImm && b->kind == ExprKind::kFloatImm) {
        double v = eval_float_binary(op, static_cast<const FloatImmNode&>(*a).value,
                                     static_cast<const FloatImmNode&>(*b).value);
        if (rt == DType::kBool) return int_imm(v != 0.0 ? 1 : 0, DType::kBool);
        return std::make_shared<FloatImmNode>(rt, round_float(rt, v));
    }
    return std::make_shared<BinaryNode>(rt, op, std::move(a), std::move(b));
}

Expr unary(UnaryOp op, Expr a) {
    KILN_ICHECK(a != nullptr) << "unary " << unary_op_name(op) << " of a null expression";
    DType t = (op == UnaryOp::kNot || op == UnaryOp::kIsNaN) ? DType::kBool : a->dtype;
    if (a->kind == ExprKind::kIntImm) {
        return int_imm(eval_int_unary(op, a->dtype, static_cast<const IntImmNode&>(*a).value), t);
    }
    if (a->kind == ExprKind::kFloatImm) {
        double v = eval_float_unary(op, static_cast<const FloatImmNode&>(*a).value);
        if (t == DType::kBool) return int_imm(v != 0.0, DType::kBool);
        return std::make_shared<FloatImmNode>(t, round_float(t, v));
    }
    return std::make_shared<UnaryNode>(t, op, std::move(a));
}

Expr select(Expr cond, Expr t, Expr f) {
    cond = cast(DType::kBool, std::move(cond));
    DType ty = unify(t, f);
    t = cast(ty, std::move(t));
    f = cast(ty, std::move(f));
    if (cond->kind == ExprKind::kIntImm) return static_cast<const IntImmNode&>(*cond).value ? t : f;
    return std::make_shared<SelectNode>(ty, std::move(cond), std::move(t), std::move(f));
}

Expr min(Expr a, Expr b) {
    return binary(BinaryOp::kMin, std::move(a), std::move(b));
}
Expr max(Expr a, Expr b) {
    return binary(BinaryOp::kMax, std::move(a), std::move(b));
}
Expr floordiv(Expr a, Expr b) {
    return binary(BinaryOp::kFloorDiv, std::move(a), std::move(b));
}
Expr floormod(Expr a, Expr b) {
    return binary(BinaryOp::kFloorMod, std::move(a), std::move(b));
}
Expr logical_and(Expr a, Expr b) {
    return binary(BinaryOp::kAnd, std::move(a), std::move(b));
}
Expr logical_or(Expr a, Expr b) {
    return binary(BinaryOp::kOr, std::move(a), std::move(b));
}

Expr operator+(Expr a, Expr b) {
    return binary(BinaryOp::kAdd, std::move(a), std::move(b));
}
Expr operator-(Expr a, Expr b) {
    return binary(BinaryOp::kSub, std::move(a), std::move(b));
}
Expr operator*(Expr a, Expr b) {
    return binary(BinaryOp::kMul, std::move(a), std::move(b));
}
Expr operator/(Expr a, Expr b) {
    return binary(BinaryOp::kDiv, std::move(a), std::move(b));
}
Expr operator-(Expr a) {
    return unary(UnaryOp::kNeg, std::move(a));
}
Expr operator+(Expr a, int64_t b) {
    return binary(BinaryOp::kAdd, std::move(a), int_imm(b));
}
Expr operator-(Expr a, int64_t b) {
    return binary(BinaryOp::kSub, std::move(a), int_imm(b));
}
Expr operator*(Expr a, int64_t b) {
    return binary(BinaryOp::kMul, std::move(a), int_imm(b));
}
Expr operator<(Expr a, Expr b) {
    return binary(BinaryOp::kLT, std::move(a), std::move(b));
}
Expr operator<=(Expr a, Expr b) {
    return binary(BinaryOp::kLE, std::move(a), std::move(b));
}
Expr operator>(Expr a, Expr b) {
    return binary(BinaryOp::kGT, std::move(a), std::move(b));
}
Expr operator>=(Expr a, Expr b) {
    return binary(BinaryOp::kGE, std::move(a), std::move(b));
}
Expr eq(Expr a, Expr b) {
    return binary(BinaryOp::kEQ, std::move(a), std::move(b));
}
Expr ne(Expr a, Expr b) {
    return binary(BinaryOp::kNE, std::move(a), std::move(b));
}

IterVar reduce_axis(int64_t extent, const std::string& name) {
    return make_iter_var(name, extent, true);
}
IterVar reduce_axis(Expr extent, const std::string& name) {
    return make_iter_var(name, std::move(extent), true);
}
Expr sum(Expr source, std::vector<IterVar> axes) {
    return make_reduce(ReduceOp::kSum, std::move(source), std::move(axes));
}
Expr max_reduce(Expr source, std::vector<IterVar> axes) {
    return make_reduce(ReduceOp::kMax, std::move(source), std::move(axes));
}
Expr min_reduce(Expr source, std::vector<IterVar> axes) {
    return make_reduce(ReduceOp::kMin, std::move(source), std::move(axes));
}
Expr prod_reduce(Expr source, std::vector<IterVar> axes) {
    return make_reduce(ReduceOp::kProd, std::move(source), std::move(axes));
}

Expr reduce_identity(ReduceOp op, DType t) {
    t = compute_dtype(t);
    switch (op) {
        case ReduceOp::kSum: return make_const(t, 0);
        case ReduceOp::kProd: return make_const(t, 1);
        case ReduceOp::kMax:
        case ReduceOp::kMin: {
            bool is_max = op == ReduceOp::kMax;
            if (is_float_t(t)) {
                double inf = std::numeric_limits<double>::infinity();
                return float_imm(is_max ? -inf : inf, t);
            }
            if (t == DType::kBool) return int_imm(is_max ? 0 : 1, t);
            if (dtype_is_unsigned_int(t))
                return int_imm(is_max ? 0 : -1, t);  // -1 wraps to the max
            int bits = static_cast<int>(dtype_size(t)) * 8;
            int64_t hi =
                bits == 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (bits - 1)) - 1;
            return int_imm(is_max ? -hi - 1 : hi, t);
        }
    }
    return nullptr;
}

bool all_reads(const Expr& e, const std::function<bool(const TensorReadNode&)>& ok) {
    switch (e->kind) {
        case ExprKind::kBinary: {
            const auto& n = static_cast<const BinaryNode&>(*e);
            return all_reads(n.a, ok) && all_reads(n.b, ok);
        }
        case ExprKind::kUnary: return all_reads(static_cast<const UnaryNode&>(*e).a, ok);
        case ExprKind::kCast: return all_reads(static_cast<const CastNode&>(*e).a, ok);
        case ExprKind::kSelect: {
            const auto& n = static_cast<const SelectNode&>(*e);
            return all_reads(n.cond, ok) && all_reads(n.t, ok) && all_reads(n.f, ok);
        }
        case ExprKind::kReduce: return all_reads(static_cast<const ReduceNode&>(*e).source, ok);
        case ExprKind::kTensorRead: return ok(static_cast<const TensorReadNode&>(*e));
        default: return true;
    }
}

}  // namespace kiln::te
