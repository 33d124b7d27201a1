// The prelude of generated kernels. Semantics mirror the tir interpreter and src/support:
//  - f16/bf16 conversions are bit-exact ports of support/dtype.cc (round to nearest even), the
//    f8/f4/e8m0 ones of support/lowp_float.cc (non-saturating storage conversions);
//  - integer division and modulo by zero give 0 instead of trapping (and INT64_MIN / -1 wraps),
//    floordiv/floormod round toward negative infinity;
//  - float -> int conversion truncates, maps NaN to 0 and saturates at the int64 range before
//    wrapping to the target width (C's own cast is undefined there);
//  - float min/max propagate NaN; integer pow is exact (wrapping) repeated squaring.
#include "codegen/c_prelude.h"

namespace kiln::codegen {

const char* c_prelude() {
    return R"KILN(#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifndef KILN_RUNTIME_KERNEL_ABI_H_
#define KILN_RUNTIME_KERNEL_ABI_H_
/* A chunk of a parallel loop: iterations [begin, end). */
typedef void (*kiln_task_fn)(int64_t begin, int64_t end, void* ctx);

/* What the runtime hands every kernel call: its intra-op thread pool. */
typedef struct kiln_kernel_env {
    void* pool;
    /* Runs fn over [0, n) split into chunks across the pool's threads; returns when all are done. */
    void (*parallel_for)(void* pool, int64_t n, kiln_task_fn fn, void* ctx);
    /* Preemption (NULL: the call is not preemptible). Non-zero once parallel_for stopped handing
     * out chunks because the run was asked to stop: the kernel then frees its temporaries and
     * returns KILN_KERNEL_STOPPED, and the runtime runs it again from its start later. */
    const volatile int32_t* stop;
} kiln_kernel_env;

/* What a kernel returns when it was cut short by env->stop (1: a failed allocation). */
#define KILN_KERNEL_STOPPED 2

/* A loop the schedule unrolls. The quick tier of a tiered compile (-DKILN_QUICK_TIER) leaves it
 * rolled: GCC's complete unrolling of a register tile is most of a product kernel's compile time,
 * and at -O1 the unrolled tile runs no faster. */
#define KILN_PRAGMA_(x) _Pragma(#x)
#ifdef KILN_QUICK_TIER
#define KILN_UNROLL(n)
#else
#define KILN_UNROLL(n) KILN_PRAGMA_(GCC unroll n)
#endif

/* A kernel: args are the data pointers of its buffers (inputs, then outputs). Returns 0 on success. */
typedef int32_t (*kiln_kernel_fn)(void* const* args, const kiln_kernel_env* env);
#endif /* KILN_RUNTIME_KERNEL_ABI_H_ */

static inline float kiln_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {
            int e = -1;
            do { ++e; mant <<= 1; } while ((mant & 0x400u) == 0);
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t kiln_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    int32_t exp = (int32_t)((x >> 23) & 0xffu) - 127 + 15;
    uint32_t mant = x & 0x7fffffu;
    if (((x >> 23) & 0xffu) == 0xffu) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0u));
    if (exp >= 31) return (uint16_t)(sign | 0x7c00u);
    if (exp <= 0) {
        if (exp < -10) return (uint16_t)sign;
        mant |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t half = mant >> shift, rem = mant & ((1u << shift) - 1u), mid = 1u << (shift - 1u);
        if (rem > mid || (rem == mid && (half & 1u))) ++half;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)exp << 10) | (mant >> 13);
    uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
    return (uint16_t)half;
}

static inline float kiln_bf16_to_f32(uint16_t b) {
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t kiln_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)((x + rounding) >> 16);
}

/* Low-precision types: a port of support/lowp_float.cc (round to nearest even; stores do not
   saturate: overflow gives inf (e5m2) or NaN; f4e2m1 always saturates). special: 0 = FN (NaN =
   S.1..1), 1 = FNUZ (NaN = 0x80, no -0), 2 = IEEE (e5m2), 3 = none (e2m1). */
