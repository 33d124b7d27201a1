// C forms of tir expressions. Every node has one C form per dtype family:
//  - f32 uses the f-suffixed libm functions and literals, f64 the double ones;
//  - integer arithmetic narrower than int is cast back to its type (C promotes to int; kernels
//    are compiled with -fwrapv so overflow wraps as in the interpreter);
//  - division/modulo/floordiv/floormod on ints go through helpers that never trap;
//  - comparisons and logical ops give C int 0/1 (stored as uint8_t bool);
//  - f16/bf16 only appear as buffer storage: loads widen and stores narrow through helpers.
#include "codegen/c_expr_printer.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "support/error.h"

namespace kiln::codegen {
namespace {

using te::BinaryOp;
using te::ExprKind;
using te::UnaryOp;

// Names a generated identifier must not take.
const std::set<std::string>& reserved() {
    static const std::set<std::string> r = {
        // C keywords
        "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum",
        "extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return",
        "short", "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void",
        "volatile", "while", "_Bool", "_Complex", "_Imaginary", "_Alignas", "_Alignof", "_Atomic",
        "_Generic", "_Noreturn", "_Static_assert", "_Thread_local", "bool", "true", "false", "asm",
        "typeof",
        // names the generated code uses
        "args", "dims", "env", "main", "memcpy", "memset", "malloc", "free", "aligned_alloc", "abs", "size_t",
        "NULL", "INFINITY", "NAN", "errno", "y0", "y1", "yn", "j0", "j1", "jn", "gamma", "signgam",
        "exp", "expf", "log", "logf", "sqrt", "sqrtf", "tanh", "tanhf", "erf", "erff", "floor", "floorf",
        "ceil", "ceilf", "nearbyint", "nearbyintf", "sin", "sinf", "cos", "cosf", "pow", "powf", "fmod",
        "fmodf", "fabs", "fabsf", "round", "roundf", "trunc", "truncf", "lgamma", "tgamma", "log2",
        "log10", "exp2", "fmin", "fmax", "index", "rindex", "time", "div", "ldiv", "rand", "random",
        "exit", "abort", "atan", "atan2", "asin", "acos", "sinh", "cosh", "expm1", "log1p", "cbrt",
        "hypot", "tan", "tanf", "asinh", "acosh", "atanh", "ldexp", "frexp", "modf", "isnan", "isinf", "signbit", "copysign", "nan", "HUGE_VAL",
        "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t"};
    return r;
}

std::string sanitize(const std::string& hint) {
    std::string s;
    for (char c : hint) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
        s += ok ? c : '_';
    }
    if (s.empty() || (s[0] >= '0' && s[0] <= '9')) s = "v" + s;
    if (s[0] == '_') s = "v" + s;  // identifiers starting with '_' are reserved in C
    if (s.rfind("kiln_", 0) == 0 || s.rfind("KILN_", 0) == 0) s = "u_" + s;
    if (s.size() > 60) s.resize(60);
    return s;
}

/// Suffix of the prelude's per-type helpers (kiln_min_f32...).
const char* type_suffix(DType t) {
    switch (t) {
        case DType::kFloat32: case DType::kFloat16: case DType::kBFloat16: return "f32";
        case DType::kFloat64: return "f64";
        case DType::kInt8: return "i8";
        case DType::kInt16: return "i16";
        case DType::kInt32: return "i32";
        case DType::kInt64: return "i64";
        case DType::kUInt8: case DType::kBool: return "u8";
        case DType::kUInt16: return "u16";
        case DType::kUInt32: return "u32";
        case DType::kUInt64: return "u64";
        case DType::kInt4: return "i8";
        case DType::kUInt4: return "u8";
        default: return "f32";  // f8, f4 (compute as f32)
    }
    return "i64";
}

/// The C type an expression of dtype t computes in (f16/bf16 compute as float).
const char* compute_c_type(DType t) {
    if (t == DType::kFloat16 || t == DType::kBFloat16 || dtype_is_lowp_float(t)) return "float";
    return dtype_c_type(t);
}
bool is_f32ish(DType t) {
    return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 || dtype_is_lowp_float(t);
}
/// Prelude helper converting a f8/f4 bit pattern to float (and back: kiln_f32_to_<name>).
std::string lowp_load(DType t, const std::string& v) {
    return std::string("kiln_") + dtype_name(t) + "_to_f32(" + v + ")";
}
std::string lowp_store(DType t, const std::string& v) {
    return std::string("kiln_f32_to_") + dtype_name(t) + "(" + v + ")";
}
/// Types C promotes to int: arithmetic results need a cast back.
bool is_narrow_int(DType t) {
    return t == DType::kInt8 || t == DType::kInt16 || t == DType::kUInt8 || t == DType::kUInt16 || t == DType::kBool;
}

std::string float_literal(double v, DType t) {
    bool f32 = t != DType::kFloat64;
    if (std::isnan(v)) return f32 ? "NAN" : "((double)NAN)";
    if (std::isinf(v)) {
        std::string s = f32 ? "INFINITY" : "((double)INFINITY)";
        return v < 0 ? "(-" + s + ")" : s;
    }
    char buf[64];
    if (f32) {
        std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(static_cast<float>(v)));
    } else {
        std::snprintf(buf, sizeof buf, "%.17g", v);
    }
    std::string s = buf;
    if (s.find_first_of(".e") == std::string::npos) s += ".0";
    if (f32) s += "f";
    return s[0] == '-' ? "(" + s + ")" : s;
}

