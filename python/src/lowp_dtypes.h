// The low-precision dtypes (bf16, the float8 types, f8e8m0, i4, u4, f4e2m1) in and out of numpy.
// numpy has none of them; the ml_dtypes package (a dependency of onnx, which uses it for them)
// adds them as user-defined numpy dtypes. ml_dtypes is imported only when such a dtype is met.
//
// Storage: ml_dtypes keeps one element per byte (two for bfloat16), bit for bit as Kiln does
// (include/kiln/dtype.h), except int4: ml_dtypes keeps its low 4 bits (-1 is 0x0f), Kiln
// sign-extends it to an int8_t (-1 is 0xff). So every type but int4 is shared without a copy;
// int4 is converted in both directions.
#pragma once

#include <nanobind/nanobind.h>

#include <optional>
#include <string>

#include "kiln/session.h"

namespace kiln::python {

/// The Kiln dtype of numpy dtype `dtype` when it is one of ml_dtypes' low-precision types;
/// nullopt for any other dtype (numpy's own ones are never looked at by name).
std::optional<DType> lowp_dtype_of(nanobind::handle dtype);

/// `array` (of lowp_dtype_of's `dtype`) as its raw bits: a view of the same memory as uint8 or
/// uint16 (bfloat16), which nanobind's ndarray reads (numpy exports no buffer for ml_dtypes).
nanobind::object lowp_raw_view(nanobind::handle array, DType dtype);

/// Kiln's int4 storage (sign-extended bytes) of ml_dtypes int4 bits (low 4 bits per byte).
Tensor int4_from_ml_dtypes(const uint8_t* bits, Shape shape);

/// A tensor of a low-precision dtype as a numpy array of its ml_dtypes dtype: a view of the
/// tensor's storage (ndarray_over), of a converted copy for int4. `what` names it in errors.
nanobind::object lowp_tensor_to_numpy(Tensor t, const std::string& what);

}  // namespace kiln::python
