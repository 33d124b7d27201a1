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
};

/// Size of one element in bytes.
size_t dtype_size(DType t);
/// Short name used by the IR text form and the CLI: f32 f64 f16 bf16 i8 i16 i32 i64 u8 u16 u32 u64 bool.
const char* dtype_name(DType t);
/// Inverse of dtype_name; nullopt for an unknown name.
std::optional<DType> dtype_from_name(std::string_view name);
/// C type used by generated code and by the interpreter's storage ("float", "int64_t", "uint16_t" for f16...).
const char* dtype_c_type(DType t);
/// numpy dtype descriptor ("<f4", "|b1", ...) for .npy files.
const char* dtype_numpy_descr(DType t);
std::optional<DType> dtype_from_numpy_descr(std::string_view descr);
/// ONNX TensorProto.DataType value <-> DType (nullopt where Kiln has no such type, e.g. string).
int dtype_to_onnx(DType t);
std::optional<DType> dtype_from_onnx(int onnx_type);

bool dtype_is_float(DType t);   // f32 f64 f16 bf16
bool dtype_is_signed_int(DType t);
bool dtype_is_unsigned_int(DType t);
inline bool dtype_is_int(DType t) { return dtype_is_signed_int(t) || dtype_is_unsigned_int(t); }

/// IEEE half / bfloat16 conversions (round to nearest even).
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bfloat16_to_float(uint16_t b);
uint16_t float_to_bfloat16(float f);

}  // namespace kiln
