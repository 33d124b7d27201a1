"""Pow with a constant exponent of 2 or 3 computes by products, 0.5 by sqrt, -1 and -0.5 by a
division (op/defs/elementwise.cc pow_by_constant): the written-out LayerNorm and RMSNorm of
opset-14 exports and GELU-tanh's x^3 had run a powf per element (15-22x ONNX Runtime's time,
bench/cliffs_ops.py). The reference is numpy in float64: x^2, x^0.5 and x^-1 are correctly
rounded, x^3 and x^-0.5 within two roundings; special values (zeros of both signs, infinities,
NaN, negative bases, overflow) as C's pow gives them. Other exponents keep powf."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln


def _pow_model(path, exponent, shape):
    e = numpy_helper.from_array(np.asarray(exponent, np.float32), "e")
    g = helper.make_graph([helper.make_node("Pow", ["x", "e"], ["y"])], "pow",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], [e])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), path)


def _inputs(n):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(n) * 10).astype(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e20, -1e20, 1e-20, -3.0], np.float32)
    x[: len(special)] = special
    return x


@pytest.mark.parametrize("exponent", [2.0, 3.0, [2.0, 2.0, 2.0], 2.5, [2.0, 3.0, 2.0], 0.5, -1.0, -0.5,
                                      [0.5, 0.5, 0.5], [0.5, -0.5, 0.5]])
def test_pow_matches_numpy(tmp_path, exponent):
    x = _inputs(3 * 1000).reshape(1000, 3)
    path = str(tmp_path / "pow.onnx")
    _pow_model(path, exponent, [1000, 3])
    got = kiln.InferenceSession(path).run(None, {"x": x})[0]
    with np.errstate(all="ignore"):
        # An exponent array as wide as x: numpy's scalar 0.5 takes sqrt (NaN at -inf, -0 at -0),
        # an array exponent C's pow (+inf, +0: ONNX Runtime's answer too).
        x64 = x.astype(np.float64)
        e64 = np.ascontiguousarray(np.broadcast_to(np.asarray(exponent, np.float64), x64.shape))
        want = np.power(x64, e64).astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)]))
    np.testing.assert_allclose(got, want, rtol=3e-7, atol=0)


def test_written_out_rms_norm_matches_numpy(tmp_path):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 16, 384)).astype(np.float32)
    w = rng.random(384).astype(np.float32)
    inits = [numpy_helper.from_array(np.float32(2.0), "two"), numpy_helper.from_array(np.float32(1e-6), "eps"),
             numpy_helper.from_array(w, "w")]
    nodes = [helper.make_node("Pow", ["x", "two"], ["p"]), helper.make_node("ReduceMean", ["p"], ["m"], axes=[-1]),
             helper.make_node("Add", ["m", "eps"], ["a"]), helper.make_node("Sqrt", ["a"], ["s"]),
             helper.make_node("Div", ["x", "s"], ["d"]), helper.make_node("Mul", ["d", "w"], ["y"])]
    g = helper.make_graph(nodes, "rms", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, x.shape)], inits)
    path = str(tmp_path / "rms.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), path)
    got = kiln.InferenceSession(path).run(None, {"x": x})[0]
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
