"""The low-precision dtypes through the Python package: numpy arrays of ml_dtypes' bfloat16,
float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, e8m0fnu), int4, uint4 and float4_e2m1fn in and out of
kiln.InferenceSession (a Cast to the same type: bit-exact round trip; Cast to and from float:
Kiln's conversions against ml_dtypes'), zero-size arrays, and bad dtypes raising instead of
aborting. (Cast, not Identity: Kiln's Identity takes numeric types only, like its other ops
but Cast and the quantize ops.)"""
import subprocess
import sys

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import kiln

# (ONNX type, ml_dtypes dtype, float32 values exactly representable in it, opset that has it)
LOWP = [
    (TensorProto.BFLOAT16, ml_dtypes.bfloat16,
     [0.0, -0.0, 1.5, -2.25, 3.0e38, 9.18e-41, np.inf, -np.inf, np.nan, 1024.0], 21),
    (TensorProto.FLOAT8E4M3FN, ml_dtypes.float8_e4m3fn, [0.0, -0.0, 0.5, -1.75, 448.0, -448.0, 2.0**-9, np.nan], 21),
    (TensorProto.FLOAT8E4M3FNUZ, ml_dtypes.float8_e4m3fnuz, [0.0, 0.5, -1.75, 240.0, -240.0, 2.0**-10, np.nan], 21),
    (TensorProto.FLOAT8E5M2, ml_dtypes.float8_e5m2, [0.0, -0.0, 0.75, -3.0, 57344.0, 2.0**-16, np.inf, -np.inf,
                                                     np.nan], 21),
    (TensorProto.FLOAT8E5M2FNUZ, ml_dtypes.float8_e5m2fnuz, [0.0, 0.75, -3.0, 57344.0, -57344.0, 2.0**-17, np.nan],
     21),
    (TensorProto.FLOAT8E8M0, ml_dtypes.float8_e8m0fnu, [2.0**-126, 0.25, 1.0, 2.0, 2.0**127, np.nan], 24),
    (TensorProto.INT4, ml_dtypes.int4, [-8, -5, -1, 0, 1, 6, 7], 21),
    (TensorProto.UINT4, ml_dtypes.uint4, [0, 1, 7, 8, 9, 15], 21),
    (TensorProto.FLOAT4E2M1, ml_dtypes.float4_e2m1fn, [0.0, -0.0, 0.5, -1.0, 1.5, -2.0, 3.0, -4.0, 6.0, -6.0], 23),
]
IDS = [np.dtype(t[1]).name for t in LOWP]


def same_type_cast(onnx_type):
    """Cast's attributes for a bit-exact cast of a type to itself: no saturation (Cast-19+ would
    clamp e5m2's infinities). (e8m0's values avoid 2^-127: Cast rounds that float32 subnormal up
    to 2^-126, as ONNX's reference does, and Kiln has only round_mode 'up'.)"""
    attrs = {"to": onnx_type}
    if onnx_type in (TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FNUZ, TensorProto.FLOAT8E5M2,
                     TensorProto.FLOAT8E5M2FNUZ, TensorProto.FLOAT8E8M0):
        attrs["saturate"] = 0
    return attrs


