// The prelude of generated kernels. Semantics mirror the tir interpreter and src/support:
//  - f16/bf16 conversions are bit-exact ports of support/dtype.cc (round to nearest even);
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
} kiln_kernel_env;

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

static inline int64_t kiln_div_i64(int64_t a, int64_t b) {
    return b == 0 ? 0 : b == -1 ? (int64_t)(0 - (uint64_t)a) : a / b;
}
static inline int64_t kiln_mod_i64(int64_t a, int64_t b) { return (b == 0 || b == -1) ? 0 : a % b; }
static inline uint64_t kiln_div_u64(uint64_t a, uint64_t b) { return b == 0 ? 0 : a / b; }
static inline uint64_t kiln_mod_u64(uint64_t a, uint64_t b) { return b == 0 ? 0 : a % b; }
static inline int64_t kiln_floordiv_i64(int64_t a, int64_t b) {
    if (b == 0) return 0;
    if (b == -1) return (int64_t)(0 - (uint64_t)a);
    int64_t q = a / b, r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t kiln_floormod_i64(int64_t a, int64_t b) {
    if (b == 0 || b == -1) return 0;
    int64_t r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
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
static inline int64_t kiln_f2i(double v) {
    if (v != v) return 0;
    if (v >= 9223372036854775807.0) return INT64_MAX;
    if (v <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
}

/* Float min/max propagate NaN (ONNX Min/Max); ints compare plainly. */
static inline float kiln_min_f32(float a, float b) { return (a != a || b != b) ? NAN : (a < b ? a : b); }
static inline float kiln_max_f32(float a, float b) { return (a != a || b != b) ? NAN : (a > b ? a : b); }
static inline double kiln_min_f64(double a, double b) { return (a != a || b != b) ? (double)NAN : (a < b ? a : b); }
static inline double kiln_max_f64(double a, double b) { return (a != a || b != b) ? (double)NAN : (a > b ? a : b); }
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

/* f32 sigmoid computes in double: exp(-x) overflows float long before the result underflows. */
static inline float kiln_sigmoid_f32(float x) { return (float)(1.0 / (1.0 + exp(-(double)x))); }
static inline double kiln_sigmoid_f64(double x) { return 1.0 / (1.0 + exp(-x)); }

static inline void* kiln_alloc(size_t bytes) {
    size_t rounded = (bytes + 63) / 64 * 64;
    return aligned_alloc(64, rounded ? rounded : 64);
}
)KILN";
}

}  // namespace kiln::codegen
