#include "support/dtype.h"

#include <cstring>
#include <string>

namespace kiln {
namespace {
struct DTypeInfo {
    DType dtype;
    size_t size;
    const char* name;
    const char* c_type;
    const char* numpy;
    int onnx;
};
// Indexed by DType's value.
constexpr DTypeInfo kInfo[] = {
    {DType::kFloat32, 4, "f32", "float", "<f4", 1},
    {DType::kFloat64, 8, "f64", "double", "<f8", 11},
    {DType::kFloat16, 2, "f16", "uint16_t", "<f2", 10},
    {DType::kBFloat16, 2, "bf16", "uint16_t", "<V2", 16},
    {DType::kInt8, 1, "i8", "int8_t", "|i1", 3},
    {DType::kInt16, 2, "i16", "int16_t", "<i2", 5},
    {DType::kInt32, 4, "i32", "int32_t", "<i4", 6},
    {DType::kInt64, 8, "i64", "int64_t", "<i8", 7},
    {DType::kUInt8, 1, "u8", "uint8_t", "|u1", 2},
    {DType::kUInt16, 2, "u16", "uint16_t", "<u2", 4},
    {DType::kUInt32, 4, "u32", "uint32_t", "<u4", 12},
    {DType::kUInt64, 8, "u64", "uint64_t", "<u8", 13},
    {DType::kBool, 1, "bool", "uint8_t", "|b1", 9},
    {DType::kFloat8E4M3FN, 1, "f8e4m3fn", "uint8_t", "", 17},
    {DType::kFloat8E4M3FNUZ, 1, "f8e4m3fnuz", "uint8_t", "", 18},
    {DType::kFloat8E5M2, 1, "f8e5m2", "uint8_t", "", 19},
    {DType::kFloat8E5M2FNUZ, 1, "f8e5m2fnuz", "uint8_t", "", 20},
    {DType::kFloat8E8M0, 1, "f8e8m0", "uint8_t", "", 24},
    {DType::kInt4, 1, "i4", "int8_t", "", 22},
    {DType::kUInt4, 1, "u4", "uint8_t", "", 21},
    {DType::kFloat4E2M1, 1, "f4e2m1", "uint8_t", "", 23},
    {DType::kString, sizeof(std::string), "str", "", "", 8},
};
static_assert(sizeof(kInfo) / sizeof(kInfo[0]) == static_cast<size_t>(DType::kString) + 1,
              "kInfo must list every DType in enum order");
const DTypeInfo& info(DType t) { return kInfo[static_cast<size_t>(t)]; }
}  // namespace

size_t dtype_size(DType t) { return info(t).size; }
const char* dtype_name(DType t) { return info(t).name; }
const char* dtype_c_type(DType t) { return info(t).c_type; }
const char* dtype_numpy_descr(DType t) { return info(t).numpy; }
int dtype_to_onnx(DType t) { return info(t).onnx; }

std::optional<DType> dtype_from_name(std::string_view name) {
    for (const auto& i : kInfo)
        if (name == i.name) return i.dtype;
    return std::nullopt;
}
std::optional<DType> dtype_from_numpy_descr(std::string_view descr) {
    for (const auto& i : kInfo)
        if (!descr.empty() && descr == i.numpy) return i.dtype;
    if (descr == "<i1" || descr == "i1") return DType::kInt8;
    if (descr == "<u1" || descr == "u1") return DType::kUInt8;
    if (descr == "<b1") return DType::kBool;
    return std::nullopt;
}
std::optional<DType> dtype_from_onnx(int onnx_type) {
    for (const auto& i : kInfo)
        if (onnx_type == i.onnx) return i.dtype;
    return std::nullopt;
}

bool dtype_is_float(DType t) {
    return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 || t == DType::kBFloat16 ||
           dtype_is_lowp_float(t);
}
bool dtype_is_signed_int(DType t) {
    return t == DType::kInt8 || t == DType::kInt16 || t == DType::kInt32 || t == DType::kInt64 ||
           t == DType::kInt4;
}
bool dtype_is_unsigned_int(DType t) {
    return t == DType::kUInt8 || t == DType::kUInt16 || t == DType::kUInt32 || t == DType::kUInt64 ||
           t == DType::kUInt4;
}
bool dtype_is_lowp_float(DType t) {
    return t == DType::kFloat8E4M3FN || t == DType::kFloat8E4M3FNUZ || t == DType::kFloat8E5M2 ||
           t == DType::kFloat8E5M2FNUZ || t == DType::kFloat8E8M0 || t == DType::kFloat4E2M1;
}
bool dtype_is_int4(DType t) { return t == DType::kInt4 || t == DType::kUInt4; }

float half_to_float(uint16_t h) {
    uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {  // subnormal: normalize
            int e = -1;
            do { ++e; mant <<= 1; } while ((mant & 0x400u) == 0);
            bits = sign | ((127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

uint16_t float_to_half(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
    uint32_t mant = x & 0x7fffffu;
    if (((x >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
    if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
    if (exp <= 0) {
        if (exp < -10) return static_cast<uint16_t>(sign);
        mant |= 0x800000u;
        uint32_t shift = static_cast<uint32_t>(14 - exp);
        uint32_t half = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) ++half;
        return static_cast<uint16_t>(sign | half);
    }
    uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
    uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;
    return static_cast<uint16_t>(half);
}

float bfloat16_to_float(uint16_t b) {
    uint32_t bits = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

uint16_t float_to_bfloat16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // NaN stays NaN
    uint32_t rounding = 0x7fffu + ((x >> 16) & 1);
    return static_cast<uint16_t>((x + rounding) >> 16);
}

}  // namespace kiln