def one_node_session(op, in_type, out_type, shape, opset, **attrs):
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    graph = helper.make_graph([node], op.lower(), [helper.make_tensor_value_info("x", in_type, shape)],
                              [helper.make_tensor_value_info("y", out_type, shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return kiln.InferenceSession(model.SerializeToString())


def bits(a):
    """The array's raw storage, for bit-exact comparison (NaN == NaN, -0 != +0)."""
    return np.ascontiguousarray(a).view(np.uint16 if a.dtype.itemsize == 2 else np.uint8)


@pytest.mark.parametrize("onnx_type,dtype,values,opset", LOWP, ids=IDS)
def test_round_trip(onnx_type, dtype, values, opset):
    x = np.array(values, np.float32).astype(dtype)
    for xs in [x, x.reshape(1, len(values), 1), x[2:3].reshape(())]:
        sess = one_node_session("Cast", onnx_type, onnx_type, [f"d{i}" for i in range(xs.ndim)], opset, **same_type_cast(onnx_type))
        (y,) = sess.run(None, {"x": xs})
        assert y.dtype == np.dtype(dtype) and y.shape == xs.shape
        np.testing.assert_array_equal(bits(y), bits(xs))
    # A strided view (InferenceSession copies it to contiguous first) and a zero-size array.
    sess = one_node_session("Cast", onnx_type, onnx_type, ["n"], opset, **same_type_cast(onnx_type))
    strided = np.concatenate([x, x])[::2]
    np.testing.assert_array_equal(bits(sess.run(None, {"x": strided})[0]), bits(strided))
    sess = one_node_session("Cast", onnx_type, onnx_type, ["a", "b", "c"], opset, **same_type_cast(onnx_type))
    (empty,) = sess.run(None, {"x": np.zeros((2, 0, 4), dtype)})
    assert empty.dtype == np.dtype(dtype) and empty.shape == (2, 0, 4)


@pytest.mark.parametrize("onnx_type,dtype,values,opset", LOWP, ids=IDS)
def test_cast_to_float(onnx_type, dtype, values, opset):
    """Kiln reads the bits as ml_dtypes means them: Cast(to=float) of every bit pattern of the
    type vs ml_dtypes' own widening."""
    size = np.dtype(dtype).itemsize
    patterns = 16 if np.dtype(dtype).name in ("int4", "uint4", "float4_e2m1fn") else 1 << (8 * size)
    x = np.arange(patterns, dtype=np.uint16 if size == 2 else np.uint8).view(dtype)
    sess = one_node_session("Cast", onnx_type, TensorProto.FLOAT, ["n"], opset, to=TensorProto.FLOAT)
    (y,) = sess.run(None, {"x": x})
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, x.astype(np.float32))  # NaN == NaN here


@pytest.mark.parametrize("onnx_type,dtype,values,opset", LOWP, ids=IDS)
def test_cast_from_float(onnx_type, dtype, values, opset):
    """Kiln writes bits ml_dtypes reads back: Cast(to=T) of the values and of in-range values that
    need rounding (nearest even, as ml_dtypes rounds) vs ml_dtypes' own narrowing."""
    rng = np.random.default_rng(5)
    exact = np.array(values, np.float32)
    # Infinities saturate (Cast's saturate=1) where ml_dtypes keeps them: left out here.
    exact = exact[~np.isinf(exact)]
    if dtype is ml_dtypes.float8_e8m0fnu or np.issubdtype(np.dtype(dtype), np.integer):
        x = exact  # e8m0's Cast rounds up (round_mode), ml_dtypes to nearest; int4/uint4 take integers
    else:
        limit = min(np.nanmax(np.abs(exact)), 1e4)
        x = np.concatenate([exact, rng.uniform(-limit, limit, 64).astype(np.float32)])
    sess = one_node_session("Cast", TensorProto.FLOAT, onnx_type, [len(x)], opset, to=onnx_type)
    (y,) = sess.run(None, {"x": x})
    assert y.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(bits(y), bits(x.astype(dtype)))


def test_lowp_output_of_a_float_input_model():
    """A bf16 output computed by Kiln (not an input handed back): Cast then Add in bf16."""
    x = np.linspace(-4, 4, 9, dtype=np.float32)
    nodes = [helper.make_node("Cast", ["x"], ["h"], to=TensorProto.BFLOAT16), helper.make_node("Add", ["h", "h"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [9])],
                              [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [9])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    (y,) = kiln.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    assert y.dtype == np.dtype(ml_dtypes.bfloat16)
    expected = (x.astype(ml_dtypes.bfloat16).astype(np.float32) * 2).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(bits(y), bits(expected))


def test_zero_size_inputs():
    for shape in [(2, 0, 4), (0,), (0, 3)]:
        sess = one_node_session("Identity", TensorProto.FLOAT, TensorProto.FLOAT, [f"d{i}" for i in range(len(shape))], 21)
        (y,) = sess.run(None, {"x": np.zeros(shape, np.float32)})
        assert y.shape == shape and y.dtype == np.float32
    # A zero-size slice of a bigger array (numpy's strides there are meaningless).
    (y,) = sess.run(None, {"x": np.zeros((4, 6), np.float32)[:, 2:2]})
    assert y.shape == (4, 0)


@pytest.mark.parametrize("value", [np.zeros(3, np.complex64), np.zeros(3, [("a", "f4")]), np.zeros(3, "M8[s]"),
                                   np.zeros(3, ml_dtypes.bfloat16), np.zeros(3, ml_dtypes.int4)],
                         ids=["complex64", "structured", "datetime64", "bfloat16", "int4"])
def test_bad_dtypes_raise(value):
    """A dtype Kiln has not, or not the model's, raises InvalidArgument naming the input. (A
    kiln::Error raised while its message was being built used to abort the process.)"""
    sess = one_node_session("Identity", TensorProto.FLOAT, TensorProto.FLOAT, [3], 21)
    with pytest.raises(kiln.InvalidArgument, match=r"input 'x': (numpy dtype .* has no Kiln dtype|expected dtype f32)"):
        sess.run(None, {"x": value})


def test_ml_dtypes_imported_only_when_met(tmp_path):
    """kiln imports ml_dtypes at the first low-precision value, not before (a fresh process: onnx
    itself imports it)."""
    def save(name, out_type):
        node = helper.make_node("Cast", ["x"], ["y"], to=out_type)
        graph = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                                  [helper.make_tensor_value_info("y", out_type, [3])])
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), str(tmp_path / name))
        return str(tmp_path / name)

    f32, bf16 = save("f32.onnx", TensorProto.FLOAT), save("bf16.onnx", TensorProto.BFLOAT16)
    script = f"""if True:
        import sys
        import numpy as np
        import kiln
        x = {{"x": np.array([1.0, 2.5, -3.0], np.float32)}}
        assert kiln.InferenceSession({f32!r}).run(None, x)[0].tolist() == [1.0, 2.5, -3.0]
        assert "ml_dtypes" not in sys.modules, "imported for a float32 model"
        y = kiln.InferenceSession({bf16!r}).run(None, x)[0]
        assert "ml_dtypes" in sys.modules and y.dtype.name == "bfloat16", y.dtype
        print(y.astype(np.float32).tolist())
    """
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[1.0, 2.5, -3.0]"
