// Element types shared by every layer (the runtime included, which sees no IR).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

// keep-sorted by ONNX TensorProto.DataType value is NOT required; order here is ours.
enum class DType : uint8_t {
    kFloat32,
    kFloat64,
    kFloat16,
    kBFloat16,
    kInt8,
    kInt16,
    kInt32,
    kInt64,
    kUInt8,
    kUInt16,
    kUInt32,
    kUInt64,
    kBool,
    // Low-precision types (ONNX 1.15+). One byte per element inside Kiln; the 4-bit types are
    // packed two per byte only in ONNX TensorProtos (frontend) and test-onnx's .pb files.
    kFloat8E4M3FN,    // 1-4-3, bias 7, no inf, NaN = S.1111.111, max 448
    kFloat8E4M3FNUZ,  // 1-4-3, bias 8, no inf, no -0, NaN = 0x80, max 240
    kFloat8E5M2,      // 1-5-2, bias 15, IEEE-like (inf, NaN), max 57344
    kFloat8E5M2FNUZ,  // 1-5-2, bias 16, no inf, no -0, NaN = 0x80, max 57344
    kFloat8E8M0,      // unsigned power of two 2^(bits-127), NaN = 0xFF
    kInt4,            // stored sign-extended in an int8_t, range [-8, 7]
    kUInt4,           // stored in a uint8_t, range [0, 15]
    kFloat4E2M1,      // 1-2-1, bias 1, no inf/NaN, max 6; stored in the low 4 bits of a uint8_t
    // UTF-8 strings: a Tensor of them holds std::string objects. Only host kernels (op/host.h)
    // read them; the compiled path rejects them (no C type).
    kString,
};

/// Size of one element in bytes.
size_t dtype_size(DType t);
/// Short name used by the IR text form and the CLI: f32 f64 f16 bf16 i8 i16 i32 i64 u8 u16 u32 u64 bool
/// f8e4m3fn f8e4m3fnuz f8e5m2 f8e5m2fnuz f8e8m0 i4 u4 f4e2m1 str.
const char* dtype_name(DType t);
/// Inverse of dtype_name; nullopt for an unknown name.
std::optional<DType> dtype_from_name(std::string_view name);
/// C type used by generated code and by the interpreter's storage ("float", "int64_t", "uint16_t" for f16...).
const char* dtype_c_type(DType t);
/// numpy dtype descriptor ("<f4", "|b1", ...) for .npy files; "" for the low-precision types
/// (numpy has none: .npy files cannot hold them).
const char* dtype_numpy_descr(DType t);
std::optional<DType> dtype_from_numpy_descr(std::string_view descr);
/// ONNX TensorProto.DataType value <-> DType (nullopt where Kiln has no such type, e.g. complex64).
int dtype_to_onnx(DType t);
std::optional<DType> dtype_from_onnx(int onnx_type);

bool dtype_is_float(DType t);   // f32 f64 f16 bf16 and the low-precision float types
bool dtype_is_signed_int(DType t);    // i8 i16 i32 i64 i4
bool dtype_is_unsigned_int(DType t);  // u8 u16 u32 u64 u4
inline bool dtype_is_int(DType t) { return dtype_is_signed_int(t) || dtype_is_unsigned_int(t); }

/// IEEE half / bfloat16 conversions (round to nearest even).
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bfloat16_to_float(uint16_t b);
uint16_t float_to_bfloat16(float f);

// Low-precision types. Inside Kiln they compute in f32 (floats) or i8/u8 (i4/u4). A STORE of a
// computed value into such a buffer (kernel stores in C and in the tir interpreter, te constant
// folding, Tensor::set_f64) uses the *storage conversion*: float_to_lowp(t, x, /*saturate=*/false)
// (round to nearest even, overflow -> inf/NaN), float_to_e8m0(x, false, kUp), wrap_int4 /
// wrap_uint4. An op with saturating semantics (Cast's default saturate=1, QuantizeLinear) clamps
// its f32 value to [-lowp_max_finite(t), lowp_max_finite(t)] first (NaN passing through).

/// True for the 1-byte float types f8e4m3fn f8e4m3fnuz f8e5m2 f8e5m2fnuz f8e8m0 f4e2m1 (stored as
/// uint8_t bit patterns, computed in f32 like f16/bf16).
bool dtype_is_lowp_float(DType t);
/// True for i4 / u4 (one element per byte, computed as i8 / u8, wrapped to 4 bits on store).
bool dtype_is_int4(DType t);

/// Bit pattern (low 4 bits for f4e2m1) of a low-precision float type -> float. Exact.
float lowp_to_float(DType t, uint8_t bits);
/// float -> bit pattern of a f8 type or f4e2m1, round to nearest even (ONNX Cast-19+).
/// saturate=true (Cast's default): out-of-range values and +-inf clamp to +-max finite.
/// saturate=false: out of range -> inf (f8e5m2) or NaN (others), inf -> inf (e5m2) / NaN.
/// NaN -> NaN (sign kept where the type has signed NaNs); FNUZ types map -0 to +0.
/// f4e2m1 has no inf/NaN: it always saturates, and NaN gives the sign-flipped zero (what
/// ml_dtypes, hence the ONNX reference data, produces). Not for f8e8m0: see float_to_e8m0.
uint8_t float_to_lowp(DType t, float f, bool saturate = true);

/// Largest finite value of a low-precision float type (448, 240, 57344, 57344, 2^127, 6).
float lowp_max_finite(DType t);

/// Rounding of float -> f8e8m0 (Cast-24 attribute round_mode).
enum class E8M0Round : uint8_t { kUp, kDown, kNearest };
/// float -> f8e8m0 (the sign is ignored; the ONNX spec leaves negatives unspecified).
/// NaN -> 0xFF; inf -> 0xFE when saturating, else 0xFF; kUp rounds any fraction up, kNearest
/// rounds up from 1.5 * 2^e, kDown truncates; an increment past 0xFE gives 0xFE when saturating,
/// else 0xFF (NaN).
uint8_t float_to_e8m0(float f, bool saturate = true, E8M0Round mode = E8M0Round::kUp);

/// Wraps an integer to i4 / u4 (two's complement, like every narrowing int conversion).
inline int8_t wrap_int4(int64_t v) { return static_cast<int8_t>(static_cast<int8_t>((v & 0xf) << 4) >> 4); }
inline uint8_t wrap_uint4(int64_t v) { return static_cast<uint8_t>(v & 0xf); }

}  // namespace kiln