std::string int_literal(int64_t v, DType t) {
    switch (t) {
        case DType::kInt64:
            if (v == std::numeric_limits<int64_t>::min()) return "INT64_MIN";
            return v < 0 ? "(" + std::to_string(v) + "LL)" : std::to_string(v) + "LL";
        case DType::kUInt64: return std::to_string(static_cast<uint64_t>(v)) + "ULL";
        case DType::kInt32:
            if (v == std::numeric_limits<int32_t>::min()) return "INT32_MIN";
            return v < 0 ? "(" + std::to_string(v) + ")" : std::to_string(v);
        case DType::kUInt32: return std::to_string(static_cast<uint32_t>(v)) + "U";
        case DType::kBool: return v ? "1" : "0";
        default:
            if (dtype_is_float(t)) return float_literal(static_cast<double>(v), t);
            return "((" + std::string(dtype_c_type(t)) + ")" + std::to_string(v) + ")";
    }
}

/// Number of nodes of `e`, counting stops past `limit`.
int expr_size(const te::Expr& e, int limit) {
    if (!e || limit <= 0) return 0;
    switch (e->kind) {
        case ExprKind::kBinary: {
            const auto& b = static_cast<const te::BinaryNode&>(*e);
            int n = 1 + expr_size(b.a, limit - 1);
            return n + expr_size(b.b, limit - n);
        }
        case ExprKind::kUnary: return 4 + expr_size(static_cast<const te::UnaryNode&>(*e).a, limit - 4);
        case ExprKind::kCast: return 1 + expr_size(static_cast<const te::CastNode&>(*e).a, limit - 1);
        case ExprKind::kSelect: {
            const auto& s = static_cast<const te::SelectNode&>(*e);
            int n = 1 + expr_size(s.cond, limit - 1);
            n += expr_size(s.t, limit - n);
            return n + expr_size(s.f, limit - n);
        }
        case ExprKind::kBufferLoad:
            return 1 + expr_size(static_cast<const te::BufferLoadNode&>(*e).index, limit - 1) / 4;
        default: return 1;
    }
}

class Printer {
public:
    explicit Printer(CNames& n) : names_(n) {}