static inline float kiln_bits_f32(uint32_t b) {
    float f;
    memcpy(&f, &b, 4);
    return f;
}
static inline float kiln_exp2i_f32(int e) {
    return kiln_bits_f32(e >= -126 ? (uint32_t)(e + 127) << 23 : 1u << (e + 149));
}
static inline float kiln_lowp_to_f32(uint8_t bits, int e_bits, int m_bits, int bias, int special) {
    int width = e_bits + m_bits;
    bits &= (uint8_t)((1u << (width + 1)) - 1);
    uint32_t neg = (bits >> width) & 1u, mag = bits & ((1u << width) - 1);
    uint32_t e = mag >> m_bits, m = mag & ((1u << m_bits) - 1), e_max = (1u << e_bits) - 1;
    float nan = kiln_bits_f32(neg ? 0xffc00000u : 0x7fc00000u);
    if (special == 1 && neg && mag == 0) return kiln_bits_f32(0x7fc00000u);
    if (special == 0 && mag == (1u << width) - 1) return nan;
    if (special == 2 && e == e_max) return m == 0 ? kiln_bits_f32(neg ? 0xff800000u : 0x7f800000u) : nan;
    float v = e == 0 ? (float)m * kiln_exp2i_f32(1 - bias - m_bits)
                     : (float)((1u << m_bits) | m) * kiln_exp2i_f32((int)e - bias - m_bits);
    return neg ? -v : v;
}
static inline uint8_t kiln_f32_to_lowp(float x, int e_bits, int m_bits, int bias, uint32_t max_code,
                                       int special) {
    int width = e_bits + m_bits;
    uint32_t u, code;
    memcpy(&u, &x, 4);
    uint32_t sign = u >> 31, abs = u & 0x7fffffffu, sign_bit = sign << width;
    uint32_t nan_code = special == 1 ? 0x80u : (sign_bit | ((1u << width) - 1));
    if (abs > 0x7f800000u) {
        if (special == 3) return (uint8_t)((sign ^ 1u) << width);
        if (special == 2) return (uint8_t)(sign_bit | 0x7eu);
        return (uint8_t)nan_code;
    }
    if (abs == 0x7f800000u) {
        code = max_code + 1;
    } else if (abs < 0x00800000u) {
        code = 0;
    } else {
        int e = (int)(abs >> 23) - 127, min_e = 1 - bias;
        uint32_t sig = (abs & 0x7fffffu) | 0x800000u;
        int shift = (e < min_e ? min_e - e : 0) + 23 - m_bits;
        if (shift > 25) {
            code = 0;
        } else {
            uint32_t n = sig >> shift, rem = sig & ((1u << shift) - 1), half = 1u << (shift - 1);
            if (rem > half || (rem == half && (n & 1u))) ++n;
            int64_t c = ((int64_t)(e < min_e ? 0 : e - min_e) << m_bits) + n;
            code = c > 0xff ? 0x100u : (uint32_t)c;
        }
    }
    if (code > max_code) {
        if (special == 3) code = max_code;
        else if (special == 2) return (uint8_t)(sign_bit | 0x7cu);
        else return (uint8_t)nan_code;
    }
    if (code == 0 && special == 1) return 0;
    return (uint8_t)(sign_bit | code);
}
static inline float kiln_f8e4m3fn_to_f32(uint8_t b) { return kiln_lowp_to_f32(b, 4, 3, 7, 0); }
static inline float kiln_f8e4m3fnuz_to_f32(uint8_t b) { return kiln_lowp_to_f32(b, 4, 3, 8, 1); }
static inline float kiln_f8e5m2_to_f32(uint8_t b) { return kiln_lowp_to_f32(b, 5, 2, 15, 2); }
static inline float kiln_f8e5m2fnuz_to_f32(uint8_t b) { return kiln_lowp_to_f32(b, 5, 2, 16, 1); }
static inline float kiln_f4e2m1_to_f32(uint8_t b) { return kiln_lowp_to_f32(b, 2, 1, 1, 3); }
static inline float kiln_f8e8m0_to_f32(uint8_t b) {
    return b == 0xffu ? kiln_bits_f32(0x7fc00000u) : kiln_exp2i_f32((int)b - 127);
}
static inline uint8_t kiln_f32_to_f8e4m3fn(float x) { return kiln_f32_to_lowp(x, 4, 3, 7, 0x7eu, 0); }
static inline uint8_t kiln_f32_to_f8e4m3fnuz(float x) { return kiln_f32_to_lowp(x, 4, 3, 8, 0x7fu, 1); }
static inline uint8_t kiln_f32_to_f8e5m2(float x) { return kiln_f32_to_lowp(x, 5, 2, 15, 0x7bu, 2); }
static inline uint8_t kiln_f32_to_f8e5m2fnuz(float x) { return kiln_f32_to_lowp(x, 5, 2, 16, 0x7fu, 1); }
static inline uint8_t kiln_f32_to_f4e2m1(float x) { return kiln_f32_to_lowp(x, 2, 1, 1, 0x7u, 3); }
/* float -> e8m0, round up, no saturation: NaN/inf and increments past 0xfe give 0xff. */
static inline uint8_t kiln_f32_to_f8e8m0(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t exp = (u >> 23) & 0xffu, mant = u & 0x7fffffu;
    if (exp == 0xffu) return 0xffu;
    return (uint8_t)(mant != 0 ? exp + 1 : exp);
}
static inline int8_t kiln_wrap_i4(int64_t v) { return (int8_t)((int8_t)((v & 0xf) << 4) >> 4); }
static inline uint8_t kiln_wrap_u4(int64_t v) { return (uint8_t)(v & 0xf); }

