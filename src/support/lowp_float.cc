// Conversions between float and the low-precision ONNX float types (float8 E4M3FN/E4M3FNUZ/
// E5M2/E5M2FNUZ, float4 E2M1, float8 E8M0), bit-exact with the ONNX Cast-19/24 spec.
//
// Decoding is the format's formula: (-1)^s * 2^(e - bias) * (1 + m / 2^M), subnormal
// (e == 0) m * 2^(1 - bias - M), plus each format's NaN/inf codes.
// Encoding rounds to nearest even with integer arithmetic on the f32 bits: the 24-bit f32
// significand is shifted right so that one unit is the target's quantum at the value's exponent
// (2^(max(e, 1 - bias) - M)); the rounded unit count n then IS the magnitude code, because
// code = (e_field - 1) << M + n for normals and n for subnormals, and a carry out of the
// mantissa lands in the exponent field by plain addition. A code above the largest finite one
// overflows: saturate clamps, otherwise inf (E5M2) or NaN. The C prelude (codegen/c_prelude.cc)
// holds a port of this file for generated kernels.
#include <cstring>

#include "support/dtype.h"

namespace kiln {
namespace {

enum class Special : uint8_t {
    kFN,    // no inf; NaN = S.111..1 (E4M3FN)
    kUZ,    // no inf, no -0; NaN = 0x80 (FNUZ)
    kIEEE,  // inf = S.11111.00, NaN = S.11111.xx (E5M2)
    kNone,  // no inf, no NaN (E2M1)
};
struct Format {
    int e_bits, m_bits, bias;
    uint32_t max_code;  // largest finite magnitude code
    Special special;
};

Format format_of(DType t) {
    switch (t) {
        case DType::kFloat8E4M3FN: return {4, 3, 7, 0x7e, Special::kFN};
        case DType::kFloat8E4M3FNUZ: return {4, 3, 8, 0x7f, Special::kUZ};
        case DType::kFloat8E5M2: return {5, 2, 15, 0x7b, Special::kIEEE};
        case DType::kFloat8E5M2FNUZ: return {5, 2, 16, 0x7f, Special::kUZ};
        default: return {2, 1, 1, 0x7, Special::kNone};  // kFloat4E2M1
    }
}

float bits_to_f32(uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}

// 2^e for e in [-149, 127], exact.
float exp2i(int e) {
    if (e >= -126) return bits_to_f32(static_cast<uint32_t>(e + 127) << 23);
    return bits_to_f32(1u << (e + 149));
}

}  // namespace

float lowp_to_float(DType t, uint8_t bits) {
    if (t == DType::kFloat8E8M0) return bits == 0xff ? bits_to_f32(0x7fc00000u) : exp2i(bits - 127);
    const Format f = format_of(t);
    const int width = f.e_bits + f.m_bits;
    bits &= static_cast<uint8_t>((1u << (width + 1)) - 1);
    const bool neg = (bits >> width) & 1;
    const uint32_t mag = bits & ((1u << width) - 1);
    const uint32_t e = mag >> f.m_bits, m = mag & ((1u << f.m_bits) - 1);
    const uint32_t e_max = (1u << f.e_bits) - 1;
    const float nan = bits_to_f32(neg ? 0xffc00000u : 0x7fc00000u);
    if (f.special == Special::kUZ && neg && mag == 0) return bits_to_f32(0x7fc00000u);
    if (f.special == Special::kFN && mag == ((1u << width) - 1)) return nan;
    if (f.special == Special::kIEEE && e == e_max)
        return m == 0 ? bits_to_f32(neg ? 0xff800000u : 0x7f800000u) : nan;
    float v = e == 0 ? static_cast<float>(m) * exp2i(1 - f.bias - f.m_bits)
                     : static_cast<float>((1u << f.m_bits) | m) * exp2i(static_cast<int>(e) - f.bias - f.m_bits);
    return neg ? -v : v;
}

uint8_t float_to_lowp(DType t, float x, bool saturate) {
    const Format f = format_of(t);
    const int width = f.e_bits + f.m_bits;
    uint32_t u;
    std::memcpy(&u, &x, 4);
    const uint32_t sign = u >> 31, abs = u & 0x7fffffffu;
    const uint32_t sign_bit = sign << width;
    const uint32_t nan_code = f.special == Special::kUZ ? 0x80u : sign_bit | ((1u << width) - 1);
    if (f.special == Special::kNone) saturate = true;
    if (abs > 0x7f800000u) {  // NaN
        if (f.special == Special::kNone) return static_cast<uint8_t>((sign ^ 1u) << width);
        if (f.special == Special::kIEEE) return static_cast<uint8_t>(sign_bit | 0x7e);
        return static_cast<uint8_t>(nan_code);
    }
    uint32_t code;
    if (abs == 0x7f800000u) {
        code = f.max_code + 1;  // overflows below
    } else if (abs < 0x00800000u) {
        code = 0;  // f32 subnormals are far below every target's smallest subnormal
    } else {
        const int e = static_cast<int>(abs >> 23) - 127;  // unbiased exponent
        const uint32_t sig = (abs & 0x7fffffu) | 0x800000u;
        const int min_e = 1 - f.bias;
        const int shift = (e < min_e ? min_e - e : 0) + 23 - f.m_bits;
        if (shift > 25) {
            code = 0;  // below half the smallest subnormal
        } else {
            uint32_t n = sig >> shift;
            const uint32_t rem = sig & ((1u << shift) - 1), half = 1u << (shift - 1);
            if (rem > half || (rem == half && (n & 1))) ++n;
            const int e_field = e < min_e ? 0 : e - min_e;  // biased exponent - 1
            const int64_t c = (static_cast<int64_t>(e_field) << f.m_bits) + n;
            code = c > 0xff ? 0x100u : static_cast<uint32_t>(c);
        }
    }
    if (code > f.max_code) {
        if (saturate) {
            code = f.max_code;
        } else if (f.special == Special::kIEEE) {
            return static_cast<uint8_t>(sign_bit | 0x7c);
        } else {
            return static_cast<uint8_t>(nan_code);
        }
    }
    if (code == 0 && f.special == Special::kUZ) return 0;
    return static_cast<uint8_t>(sign_bit | code);
}

float lowp_max_finite(DType t) {
    if (t == DType::kFloat8E8M0) return exp2i(127);
    return lowp_to_float(t, static_cast<uint8_t>(format_of(t).max_code));
}

uint8_t float_to_e8m0(float x, bool saturate, E8M0Round mode) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    const uint32_t exp = (u >> 23) & 0xff, mant = u & 0x7fffffu;
    if (exp == 0xff) return mant != 0 || !saturate ? 0xff : 0xfe;  // NaN; inf
    bool up = false;
    switch (mode) {
        case E8M0Round::kUp: up = mant != 0; break;
        case E8M0Round::kDown: break;
        case E8M0Round::kNearest: up = (mant & 0x400000u) && ((mant & 0x3fffffu) || exp > 0); break;
    }
    if (!up) return static_cast<uint8_t>(exp);
    if (exp == 0xfe) return saturate ? 0xfe : 0xff;
    return static_cast<uint8_t>(exp + 1);
}

}  // namespace kiln