    std::string print(const te::Expr& e) {
        KILN_ICHECK(e != nullptr) << "null expression in tir";
        switch (e->kind) {
            case ExprKind::kIntImm: {
                const auto& i = static_cast<const te::IntImmNode&>(*e);
                return int_literal(i.value, e->dtype);
            }
            case ExprKind::kFloatImm: {
                const auto& f = static_cast<const te::FloatImmNode&>(*e);
                if (!dtype_is_float(e->dtype)) return int_literal(static_cast<int64_t>(f.value), e->dtype);
                return float_literal(f.value, e->dtype);
            }
            case ExprKind::kVar: return names_.var(static_cast<const te::VarNode*>(e.get()));
            case ExprKind::kBinary: return binary(static_cast<const te::BinaryNode&>(*e));
            case ExprKind::kUnary: return unary(static_cast<const te::UnaryNode&>(*e));
            case ExprKind::kSelect: {
                const auto& s = static_cast<const te::SelectNode&>(*e);
                // Cheap operands go through an inline helper that evaluates both (guarded reads are
                // clamped in bounds, op_util.h): GCC 12 -O3 -march=native (AVX-512) miscompiles the
                // if-converted masked loads of `c[i] ? a[i] : b[i]` in fixed-trip inner loops.
                // Expensive operands keep C's lazy ternary.
                if (expr_size(s.t, 12) + expr_size(s.f, 12) <= 12)
                    return std::string("kiln_select_") + type_suffix(e->dtype) + "(" + print(s.cond) + ", " +
                           print(s.t) + ", " + print(s.f) + ")";
                return "(" + print(s.cond) + " ? " + print(s.t) + " : " + print(s.f) + ")";
            }
            case ExprKind::kCast: {
                const auto& c = static_cast<const te::CastNode&>(*e);
                const DType to = e->dtype;
                if (clamped_to_i32(c.a) && dtype_is_int(to) && dtype_size(to) <= 4 && to != DType::kBool &&
                    to != DType::kInt4 && to != DType::kUInt4)
                    return "((" + std::string(dtype_c_type(to)) + ")kiln_f2i32_f32(" + print(c.a) + "))";
                return cast(e->dtype, c.a->dtype, print(c.a));
            }
            case ExprKind::kBufferLoad: {
                const auto& l = static_cast<const te::BufferLoadNode&>(*e);
                std::string ref = names_.buffer(l.buffer.get()) + "[" + strip_parens(print(l.index)) + "]";
                if (l.buffer->dtype == DType::kFloat16) return "kiln_f16_to_f32(" + ref + ")";
                if (l.buffer->dtype == DType::kBFloat16) return "kiln_bf16_to_f32(" + ref + ")";
                if (dtype_is_lowp_float(l.buffer->dtype)) return lowp_load(l.buffer->dtype, ref);
                return or_hoisted(ref);  // a gather the emitter staged (codegen/staged_gathers.h)
            }
            case ExprKind::kTensorRead:
                KILN_ICHECK(false) << "TensorRead reached the C emitter (tir must use BufferLoad)";
                break;
            case ExprKind::kReduce:
                KILN_ICHECK(false) << "Reduce reached the C emitter (lowering must expand reductions)";
                break;
        }
        return "";
    }

    /// An f32 min(max(x, lo), hi) (either nesting) with constant bounds inside int32's range:
    /// QuantizeLinear's saturation. Its conversion to an int of <= 32 bits needs neither
    /// kiln_f2i's double nor its range branches (which kept QDQ loops scalar): the same value.
    static bool clamped_to_i32(const te::Expr& e) {
        if (e->dtype != DType::kFloat32 || e->kind != ExprKind::kBinary) return false;
        const auto& outer = static_cast<const te::BinaryNode&>(*e);
        if ((outer.op != te::BinaryOp::kMin && outer.op != te::BinaryOp::kMax) || outer.a->kind != ExprKind::kBinary)
            return false;
        const auto& inner = static_cast<const te::BinaryNode&>(*outer.a);
        const te::BinaryOp other = outer.op == te::BinaryOp::kMin ? te::BinaryOp::kMax : te::BinaryOp::kMin;
        auto in_i32 = [](const te::Expr& b) {
            if (b->kind != ExprKind::kFloatImm) return false;
            const double v = static_cast<const te::FloatImmNode&>(*b).value;
            return v >= -2147483520.0 && v <= 2147483520.0;  // f32 values that fit int32
        };
        return inner.op == other && in_i32(outer.b) && in_i32(inner.b);
    }

