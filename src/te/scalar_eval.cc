// Scalar semantics of expressions, shared by constant folding (te/expr.cc, tir/simplify.cc) and
// the tir interpreter, so that folding and interpretation can never disagree.
//
// Integers are carried in an int64_t holding the value wrapped to the dtype's width (signed types
// sign-extended, unsigned zero-extended; u64 keeps its bit pattern and is compared/divided as
// unsigned). Add/sub/mul are done in uint64_t (two's-complement wrap, no UB) and then wrapped.
// Floats are carried in double; callers round to the dtype with round_float().
#include <cmath>
#include <cstdint>
#include <limits>

#include "support/dtype.h"
#include "te/expr.h"

namespace kiln::te {

int64_t wrap_int(DType t, int64_t v) {
    switch (t) {
        case DType::kBool: return v != 0 ? 1 : 0;
        case DType::kInt8: return static_cast<int8_t>(v);
        case DType::kInt16: return static_cast<int16_t>(v);
        case DType::kInt32: return static_cast<int32_t>(v);
        case DType::kUInt8: return static_cast<uint8_t>(v);
        case DType::kUInt16: return static_cast<uint16_t>(v);
        case DType::kUInt32: return static_cast<uint32_t>(v);
        case DType::kInt4: return wrap_int4(v);
        case DType::kUInt4: return wrap_uint4(v);
        default: return v;  // i64, u64 (bit pattern)
    }
}

double round_float(DType t, double v) {
    switch (t) {
        case DType::kFloat32: return static_cast<double>(static_cast<float>(v));
        case DType::kFloat16: return half_to_float(float_to_half(static_cast<float>(v)));
        case DType::kBFloat16: return bfloat16_to_float(float_to_bfloat16(static_cast<float>(v)));
        // Storage conversions of the f8/f4 types do not saturate (ops that saturate clamp first).
        case DType::kFloat8E8M0: return lowp_to_float(t, float_to_e8m0(static_cast<float>(v), false));
        case DType::kFloat8E4M3FN:
        case DType::kFloat8E4M3FNUZ:
        case DType::kFloat8E5M2:
        case DType::kFloat8E5M2FNUZ:
        case DType::kFloat4E2M1: return lowp_to_float(t, float_to_lowp(t, static_cast<float>(v), false));
        default: return v;
    }
}

double int_to_float(DType from, int64_t v) {
    if (from == DType::kUInt64) return static_cast<double>(static_cast<uint64_t>(v));
    return static_cast<double>(v);
}

int64_t float_to_int(DType t, double v) {
    if (t == DType::kBool) return v != 0.0 ? 1 : 0;
    if (std::isnan(v)) return 0;
    double tr = std::trunc(v);
    if (t == DType::kUInt64) {
        if (tr <= 0) return 0;
        if (tr >= 18446744073709551616.0) return -1;  // saturate to UINT64_MAX
        return static_cast<int64_t>(static_cast<uint64_t>(tr));
    }
    int64_t i;
    if (tr >= 9223372036854775807.0) {
        i = std::numeric_limits<int64_t>::max();
    } else if (tr <= -9223372036854775808.0) {
        i = std::numeric_limits<int64_t>::min();
    } else {
        i = static_cast<int64_t>(tr);
    }
    return wrap_int(t, i);
}

namespace {
int64_t int_pow(int64_t base, int64_t e) {
    if (e < 0) {
        if (base == 1) return 1;
        if (base == -1) return (e % 2 == 0) ? 1 : -1;
        return 0;
    }
    uint64_t result = 1, b = static_cast<uint64_t>(base);
    while (e > 0) {
        if (e & 1) result *= b;
        b *= b;
        e >>= 1;
    }
    return static_cast<int64_t>(result);
}
}  // namespace

bool eval_int_binary(BinaryOp op, DType t, int64_t a, int64_t b, int64_t* out) {
    const bool u64 = t == DType::kUInt64;
    const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
    int64_t r = 0;
    switch (op) {
        case BinaryOp::kAdd: r = static_cast<int64_t>(ua + ub); break;
        case BinaryOp::kSub: r = static_cast<int64_t>(ua - ub); break;
        case BinaryOp::kMul: r = static_cast<int64_t>(ua * ub); break;
        case BinaryOp::kDiv:
        case BinaryOp::kMod:
            if (b == 0) return false;
            if (u64) {
                r = static_cast<int64_t>(op == BinaryOp::kDiv ? ua / ub : ua % ub);
            } else if (b == -1) {  // avoid INT64_MIN / -1 overflow
                r = op == BinaryOp::kDiv ? static_cast<int64_t>(0 - ua) : 0;
            } else {
                r = op == BinaryOp::kDiv ? a / b : a % b;
            }
            break;
        case BinaryOp::kFloorDiv:
        case BinaryOp::kFloorMod: {
            if (b == 0) return false;
            if (u64) {
                r = static_cast<int64_t>(op == BinaryOp::kFloorDiv ? ua / ub : ua % ub);
                break;
            }
            if (b == -1) {
                r = op == BinaryOp::kFloorDiv ? static_cast<int64_t>(0 - ua) : 0;
                break;
            }
            int64_t q = a / b, m = a % b;
            if (m != 0 && ((m < 0) != (b < 0))) {
                q -= 1;
                m += b;
            }
            r = op == BinaryOp::kFloorDiv ? q : m;
            break;
        }
        case BinaryOp::kMin:
            r = u64 ? static_cast<int64_t>(ua < ub ? ua : ub) : (a < b ? a : b);
            break;
        case BinaryOp::kMax:
            r = u64 ? static_cast<int64_t>(ua > ub ? ua : ub) : (a > b ? a : b);
            break;
        case BinaryOp::kPow: r = int_pow(a, b); break;
        case BinaryOp::kEQ: *out = a == b; return true;
        case BinaryOp::kNE: *out = a != b; return true;
        case BinaryOp::kLT: *out = u64 ? ua < ub : a < b; return true;
        case BinaryOp::kLE: *out = u64 ? ua <= ub : a <= b; return true;
        case BinaryOp::kGT: *out = u64 ? ua > ub : a > b; return true;
        case BinaryOp::kGE: *out = u64 ? ua >= ub : a >= b; return true;
        case BinaryOp::kAnd: *out = (a != 0) && (b != 0); return true;
        case BinaryOp::kOr: *out = (a != 0) || (b != 0); return true;
        case BinaryOp::kBitAnd: r = a & b; break;
        case BinaryOp::kBitOr: r = a | b; break;
        case BinaryOp::kBitXor: r = a ^ b; break;
        case BinaryOp::kShl: r = ub >= 64 ? 0 : static_cast<int64_t>(ua << ub); break;
        case BinaryOp::kShr:
            if (dtype_is_unsigned_int(t) || t == DType::kBool) {
                r = ub >= 64 ? 0 : static_cast<int64_t>(ua >> ub);
            } else {
                r = a >> (ub >= 63 ? 63 : ub);  // arithmetic
            }
            break;
        case BinaryOp::kCount: return false;
    }
    *out = wrap_int(t, r);
    return true;
}

double eval_float_binary(BinaryOp op, double a, double b) {
    switch (op) {
        case BinaryOp::kAdd: return a + b;
        case BinaryOp::kSub: return a - b;
        case BinaryOp::kMul: return a * b;
        case BinaryOp::kDiv: return a / b;
        case BinaryOp::kFloorDiv: return std::floor(a / b);
        case BinaryOp::kFloorMod: return a - std::floor(a / b) * b;
        case BinaryOp::kMod: return std::fmod(a, b);
        // NaN-propagating min/max, like numpy (and ONNX Min/Max).
        case BinaryOp::kMin: return std::isnan(a) || std::isnan(b) ? NAN : (a < b ? a : b);
        case BinaryOp::kMax: return std::isnan(a) || std::isnan(b) ? NAN : (a > b ? a : b);
        case BinaryOp::kPow: return std::pow(a, b);
        case BinaryOp::kEQ: return a == b;
        case BinaryOp::kNE: return a != b;
        case BinaryOp::kLT: return a < b;
        case BinaryOp::kLE: return a <= b;
        case BinaryOp::kGT: return a > b;
        case BinaryOp::kGE: return a >= b;
        case BinaryOp::kAnd: return (a != 0) && (b != 0);
        case BinaryOp::kOr: return (a != 0) || (b != 0);
        case BinaryOp::kBitAnd:
        case BinaryOp::kBitOr:
        case BinaryOp::kBitXor:
        case BinaryOp::kShl:
        case BinaryOp::kShr:  // ints only
        case BinaryOp::kCount: break;
    }
    return NAN;
}

double eval_float_unary(UnaryOp op, double a) {
    switch (op) {
        case UnaryOp::kNeg: return -a;
        case UnaryOp::kNot: return a == 0.0 ? 1.0 : 0.0;
        case UnaryOp::kAbs: return std::fabs(a);
        case UnaryOp::kExp: return std::exp(a);
        case UnaryOp::kLog: return std::log(a);
        case UnaryOp::kSqrt: return std::sqrt(a);
        case UnaryOp::kTanh: return std::tanh(a);
        case UnaryOp::kSigmoid: return 1.0 / (1.0 + std::exp(-a));
        case UnaryOp::kErf: return std::erf(a);
        case UnaryOp::kFloor: return std::floor(a);
        case UnaryOp::kCeil: return std::ceil(a);
        case UnaryOp::kRound: return std::nearbyint(a);
        case UnaryOp::kSin: return std::sin(a);
        case UnaryOp::kCos: return std::cos(a);
        case UnaryOp::kTan: return std::tan(a);
        case UnaryOp::kAsin: return std::asin(a);
        case UnaryOp::kAcos: return std::acos(a);
        case UnaryOp::kAtan: return std::atan(a);
        case UnaryOp::kSinh: return std::sinh(a);
        case UnaryOp::kCosh: return std::cosh(a);
        case UnaryOp::kAsinh: return std::asinh(a);
        case UnaryOp::kAcosh: return std::acosh(a);
        case UnaryOp::kAtanh: return std::atanh(a);
        case UnaryOp::kLog1p: return std::log1p(a);
        case UnaryOp::kIsNaN: return std::isnan(a) ? 1.0 : 0.0;
        case UnaryOp::kBitNot:  // ints only
        case UnaryOp::kCount: break;
    }
    return NAN;
}

int64_t eval_int_unary(UnaryOp op, DType t, int64_t a) {
    switch (op) {
        case UnaryOp::kNeg: return wrap_int(t, static_cast<int64_t>(0 - static_cast<uint64_t>(a)));
        case UnaryOp::kNot: return a == 0 ? 1 : 0;
        case UnaryOp::kAbs:
            if (t == DType::kUInt64) return a;
            return wrap_int(t, a < 0 ? static_cast<int64_t>(0 - static_cast<uint64_t>(a)) : a);
        case UnaryOp::kFloor:
        case UnaryOp::kCeil:
        case UnaryOp::kRound: return a;
        case UnaryOp::kIsNaN: return 0;
        case UnaryOp::kBitNot: return wrap_int(t, ~a);
        default: return float_to_int(t, eval_float_unary(op, int_to_float(t, a)));
    }
}

}  // namespace kiln::te
