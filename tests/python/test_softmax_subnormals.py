"""Softmax of masked scores flushes what would be subnormal to zero (op/defs/flush_subnormal.h):
a shifted-window or causal mask (-100, the float minimum) gives probabilities near e^-100, and
every product that reads a subnormal runs an order of magnitude slower on x86. The reference is
numpy in float64: every probability that is a normal float32 matches it, the rest are exactly 0
(where numpy's are below float32's smallest normal), and a row of -inf stays NaN as in ONNX
Runtime."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import kiln

TINY = np.finfo(np.float32).tiny


def _softmax_model(path, shape, axis=-1, then_matmul=False):
    nodes = [helper.make_node("Softmax", ["x"], ["p"], axis=axis)]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)]
    out = "p"
    if then_matmul:  # attention's probs x V
        inputs.append(helper.make_tensor_value_info("v", TensorProto.FLOAT, [shape[0], shape[-1], 8]))
        nodes.append(helper.make_node("MatMul", ["p", "v"], ["y"]))
        out = "y"
    y_shape = shape if not then_matmul else [shape[0], shape[1], 8]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info(out, TensorProto.FLOAT, y_shape)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def _reference(x, axis):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("axis, shape", [(-1, [4, 49, 49]), (-1, [2, 7, 3000]), (1, [3, 64, 5])])
@pytest.mark.parametrize("mask", [-100.0, -88.0, float(np.finfo(np.float32).min)])
def test_masked_softmax_has_no_subnormals(tmp_path, axis, shape, mask):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32) * 3
    x[rng.random(shape) < 0.5] += np.float32(mask)  # half the scores masked
    path = str(tmp_path / "softmax.onnx")
    _softmax_model(path, shape, axis)
    got = kiln.InferenceSession(path).run(None, {"x": x})[0]
    want = _reference(x, axis)
    assert not np.any((got > 0) & (got < TINY)), "a subnormal probability"
    normal = want >= 2 * TINY  # at most one rounding away from a normal float32
    # x - max is rounded in float32: near |x - max| = 90 that is 4e-6 of e^(x - max).
    np.testing.assert_allclose(got[normal], want[normal], rtol=1e-5, atol=0)
    assert np.all(got[want < TINY / 2] == 0)
    assert np.all(got[~normal] <= 2 * TINY)


def test_probabilities_times_values_match_numpy_with_a_mask(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 49, 49)).astype(np.float32)
    x[:, :, 25:] -= 100  # Swin's shifted-window mask
    v = rng.standard_normal((6, 49, 8)).astype(np.float32)
    path = str(tmp_path / "attention.onnx")
    _softmax_model(path, [6, 49, 49], then_matmul=True)
    got = kiln.InferenceSession(path).run(None, {"x": x, "v": v})[0]
    np.testing.assert_allclose(got, _reference(x, -1) @ v.astype(np.float64), rtol=1e-5, atol=1e-6)


def test_a_row_of_minus_infinity_stays_nan(tmp_path):
    x = np.zeros((2, 5), np.float32)
    x[1, :] = -np.inf
    x[0, 3] = -np.inf
    path = str(tmp_path / "softmax.onnx")
    _softmax_model(path, [2, 5])
    got = kiln.InferenceSession(path).run(None, {"x": x})[0]
    np.testing.assert_allclose(got[0], [0.25, 0.25, 0.25, 0, 0.25], rtol=1e-6)
    assert np.all(np.isnan(got[1]))