static inline int64_t kiln_div_i64(int64_t a, int64_t b) {
    return b == 0 ? 0 : b == -1 ? (int64_t)(0 - (uint64_t)a) : a / b;
}
static inline int64_t kiln_mod_i64(int64_t a, int64_t b) { return (b == 0 || b == -1) ? 0 : a % b; }
static inline uint64_t kiln_div_u64(uint64_t a, uint64_t b) { return b == 0 ? 0 : a / b; }
static inline uint64_t kiln_mod_u64(uint64_t a, uint64_t b) { return b == 0 ? 0 : a % b; }
/* floordiv / floormod are branch-free (selects only): an inner loop whose index uses one (a
   broadcast bias read at floormod(i, C)) still vectorizes; with branches GCC left the BERT GELU
   epilogue scalar (6 ns per element). */
static inline int64_t kiln_floordiv_i64(int64_t a, int64_t b) {
    const int64_t d = ((b == 0) | (b == -1)) ? 1 : b;
    const int64_t q = a / d, r = a % d;
    const int64_t f = q - (((r != 0) & ((r < 0) != (d < 0))) ? 1 : 0);
    return b == 0 ? 0 : b == -1 ? (int64_t)(0 - (uint64_t)a) : f;
}
static inline int64_t kiln_floormod_i64(int64_t a, int64_t b) {
    const int64_t d = ((b == 0) | (b == -1)) ? 1 : b;
    const int64_t r = a % d;
    const int64_t m = r + (((r != 0) & ((r < 0) != (d < 0))) ? d : 0);
    return ((b == 0) | (b == -1)) ? 0 : m;
}
static inline int64_t kiln_abs_i64(int64_t a) { return a < 0 ? (int64_t)(0 - (uint64_t)a) : a; }
static inline int64_t kiln_pow_i64(int64_t base, int64_t e) {
    if (e < 0) return base == 1 ? 1 : base == -1 ? ((e % 2 == 0) ? 1 : -1) : 0;
    uint64_t result = 1, b = (uint64_t)base;
    while (e > 0) {
        if (e & 1) result *= b;
        b *= b;
        e >>= 1;
    }
    return (int64_t)result;
}
/* Shifts: a count >= 64 gives 0 (an arithmetic right shift of a negative value: -1). */
static inline uint64_t kiln_shl_u64(uint64_t a, uint64_t n) { return n >= 64 ? 0 : a << n; }
static inline uint64_t kiln_shr_u64(uint64_t a, uint64_t n) { return n >= 64 ? 0 : a >> n; }
static inline int64_t kiln_shr_i64(int64_t a, uint64_t n) { return a >> (n >= 63 ? 63 : n); }
static inline uint64_t kiln_f2u(double v) {
    if (v != v || v <= 0) return 0;
    if (v >= 18446744073709551616.0) return UINT64_MAX;
    return (uint64_t)v;
}
/* f32 -> int32 of a value already clamped inside int32's range (NaN: 0, as kiln_f2i): no double,
   no branches, so loops of QuantizeLinear vectorize (c_expr_printer.cc: clamped_to_i32). */