    /// `src` (of dtype from) converted to dtype `to`.
    std::string cast(DType to, DType from, const std::string& src) {
        if (to == from) return src;
        if (to == DType::kBool) return "(" + src + " != 0)";
        if (to == DType::kFloat16) return "kiln_f16_to_f32(kiln_f32_to_f16((float)" + src + "))";
        if (to == DType::kBFloat16) return "kiln_bf16_to_f32(kiln_f32_to_bf16((float)" + src + "))";
        if (dtype_is_lowp_float(to)) return lowp_load(to, lowp_store(to, "(float)" + src));
        if (to == DType::kInt4 || to == DType::kUInt4) {
            std::string wide = cast(DType::kInt64, from, src);
            return std::string(to == DType::kInt4 ? "kiln_wrap_i4(" : "kiln_wrap_u4(") + wide + ")";
        }
        if (dtype_is_float(from) && (dtype_is_int(to))) {
            if (to == DType::kInt64) return "kiln_f2i((double)" + src + ")";
            if (to == DType::kUInt64) return "kiln_f2u((double)" + src + ")";
            return "((" + std::string(dtype_c_type(to)) + ")kiln_f2i((double)" + src + "))";
        }
        return "((" + std::string(compute_c_type(to)) + ")" + src + ")";
    }

private:
    std::string binary(const te::BinaryNode& b) {
        DType t = b.a->dtype;  // operand dtype
        std::string x = print(b.a), y = print(b.b);
        bool fl = dtype_is_float(t);
        bool f32 = is_f32ish(t);
        const char* sfx = type_suffix(t);
        auto wrap = [&](const std::string& s) {
            return is_narrow_int(b.dtype) ? "((" + std::string(dtype_c_type(b.dtype)) + ")" + s + ")" : s;
        };
        switch (b.op) {
            case BinaryOp::kAdd: return wrap("(" + x + " + " + y + ")");
            case BinaryOp::kSub: return wrap("(" + x + " - " + y + ")");
            case BinaryOp::kMul: return wrap("(" + x + " * " + y + ")");
            case BinaryOp::kDiv:
                if (fl) return "(" + x + " / " + y + ")";
                return int_helper("div", t, x, y, b.dtype);
            case BinaryOp::kMod:
                if (fl) return std::string(f32 ? "fmodf(" : "fmod(") + x + ", " + y + ")";
                return int_helper("mod", t, x, y, b.dtype);
            case BinaryOp::kFloorDiv:
                if (fl) return std::string(f32 ? "floorf(" : "floor(") + x + " / " + y + ")";
                if (plain_division(b)) return "(" + x + " / " + y + ")";
                return or_hoisted(int_helper("floordiv", t, x, y, b.dtype));
            case BinaryOp::kFloorMod:
                if (fl) {
                    std::string fl_ = f32 ? "floorf(" : "floor(";
                    return "(" + x + " - " + fl_ + x + " / " + y + ") * " + y + ")";
                }
                if (plain_division(b)) return "(" + x + " % " + y + ")";
                return or_hoisted(int_helper("floormod", t, x, y, b.dtype));
            case BinaryOp::kMin: return std::string("kiln_min_") + sfx + "(" + x + ", " + y + ")";
            case BinaryOp::kMax: return std::string("kiln_max_") + sfx + "(" + x + ", " + y + ")";
            case BinaryOp::kPow:
                if (fl) return std::string(f32 ? "powf(" : "pow(") + x + ", " + y + ")";
                return cast(b.dtype, DType::kInt64, "kiln_pow_i64(" + x + ", " + y + ")");
            case BinaryOp::kEQ: return "(" + x + " == " + y + ")";
            case BinaryOp::kNE: return "(" + x + " != " + y + ")";
            case BinaryOp::kLT: return "(" + x + " < " + y + ")";
            case BinaryOp::kLE: return "(" + x + " <= " + y + ")";
            case BinaryOp::kGT: return "(" + x + " > " + y + ")";
            case BinaryOp::kGE: return "(" + x + " >= " + y + ")";
            case BinaryOp::kAnd: return "(" + x + " && " + y + ")";
            case BinaryOp::kOr: return "(" + x + " || " + y + ")";
            case BinaryOp::kBitAnd: return wrap("(" + x + " & " + y + ")");
            case BinaryOp::kBitOr: return wrap("(" + x + " | " + y + ")");
            case BinaryOp::kBitXor: return wrap("(" + x + " ^ " + y + ")");
            case BinaryOp::kShl:
            case BinaryOp::kShr: {
                // 64-bit helpers (count >= 64 defined), the result cast back to the dtype.
                const bool shl = b.op == BinaryOp::kShl;
                const bool uns = dtype_is_unsigned_int(t) || t == DType::kBool;
                std::string call = shl ? "kiln_shl_u64((uint64_t)" + x + ", (uint64_t)" + y + ")"
                                 : uns ? "kiln_shr_u64((uint64_t)" + x + ", (uint64_t)" + y + ")"
                                       : "kiln_shr_i64((int64_t)" + x + ", (uint64_t)" + y + ")";
                return "((" + std::string(dtype_c_type(b.dtype)) + ")" + call + ")";
            }
            case BinaryOp::kCount: break;
        }
        KILN_ICHECK(false) << "unknown binary op " << static_cast<int>(b.op);
        return "";
    }

