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