static inline int32_t kiln_f2i32_f32(float v) { return (int32_t)(v != v ? 0.0f : v); }
static inline int64_t kiln_f2i(double v) {
    if (v != v) return 0;
    if (v >= 9223372036854775807.0) return INT64_MAX;
    if (v <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
}

/* Float min/max propagate NaN (ONNX Min/Max); ints compare plainly. NOTE: written as selects
   without && / || so that GCC if-converts and vectorizes them (the short-circuit form kept every
   Clip/Relu epilogue loop scalar). `b < a ? b : a` is one vminps / vmaxps, which returns its
   second operand a when either is NaN, so only b's NaN needs the second select; an accumulator
   passed as a (a pool's window, a reduction) keeps its NaN, and the select's compare reads b
   alone, off the accumulator's dependency chain: MaxPool's 9-tap windows ran 1.3x faster than
   with a NaN check on each side (three selects). Equal operands give a, as numpy's
   maximum / minimum do (max(+0, -0) is +0, max(-0, +0) is -0). */
static inline float kiln_min_f32(float a, float b) { float m = b < a ? b : a; return b != b ? b : m; }
static inline float kiln_max_f32(float a, float b) { float m = b > a ? b : a; return b != b ? b : m; }
static inline double kiln_min_f64(double a, double b) { double m = b < a ? b : a; return b != b ? b : m; }
static inline double kiln_max_f64(double a, double b) { double m = b > a ? b : a; return b != b ? b : m; }
#define KILN_MINMAX(suffix, type) \
    static inline type kiln_min_##suffix(type a, type b) { return a < b ? a : b; } \
    static inline type kiln_max_##suffix(type a, type b) { return a > b ? a : b; }
KILN_MINMAX(i8, int8_t)
KILN_MINMAX(i16, int16_t)
KILN_MINMAX(i32, int32_t)
KILN_MINMAX(i64, int64_t)
KILN_MINMAX(u8, uint8_t)
KILN_MINMAX(u16, uint16_t)
KILN_MINMAX(u32, uint32_t)
KILN_MINMAX(u64, uint64_t)
#undef KILN_MINMAX

/* select with both operands evaluated (see c_expr_printer.cc: avoids a GCC 12 AVX-512 miscompile). */
#define KILN_SELECT(suffix, type) \
    static inline type kiln_select_##suffix(int c, type a, type b) { return c ? a : b; }
KILN_SELECT(f32, float)
KILN_SELECT(f64, double)
KILN_SELECT(i8, int8_t)
KILN_SELECT(i16, int16_t)
KILN_SELECT(i32, int32_t)
KILN_SELECT(i64, int64_t)
KILN_SELECT(u8, uint8_t)
KILN_SELECT(u16, uint16_t)
KILN_SELECT(u32, uint32_t)
KILN_SELECT(u64, uint64_t)
#undef KILN_SELECT

/* Vectorizable f32 exp and erf: branch-free (selects only, no libm call), so GCC vectorizes them
   inside `#pragma GCC ivdep` loops. The tir interpreter keeps libm as the exact reference;
   tests/codegen/c_math_test.cc sweeps all of float against libm in double.
   kiln_exp_f32: max error 2 ulp (subnormal results: in units of 2^-149); exp(-inf) = 0,
   exp(+inf) and overflow = inf, NaN -> NaN. x = n ln2 + r with n = round(x / ln2) taken from the
   low mantissa bits of x / ln2 + 1.5 * 2^23 (no float -> int conversion), ln2 split hi/lo (hi has
   8 trailing zero bits, so n * hi is exact), e^r = 1 + r + r^2 S(r) on |r| <= ln2 / 2 with S a
   degree-4 least-squares (Lawson-weighted) fit, and 2^n applied as two power-of-two factors so
   results down in the subnormals round once. */
static inline float kiln_exp_f32(float x) {
    x = x > 89.0f ? 89.0f : x; /* comparisons keep NaN */
    x = x < -104.0f ? -104.0f : x;
    float t = x * 1.44269504088896341f + 12582912.0f;
    float n = t - 12582912.0f;
    float r = x - n * 0.693145751953125f;
    r = r - n * 1.42860682030941723e-6f;
    float s = 1.38145313652307e-3f;
    s = s * r + 8.36874594011075e-3f;
    s = s * r + 4.166839096767587e-2f;
    s = s * r + 1.6666520390097878e-1f;
    s = s * r + 4.999999343121299e-1f;
    float p = (r * r * s + r) + 1.0f;
    uint32_t tb;
    memcpy(&tb, &t, 4);
    int32_t k = (int32_t)(tb - 0x4b400000u), k1 = k >> 1, k2 = k - k1;
    return p * kiln_bits_f32((uint32_t)(k1 + 127) << 23) * kiln_bits_f32((uint32_t)(k2 + 127) << 23);
}
/* kiln_erf_f32: max absolute error 4e-7 (a few ulp near |erf| = 1), within 2 ulp for |x| < 1,
   erf(+-inf) = +-1, erf(-0) = -0, NaN -> NaN. erf(x) = x P(x^2) / Q(x^2) on |x| <= 3.925 with P
   of degree 6 and Q of degree 5, fitted (iteratively reweighted least squares) to relative error
   2e-9 in double; beyond 3.925 erf rounds to 1 in float. Computed on |x| (then the sign of x
   copied back). For |x| < 1 as |x| (c0 + x^2 P1(x^2) / Q(x^2)), P1 = (P - c0 Q) / x^2, with
   c0 = 2 / sqrt(pi) split hi + lo so small arguments keep their relative accuracy; above, as
   |x| P / Q (P1's cancellation would cost accuracy near 1). */
static inline float kiln_erf_f32(float x) {
    float ax = fabsf(x);
    float a = ax > 3.925f ? 3.925f : ax; /* keeps NaN */
    float z = a * a;
    float p = -1.2828699075262406e-08f;
    p = p * z - 6.585214827058647e-05f;
    p = p * z - 1.092157903631242e-03f;
    p = p * z - 1.3574233901668105e-02f;
    p = p * z - 7.425121734317991e-02f;
    p = p * z - 3.7612647268666044e-01f;
    float q = 6.2449523740796403e-05f;
    q = q * z + 1.3019738287046350e-03f;
    q = q * z + 1.5432516920341435e-02f;
    q = q * z + 1.1388075928371746e-01f;
    q = q * z + 4.9741173006453926e-01f;
    q = q * z + 1.0f;
    float r = 1.0f / q; /* one division for both forms (a vector division is ~16 FMAs' time) */
    float small = a * 1.128379225730896f + a * (z * (p * r) - 5.6590808483747423e-08f);
    float b = -1.2828699075262406e-08f;
    b = b * z + 4.6145934412475387e-06f;
    b = b * z + 3.7696224344463273e-04f;
    b = b * z + 3.8394967186471062e-03f;
    b = b * z + 5.4249459198423500e-02f;
    b = b * z + 1.8514256200409784e-01f;
    b = b * z + 1.1283791691400875e+00f;
    float big = a * b * r;
    float y = ax < 1.0f ? small : big;
    y = y > 1.0f ? 1.0f : y;
    y = ax >= 3.925f ? 1.0f : y;
    return copysignf(y, x);
}

/* kiln_sigmoid_f32: max error 4 ulp (subnormal results: in units of 2^-149); 1 at +inf, 0 at -inf,
   NaN -> NaN. Vectorizable like kiln_exp_f32 (a libm exp in double made every fused SiLU
   epilogue scalar: EfficientNet's Conv+Sigmoid+Mul ran at 2 GFLOP/s). With e = exp(-|x|) <= 1,
   nothing overflows: sigmoid(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0, so results
   down in the subnormals (x in [-104, -87]) keep their value. */
static inline float kiln_sigmoid_f32(float x) {
    float e = kiln_exp_f32(-fabsf(x));
    float num = x >= 0.0f ? 1.0f : e; /* NaN: e is NaN, so is the result */
    return num / (1.0f + e);
}
static inline double kiln_sigmoid_f64(double x) { return 1.0 / (1.0 + exp(-x)); }
/* kiln_log_f32: max error 2 ulp (1.09 measured over every 7th float); log(0) = -inf, log(x < 0) =
   NaN, log(inf) = inf, NaN -> NaN; subnormals scaled by 2^23 first. x = 2^e m with m in
   [sqrt(1/2), sqrt(2)), log(m) = f - f^2/2 + f^3 P(f), f = m - 1, P of degree 8 fitted (weighted
   least squares in double) to the relative error of log1p on that interval, e ln2 added with ln2
   split hi + lo. kiln_log1p_f32: max error 2 ulp (1.56 measured): log(1 + x) plus the part of x
   that rounding 1 + x lost, divided by 1 + x; x - x^2/2 below 1e-4. Vectorizable like
   kiln_exp_f32 (libm's logf/log1pf kept Softplus, Mish and LogSoftmax epilogues scalar), given
   -fno-trapping-math (codegen/compile_driver.cc): without it GCC 12 kept these selects as
   branches. */
static inline float kiln_log_f32(float x) {
    int32_t sub = x < 1.17549435e-38f; /* subnormals (and 0, negatives) scaled by 2^23 */
    float s = x * (sub ? 8388608.0f : 1.0f);
    uint32_t b;
    memcpy(&b, &s, 4);
    int32_t e = (int32_t)((b >> 23) & 0xffu) - 127 - (sub * 23);
    uint32_t mb = (b & 0x7fffffu) | 0x3f800000u; /* mantissa in [1, 2) */
    float m;
    memcpy(&m, &mb, 4);
    int32_t big = m > 1.41421356f;
    m = m * (big ? 0.5f : 1.0f);
    e += big;
    float f = m - 1.0f, ef = (float)e;
    float p = 6.607418476181846e-02f;
    p = p * f - 1.1506577396863503e-01f;
    p = p * f + 1.1857413401382864e-01f;
    p = p * f - 1.2429618216214215e-01f;
    p = p * f + 1.422647287518539e-01f;
    p = p * f - 1.6667001977535958e-01f;
    p = p * f + 2.000178023457758e-01f;
    p = p * f - 2.5000020705537984e-01f;
    p = p * f + 3.3333316711305455e-01f;
    float r = ef * -2.12194440e-4f + (f - 0.5f * f * f + f * f * f * p);
    r = r + ef * 0.693359375f;
    r = r + (x - x); /* NaN stays NaN (inf becomes NaN: set next) */
    r = x > 3.40282347e38f ? INFINITY : r;
    r = x == 0.0f ? -INFINITY : r;
    return x < 0.0f ? NAN : r;
}
static inline float kiln_log1p_f32(float x) {
    float w = 1.0f + x;
    float c = (x - (w - 1.0f)) / w; /* what rounding 1 + x lost, as a correction to log(w) */
    float r = kiln_log_f32(w) + c;
    r = fabsf(x) < 1e-4f ? x - 0.5f * x * x : r; /* below, 1 + x loses too much of x */
    r = x > 3.40282347e38f ? INFINITY : r;
    return x == -1.0f ? -INFINITY : r; /* x < -1: log of a negative w, NaN */
}
/* kiln_tanh_f32: max error 2 ulp (1.32 measured over every 7th float), tanh(+-inf) = +-1,
   tanh(-0) = -0, NaN -> NaN. Vectorizable like kiln_exp_f32 (libm's tanhf kept every GELU-tanh
   and LSTM/GRU epilogue scalar: GPT-2's fused up projections ran at half the speed of its down
   projections). On |x| < 0.625 as |x| + |x| z P(z), z = x^2, P of degree 5 fitted (weighted least
   squares in double) to the relative error of tanh; above as 1 - 2 / (exp(2|x|) + 1), with |x|
   capped at 9 (tanh rounds to 1 in float from 9.01); the sign of x copied back. */
static inline float kiln_tanh_f32(float x) {
    float a = fabsf(x);
    float z = a * a;
    float p = 2.1780235209483325e-03f;
    p = p * z - 8.214972289828388e-03f;
    p = p * z + 2.1715552693812607e-02f;
    p = p * z - 5.3949396666279764e-02f;
    p = p * z + 1.3333226063576192e-01f;
    p = p * z - 3.333333128564372e-01f;
    float small = a + a * (z * p);
    float e = kiln_exp_f32(2.0f * (a > 9.0f ? 9.0f : a)); /* comparisons keep NaN */
    float big = 1.0f - 2.0f / (e + 1.0f);
    float y = a < 0.625f ? small : big;
    y = a > 9.0f ? 1.0f : y;
    return copysignf(y, x);
}

static inline void* kiln_alloc(size_t bytes) {
    size_t rounded = (bytes + 63) / 64 * 64;
    return aligned_alloc(64, rounded ? rounded : 64);
}
)KILN";
}