    /// The local an invariant division was computed into ahead of its loop, else `text`.
    std::string or_hoisted(std::string text) const {
        const std::string* n = names_.hoisted(text);
        return n ? *n : text;
    }

    /// An int64 floordiv/floormod whose divisor is a positive constant and whose dividend is
    /// never negative: C's / and % give the same, cannot trap, and GCC vectorizes around them.
    bool plain_division(const te::BinaryNode& b) const {
        if (!names_.marks_nonnegative() || b.dtype != DType::kInt64 || b.a->dtype != DType::kInt64 ||
            b.b->kind != ExprKind::kIntImm)
            return false;
        return static_cast<const te::IntImmNode&>(*b.b).value > 0 && nonnegative(b.a);
    }
    /// Provably >= 0: constants >= 0, variables marked so, and + * floordiv floormod min max of such.
    bool nonnegative(const te::Expr& e) const {
        if (e->kind == ExprKind::kIntImm) return static_cast<const te::IntImmNode&>(*e).value >= 0;
        if (e->kind == ExprKind::kVar) return names_.nonnegative(static_cast<const te::VarNode*>(e.get()));
        if (e->kind != ExprKind::kBinary) return false;
        const auto& b = static_cast<const te::BinaryNode&>(*e);
        switch (b.op) {
            case BinaryOp::kAdd: case BinaryOp::kMul: case BinaryOp::kMin: case BinaryOp::kMax:
                return nonnegative(b.a) && nonnegative(b.b);
            case BinaryOp::kFloorDiv: case BinaryOp::kFloorMod:
                // By a non-negative divisor (a dim): the helpers give 0 for a divisor of 0.
                return plain_division(b) || (nonnegative(b.a) && nonnegative(b.b));
            default: return false;
        }
    }

