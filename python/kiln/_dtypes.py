"""Kiln dtype names (support/dtype.h dtype_name) <-> ONNX Runtime's type strings."""

# Kiln name -> the element type inside ORT's "tensor(...)" strings.
ORT_ELEMENT = {
    "f32": "float", "f64": "double", "f16": "float16", "bf16": "bfloat16",
    "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "bool": "bool", "str": "string",
    "f8e4m3fn": "float8e4m3fn", "f8e4m3fnuz": "float8e4m3fnuz", "f8e5m2": "float8e5m2",
    "f8e5m2fnuz": "float8e5m2fnuz", "f8e8m0": "float8e8m0", "i4": "int4", "u4": "uint4",
    "f4e2m1": "float4e2m1",
}


def ort_type(kind, dtype):
    """ORT's NodeArg.type for a _kiln.TensorInfo kind and dtype: "tensor(float)",
    "seq(tensor(int64))", "optional(tensor(float))", "optional(seq(tensor(float)))"."""
    t = f"tensor({ORT_ELEMENT.get(dtype, dtype)})"
    if kind in ("sequence", "optional_sequence"):
        t = f"seq({t})"
    if kind.startswith("optional"):
        t = f"optional({t})"
    return t


# ONNX's TensorProto element types (OrtValue.element_type(), ORT's integer element types), by
# Kiln name, and numpy's dtype names for Kiln's dtypes (ml_dtypes' for the low-precision ones).
ONNX_ELEMENT_TYPE = {
    "f32": 1, "u8": 2, "i8": 3, "u16": 4, "i16": 5, "i32": 6, "i64": 7, "str": 8, "bool": 9, "f16": 10,
    "f64": 11, "u32": 12, "u64": 13, "bf16": 16, "f8e4m3fn": 17, "f8e4m3fnuz": 18, "f8e5m2": 19,
    "f8e5m2fnuz": 20, "u4": 21, "i4": 22, "f4e2m1": 23, "f8e8m0": 24,
}
NUMPY_NAME = {
    "f32": "float32", "f64": "float64", "f16": "float16", "i8": "int8", "i16": "int16", "i32": "int32",
    "i64": "int64", "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64", "bool": "bool",
    "str": "object", "bf16": "bfloat16", "f8e4m3fn": "float8_e4m3fn", "f8e4m3fnuz": "float8_e4m3fnuz",
    "f8e5m2": "float8_e5m2", "f8e5m2fnuz": "float8_e5m2fnuz", "f8e8m0": "float8_e8m0fnu", "i4": "int4",
    "u4": "uint4", "f4e2m1": "float4_e2m1fn",
}
_KILN_BY_NUMPY = {v: k for k, v in NUMPY_NAME.items()}
_KILN_BY_ONNX = {v: k for k, v in ONNX_ELEMENT_TYPE.items()}


def numpy_dtype(kiln_name):
    """The numpy dtype of a Kiln dtype name (ml_dtypes' for bf16, the float8 and 4-bit types)."""
    import numpy as np
    name = NUMPY_NAME[kiln_name]
    if hasattr(np, name) or name == "object":
        return np.dtype(name)
    import ml_dtypes  # the low-precision dtypes (docs/python.md)
    return np.dtype(getattr(ml_dtypes, name))


def kiln_name_of_numpy(dtype):
    """The Kiln dtype name of a numpy dtype (None when Kiln has none): str/bytes/object -> "str"."""
    import numpy as np
    dtype = np.dtype(dtype)
    if dtype.kind in "OUS":
        return "str"
    return _KILN_BY_NUMPY.get(dtype.name)


def kiln_name_of_element_type(element_type):
    """ORT's element types: a numpy type (np.float32) or an ONNX TensorProto integer."""
    if isinstance(element_type, int) and not isinstance(element_type, bool):
        return _KILN_BY_ONNX.get(element_type)
    return kiln_name_of_numpy(element_type)
