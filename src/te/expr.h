// Scalar expressions shared by tensor expressions (te) and the loop IR (tir).
//
// An Expr is an immutable tree (shared_ptr to a const node). Index arithmetic is int64; element
// arithmetic uses the tensor's dtype. f16/bf16 values are computed as f32 (loads widen, stores
// narrow), so expressions never carry f16/bf16 dtypes except in Load/Store buffers.
//
// Node set (kept small, STYLE rule 5): IntImm, FloatImm, Var, Binary, Unary (intrinsic call),
// Select, Cast, TensorRead (te only: multi-dimensional read of a Tensor), BufferLoad (tir only:
// flat read of a Buffer), Reduce (te only: top level of a compute body).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "support/dtype.h"

namespace kiln::te {

enum class ExprKind { kIntImm, kFloatImm, kVar, kBinary, kUnary, kSelect, kCast, kTensorRead, kBufferLoad, kReduce };

// keep-sorted
enum class BinaryOp {
    kAdd, kSub, kMul,
    kDiv,       // float division; for ints: C truncating division
    kFloorDiv,  // ints only: floor division (index math)
    kFloorMod,  // ints only: floor modulo (index math)
    kMod,       // C fmod / truncating % (ONNX Mod fmod=1)
    kMin, kMax, kPow,
    kEQ, kNE, kLT, kLE, kGT, kGE,  // result dtype bool
    kAnd, kOr,                     // logical, bool operands
    // ints only (bitwise on the wrapped value); shift counts are read as unsigned, a count >= 64
    // gives 0 (kShr of a negative signed value: -1); kShr is arithmetic for signed dtypes.
    kBitAnd, kBitOr, kBitXor, kShl, kShr,
    kCount
};
const char* binary_op_name(BinaryOp op);  // "add", "floordiv", ...

/// Scalar intrinsics (the C emitter, CUDA emitter and interpreter each have an entry per row).
enum class UnaryOp {
    kNeg, kNot, kAbs, kExp, kLog, kSqrt, kTanh, kSigmoid, kErf, kFloor, kCeil, kRound, kSin, kCos,
    kTan, kAsin, kAcos, kAtan, kSinh, kCosh, kAsinh, kAcosh, kAtanh, kLog1p,
    kIsNaN,   // result dtype bool (false for ints)
    kBitNot,  // ints only: ~x wrapped to the dtype
    kCount
};
const char* unary_op_name(UnaryOp op);  // "neg", "exp", ...

/// Reduction combiners.
enum class ReduceOp { kSum, kMax, kMin, kProd };

struct ExprNode;
using Expr = std::shared_ptr<const ExprNode>;

struct TensorNode;
using Tensor = std::shared_ptr<TensorNode>;
struct BufferNode;
using Buffer = std::shared_ptr<BufferNode>;

struct VarNode;
using Var = std::shared_ptr<const VarNode>;

struct ExprNode {
    ExprKind kind;
    DType dtype;
    ExprNode(ExprKind k, DType t) : kind(k), dtype(t) {}
    virtual ~ExprNode() = default;
};

struct IntImmNode : ExprNode {
    int64_t value;
    IntImmNode(DType t, int64_t v) : ExprNode(ExprKind::kIntImm, t), value(v) {}
};
struct FloatImmNode : ExprNode {
    double value;
    FloatImmNode(DType t, double v) : ExprNode(ExprKind::kFloatImm, t), value(v) {}
};
/// A variable (loop index, usually int64). Identity is the node's address, not its name.
struct VarNode : ExprNode {
    std::string name;
    VarNode(std::string n, DType t = DType::kInt64) : ExprNode(ExprKind::kVar, t), name(std::move(n)) {}
};
struct BinaryNode : ExprNode {
    BinaryOp op;
    Expr a, b;
    BinaryNode(DType t, BinaryOp o, Expr x, Expr y) : ExprNode(ExprKind::kBinary, t), op(o), a(std::move(x)), b(std::move(y)) {}
};
struct UnaryNode : ExprNode {
    UnaryOp op;
    Expr a;
    UnaryNode(DType t, UnaryOp o, Expr x) : ExprNode(ExprKind::kUnary, t), op(o), a(std::move(x)) {}
};
struct SelectNode : ExprNode {
    Expr cond, t, f;
    SelectNode(DType ty, Expr c, Expr a, Expr b) : ExprNode(ExprKind::kSelect, ty), cond(std::move(c)), t(std::move(a)), f(std::move(b)) {}
};
struct CastNode : ExprNode {
    Expr a;
    CastNode(DType t, Expr x) : ExprNode(ExprKind::kCast, t), a(std::move(x)) {}
};
/// te: tensor(i, j, ...). dtype is the compute dtype (f32 for f16/bf16 tensors).
struct TensorReadNode : ExprNode {
    Tensor tensor;
    std::vector<Expr> indices;
    TensorReadNode(DType t, Tensor ten, std::vector<Expr> idx)
        : ExprNode(ExprKind::kTensorRead, t), tensor(std::move(ten)), indices(std::move(idx)) {}
};
/// tir: buffer[index] with a flat (row-major) element index.
struct BufferLoadNode : ExprNode {
    Buffer buffer;
    Expr index;
    BufferLoadNode(DType t, Buffer b, Expr i) : ExprNode(ExprKind::kBufferLoad, t), buffer(std::move(b)), index(std::move(i)) {}
};

/// The int64 stand-in for a symbolic dim in the static shape/extent fields (te/dims.h).
constexpr int64_t kDynamicDim = -1;

/// An iteration variable with range [0, extent). A symbolic extent (an int64 expression of
/// dim Vars, te/dims.h) is `sym_extent`, and `extent` is then kDynamicDim.
struct IterVarNode;
using IterVar = std::shared_ptr<IterVarNode>;
struct IterVarNode {
    Var var;
    int64_t extent;
    bool is_reduce = false;
    Expr sym_extent;  // null: the extent is static
    bool is_static() const { return sym_extent == nullptr; }
    /// The extent as an expression (an IntImm when static).
    Expr extent_expr() const;
};
IterVar make_iter_var(const std::string& name, int64_t extent, bool is_reduce = false);
/// An IntImm extent gives a static iter var; anything else a symbolic one.
IterVar make_iter_var(const std::string& name, Expr extent, bool is_reduce = false);

/// Reduction over `axes` of `source`, combined with `op` starting from the combiner's identity.
/// Only allowed as the whole body of a compute.
struct ReduceNode : ExprNode {
    ReduceOp op;
    Expr source;
    std::vector<IterVar> axes;
    ReduceNode(DType t, ReduceOp o, Expr s, std::vector<IterVar> ax)
        : ExprNode(ExprKind::kReduce, t), op(o), source(std::move(s)), axes(std::move(ax)) {}
};

/// A flat, row-major buffer (a kernel argument or a kernel-local allocation).
struct BufferNode {
    std::string name;
    DType dtype;            // storage dtype (f16 stored as uint16_t bits)
    std::vector<int64_t> shape;  // kDynamicDim where sym_shape holds a symbolic dim
    /// A small kernel-local array meant to live in registers (a reduction's accumulator tile,
    /// Stage::cache_write_local): the C emitter declares it as a fixed-size local array.
    bool local = false;
    /// Symbolic shapes only (empty: static): one int64 expression of dim Vars per dim.
    std::vector<Expr> sym_shape;
    bool is_static() const { return sym_shape.empty(); }
    int64_t numel() const;  // static buffers only
    std::vector<Expr> shape_exprs() const;
    Expr numel_expr() const;
};
Buffer make_buffer(const std::string& name, DType dtype, std::vector<int64_t> shape);
/// A buffer whose dims are expressions: all IntImm gives a static buffer.
Buffer make_sym_buffer(const std::string& name, DType dtype, const std::vector<Expr>& shape);

// ---- construction helpers (constant-fold trivially where both sides are immediates) ----
Expr int_imm(int64_t v, DType t = DType::kInt64);
Expr float_imm(double v, DType t = DType::kFloat32);
/// An immediate of dtype `t` holding `v` (int or float as the dtype requires).
Expr make_const(DType t, double v);
Var make_var(const std::string& name, DType t = DType::kInt64);

/// The dtype arithmetic happens in: f16/bf16 and the f8/f4 types compute as f32, i4/u4 as i8/u8;
/// others as themselves.
DType compute_dtype(DType storage);

/// Both operands are first converted to a common dtype (an immediate takes the other side's
/// dtype unless that would turn a float immediate into an int; else float beats int, wider beats
/// narrower). Result dtype: bool for comparisons and And/Or, else the common dtype. Two
/// immediates fold.
Expr binary(BinaryOp op, Expr a, Expr b);
Expr unary(UnaryOp op, Expr a);
Expr select(Expr cond, Expr t, Expr f);
Expr cast(DType t, Expr a);  // no-op if already t
Expr min(Expr a, Expr b);
Expr max(Expr a, Expr b);
Expr floordiv(Expr a, Expr b);
Expr floormod(Expr a, Expr b);
Expr logical_and(Expr a, Expr b);
Expr logical_or(Expr a, Expr b);

Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);
Expr operator-(Expr a);
Expr operator+(Expr a, int64_t b);
Expr operator-(Expr a, int64_t b);
Expr operator*(Expr a, int64_t b);
Expr operator<(Expr a, Expr b);
Expr operator<=(Expr a, Expr b);
Expr operator>(Expr a, Expr b);
Expr operator>=(Expr a, Expr b);
Expr eq(Expr a, Expr b);
Expr ne(Expr a, Expr b);