    /// Integer div/mod family through the non-trapping 64-bit helpers, cast back to dtype.
    std::string int_helper(const char* op, DType t, const std::string& x, const std::string& y, DType result) {
        bool u64 = t == DType::kUInt64;
        std::string call;
        if (u64) {
            // floor and truncating division agree on unsigned values.
            std::string base = std::string(op).find("div") != std::string::npos ? "div" : "mod";
            call = "kiln_" + base + "_u64(" + x + ", " + y + ")";
        } else {
            call = std::string("kiln_") + op + "_i64(" + x + ", " + y + ")";
        }
        if (result == DType::kInt64 || result == DType::kUInt64) return call;
        return "((" + std::string(dtype_c_type(result)) + ")" + call + ")";
    }

    std::string unary(const te::UnaryNode& u) {
        DType t = u.a->dtype;
        std::string x = print(u.a);
        if (u.op == UnaryOp::kNeg) {
            std::string s = "(-" + x + ")";
            return is_narrow_int(u.dtype) ? "((" + std::string(dtype_c_type(u.dtype)) + ")" + s + ")" : s;
        }
        if (u.op == UnaryOp::kNot) return "(!" + x + ")";
        if (u.op == UnaryOp::kBitNot) {
            KILN_ICHECK(!dtype_is_float(t)) << "bitnot of a float expression";
            return "((" + std::string(dtype_c_type(u.dtype)) + ")(~" + x + "))";
        }
        if (u.op == UnaryOp::kIsNaN) return dtype_is_float(t) ? "(" + x + " != " + x + ")" : "0";
        if (!dtype_is_float(t)) {
            switch (u.op) {
                case UnaryOp::kAbs:
                    if (dtype_is_unsigned_int(t) || t == DType::kBool) return x;
                    return cast(u.dtype, DType::kInt64, "kiln_abs_i64(" + x + ")");
                case UnaryOp::kFloor: case UnaryOp::kCeil: case UnaryOp::kRound: return x;
                default: {
                    // Transcendentals of ints compute in double and convert back.
                    std::string f = float_unary(u.op, false, "(double)" + x);
                    return cast(u.dtype, DType::kFloat64, f);
                }
            }
        }
        return float_unary(u.op, is_f32ish(t), x);
    }

    static std::string float_unary(UnaryOp op, bool f32, const std::string& x) {
        const char* name = nullptr;
        switch (op) {
            case UnaryOp::kAbs: name = "fabs"; break;
            case UnaryOp::kExp:  // f32: the prelude's vectorizable approximation (c_prelude.cc)
                if (f32) return "kiln_exp_f32(" + x + ")";
                name = "exp";
                break;
            case UnaryOp::kLog:  // f32: the prelude's vectorizable approximations (c_prelude.cc)
                if (f32) return "kiln_log_f32(" + x + ")";
                name = "log";
                break;
            case UnaryOp::kSqrt: name = "sqrt"; break;
            case UnaryOp::kTanh:  // f32: the prelude's vectorizable approximation (c_prelude.cc)
                if (f32) return "kiln_tanh_f32(" + x + ")";
                name = "tanh";
                break;
            case UnaryOp::kErf:
                if (f32) return "kiln_erf_f32(" + x + ")";
                name = "erf";
                break;
            case UnaryOp::kFloor: name = "floor"; break;
            case UnaryOp::kCeil: name = "ceil"; break;
            case UnaryOp::kRound: name = "nearbyint"; break;
            case UnaryOp::kSin: name = "sin"; break;
            case UnaryOp::kCos: name = "cos"; break;
            case UnaryOp::kTan: name = "tan"; break;
            case UnaryOp::kAsin: name = "asin"; break;
            case UnaryOp::kAcos: name = "acos"; break;
            case UnaryOp::kAtan: name = "atan"; break;
            case UnaryOp::kSinh: name = "sinh"; break;
            case UnaryOp::kCosh: name = "cosh"; break;
            case UnaryOp::kAsinh: name = "asinh"; break;
            case UnaryOp::kAcosh: name = "acosh"; break;
            case UnaryOp::kAtanh: name = "atanh"; break;
            case UnaryOp::kLog1p:
                if (f32) return "kiln_log1p_f32(" + x + ")";
                name = "log1p";
                break;
            case UnaryOp::kIsNaN: return "(" + x + " != " + x + ")";
            case UnaryOp::kBitNot: break;
            case UnaryOp::kSigmoid: return std::string(f32 ? "kiln_sigmoid_f32(" : "kiln_sigmoid_f64(") + x + ")";
            case UnaryOp::kNeg: return "(-" + x + ")";
            case UnaryOp::kNot: return "(!" + x + ")";
            case UnaryOp::kCount: break;
        }
        KILN_ICHECK(name != nullptr) << "unknown unary op " << static_cast<int>(op);
        return std::string(name) + (f32 ? "f(" : "(") + x + ")";
    }