// Only kernels with symbolic dims carry this part of runtime/kernel_abi.h: the prelude of a
// static kernel stays byte-identical, and so do its source and its kernel-cache key.
const char* c_prelude_dims() {
    return R"KILN(
#ifndef KILN_KERNEL_DIMS_ABI_
#define KILN_KERNEL_DIMS_ABI_
/* A kernel with symbolic dims (tir PrimFunc::dims): the same as kiln_kernel_fn plus the dims'
 * values, in the kernel's dims order; buffer sizes, strides and loop extents are computed from
 * them. The caller checks that each buffer holds the elements these dims need (the kernel only
 * refuses a negative dim, returning KILN_KERNEL_BAD_DIMS). A kernel without symbolic dims keeps
 * the kiln_kernel_fn signature. */
typedef int32_t (*kiln_kernel_dims_fn)(void* const* args, const int64_t* dims, const kiln_kernel_env* env);

/* What a kiln_kernel_dims_fn returns for a negative dim (it touched no buffer). */
#define KILN_KERNEL_BAD_DIMS 3
#endif /* KILN_KERNEL_DIMS_ABI_ */
)KILN";
}

const char* c_prelude_transpose() {
    return R"KILN(
#ifndef KILN_TRANSPOSE_TILE_
#define KILN_TRANSPOSE_TILE_
/* dst[r * ds + c] = src[c * ss + r] for r, c in [0, 16): one 16 x 16 tile of 4-byte elements
 * (codegen/transpose_tiles.h). AVX-512: 16 row loads, four rounds of shuffles (pairs of rows
 * interleaved, then groups of four, then 128-bit lanes twice), 16 row stores; AVX: four 8 x 8
 * tiles the same way; otherwise a scalar loop. dst and src do not overlap. */
#if defined(__AVX512F__) || defined(__AVX__)
#include <immintrin.h>
#endif
#if defined(__AVX512F__)
static inline void kiln_transpose_16x16_4b(void* restrict dst, int64_t ds, const void* restrict src, int64_t ss) {
    const float* s = (const float*)src;
    float* d = (float*)dst;
    __m512 r[16], t[16], u[16];
    for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(s + i * ss);
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    /* u[4g + c], 128-bit lane L: column 4L + c of rows 4g .. 4g + 3 */
    for (int g = 0; g < 4; ++g) {
        u[4 * g + 0] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
        u[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
        u[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        u[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
    }
    for (int c = 0; c < 4; ++c) {
        const __m512 p0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x44), p1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xEE);
        const __m512 p2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x44), p3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xEE);
        _mm512_storeu_ps(d + (0 + c) * ds, _mm512_shuffle_f32x4(p0, p2, 0x88));
        _mm512_storeu_ps(d + (4 + c) * ds, _mm512_shuffle_f32x4(p0, p2, 0xDD));
        _mm512_storeu_ps(d + (8 + c) * ds, _mm512_shuffle_f32x4(p1, p3, 0x88));
        _mm512_storeu_ps(d + (12 + c) * ds, _mm512_shuffle_f32x4(p1, p3, 0xDD));
    }
}
#elif defined(__AVX__)
static inline void kiln_transpose_8x8_4b(float* restrict d, int64_t ds, const float* restrict s, int64_t ss) {
    __m256 r[8], t[8], u[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(s + i * ss);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int g = 0; g < 2; ++g) {
        u[4 * g + 0] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
        u[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
        u[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        u[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
    }
    for (int c = 0; c < 4; ++c) {
        _mm256_storeu_ps(d + c * ds, _mm256_permute2f128_ps(u[c], u[4 + c], 0x20));
        _mm256_storeu_ps(d + (4 + c) * ds, _mm256_permute2f128_ps(u[c], u[4 + c], 0x31));
    }
}
static inline void kiln_transpose_16x16_4b(void* restrict dst, int64_t ds, const void* restrict src, int64_t ss) {
    const float* s = (const float*)src;
    float* d = (float*)dst;
    for (int i = 0; i < 16; i += 8)
        for (int j = 0; j < 16; j += 8) kiln_transpose_8x8_4b(d + i * ds + j, ds, s + j * ss + i, ss);
}
#else
static inline void kiln_transpose_16x16_4b(void* restrict dst, int64_t ds, const void* restrict src, int64_t ss) {
    const unsigned char* s = (const unsigned char*)src; /* bytes: any 4-byte type, no aliasing question */
    unsigned char* d = (unsigned char*)dst;
    for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) memcpy(d + 4 * (r * ds + c), s + 4 * (c * ss + r), 4);
}
#endif
#endif /* KILN_TRANSPOSE_TILE_ */
)KILN";
}

}  // namespace kiln::codegen