/// Reductions over reduce axes (make them with reduce_axis()).
IterVar reduce_axis(int64_t extent, const std::string& name = "r");
/// A reduce axis over a symbolic extent (an int64 expression of dim Vars).
IterVar reduce_axis(Expr extent, const std::string& name = "r");
Expr sum(Expr source, std::vector<IterVar> axes);
Expr max_reduce(Expr source, std::vector<IterVar> axes);
Expr min_reduce(Expr source, std::vector<IterVar> axes);
Expr prod_reduce(Expr source, std::vector<IterVar> axes);
/// Identity of a combiner in dtype t (0, -inf / lowest, +inf / highest, 1).
Expr reduce_identity(ReduceOp op, DType t);

/// Readable form for debugging and tests: "(x + 1) * y".
std::string expr_str(const Expr& e);

/// True when `ok` holds for every tensor read of `e` (walking binary, unary, cast, select and
/// reduce nodes; a read's own indices are the caller's to look at). Stops at the first false.
bool all_reads(const Expr& e, const std::function<bool(const TensorReadNode&)>& ok);

// Convenience: Expr from a Var.
inline Expr ex(const Var& v) { return v; }

// ---- additions (te layer): substitution and the scalar semantics shared by folding and the
// tir interpreter ----

/// Replaces variables by expressions (by Var identity) everywhere in `e`, including the indices
/// of TensorRead/BufferLoad and the source of a Reduce. Unchanged subtrees are shared.
Expr substitute(const Expr& e, const std::unordered_map<const VarNode*, Expr>& vmap);

/// Wraps an integer to the width of int/bool dtype `t` (sign- or zero-extended into int64;
/// u64 keeps its bit pattern; bool becomes 0/1).
int64_t wrap_int(DType t, int64_t v);
/// Rounds a double to the precision of float dtype `t` (f32/f16/bf16 round through float; f64
/// unchanged).
double round_float(DType t, double v);
/// Integer binary op in dtype `t` (operands already wrapped). Comparisons return 0/1. Returns
/// false (no value) for division or modulo by zero.
bool eval_int_binary(BinaryOp op, DType t, int64_t a, int64_t b, int64_t* out);
/// Float binary op (unrounded; comparisons and logical ops return 0/1).
double eval_float_binary(BinaryOp op, double a, double b);
/// Unary intrinsic on a double / on an int of dtype t (result wrapped).
double eval_float_unary(UnaryOp op, double a);
int64_t eval_int_unary(UnaryOp op, DType t, int64_t a);
/// Float -> int conversion truncating toward zero (NaN -> 0, saturating at int64 range), wrapped.
int64_t float_to_int(DType t, double v);
/// Int of dtype `from` -> double (u64 read as unsigned).
double int_to_float(DType from, int64_t v);

}  // namespace kiln::te