    CNames& names_;
};

}  // namespace

bool is_c_identifier(const std::string& s) {
    if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
    for (char c : s) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
        if (!ok) return false;
    }
    return !reserved().count(s);
}

std::string CNames::fresh(const std::string& hint) {
    std::string base = sanitize(hint);
    std::string name = base;
    for (int i = 1; used_.count(name) || reserved().count(name); ++i) name = base + "_" + std::to_string(i);
    used_.insert(name);
    return name;
}

std::string CNames::var(const te::VarNode* v) {
    auto it = names_.find(v);
    if (it != names_.end()) return it->second;
    return names_[v] = fresh(v->name);
}

std::string CNames::buffer(const te::BufferNode* b) {
    auto it = names_.find(b);
    if (it != names_.end()) return it->second;
    return names_[b] = fresh(b->name);
}

bool expr_uses_var(const te::Expr& e, const te::VarNode* v) {
    if (!e) return false;
    switch (e->kind) {
        case ExprKind::kVar: return e.get() == v;
        case ExprKind::kBinary: {
            const auto& b = static_cast<const te::BinaryNode&>(*e);
            return expr_uses_var(b.a, v) || expr_uses_var(b.b, v);
        }
        case ExprKind::kUnary: return expr_uses_var(static_cast<const te::UnaryNode&>(*e).a, v);
        case ExprKind::kSelect: {
            const auto& s = static_cast<const te::SelectNode&>(*e);
            return expr_uses_var(s.cond, v) || expr_uses_var(s.t, v) || expr_uses_var(s.f, v);
        }
        case ExprKind::kCast: return expr_uses_var(static_cast<const te::CastNode&>(*e).a, v);
        case ExprKind::kBufferLoad: return expr_uses_var(static_cast<const te::BufferLoadNode&>(*e).index, v);
        default: return false;
    }
}

std::string strip_parens(const std::string& s) {
    if (s.size() < 2 || s.front() != '(' || s.back() != ')') return s;
    int depth = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '(') ++depth;
        if (s[i] == ')' && --depth == 0 && i + 1 != s.size()) return s;  // "(a) + (b)"
    }
    return s.substr(1, s.size() - 2);
}

std::string print_c_expr(const te::Expr& e, CNames& names) { return Printer(names).print(e); }

std::string store_value_c(DType storage, const te::Expr& value, CNames& names) {
    Printer p(names);
    std::string v = p.print(value);
    DType from = value->dtype;
    switch (storage) {
        case DType::kFloat16: return "kiln_f32_to_f16(" + (is_f32ish(from) ? v : "(float)" + v) + ")";
        case DType::kBFloat16: return "kiln_f32_to_bf16(" + (is_f32ish(from) ? v : "(float)" + v) + ")";
        case DType::kInt4:
        case DType::kUInt4: return p.cast(storage, from, v);
        default:
            if (dtype_is_lowp_float(storage)) return lowp_store(storage, is_f32ish(from) ? v : "(float)" + v);
            return from == storage ? v : p.cast(storage, from, v);
    }
}

}  // namespace kiln::codegen
