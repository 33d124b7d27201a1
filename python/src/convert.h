// numpy <-> kiln values. Inputs: a C-contiguous numeric array is borrowed (Tensor::borrow, no
// copy; the caller keeps the array alive for the run), ml_dtypes' low-precision ones included
// (lowp_dtypes.h; int4 is copied); a str/bytes/object array becomes a
// kString tensor (copied: Kiln holds std::string objects); a list is a sequence; None is an
// empty optional. Outputs: a numeric tensor becomes an ndarray over the tensor's own storage,
// kept alive by a capsule that owns the Tensor (copied only when the storage is shared).
#pragma once

#include <nanobind/nanobind.h>

#include <string>

#include "kiln/session.h"

namespace kiln::python {

/// The value fed for input `info` (its element dtype types an empty sequence).
Datum datum_from_python(nanobind::handle value, const TensorInfo& info);
/// A tensor from a numpy array; `what` names it in errors ("input 'x'").
Tensor tensor_from_numpy(nanobind::handle array, const std::string& what);
/// A tensor over a writable, C-contiguous numpy array's own memory, for a run to write an output
/// into (RunOptions::outputs_into); `what` names it in errors ("output 'y'").
Tensor tensor_into_numpy(nanobind::handle array, const std::string& what);

/// A run's output as ONNX Runtime returns it: ndarray, list of ndarrays, or None.
nanobind::object datum_to_python(Datum value, const std::string& what);
nanobind::object tensor_to_numpy(Tensor tensor, const std::string& what);
/// The tensor's storage as an ndarray of numpy dtype `as` (a dtype numpy has, of the tensor's
/// element size): zero copy when the tensor alone owns its storage, else over a copy.
nanobind::object ndarray_over(Tensor tensor, DType as);

}  // namespace kiln::python
