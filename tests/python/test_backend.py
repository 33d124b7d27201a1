"""kiln.backend's API (onnx.backend.base.Backend): prepare / run_model / run_node /
supports_device, with results checked against numpy."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import kiln.backend as backend


def gemm_relu_model():
    """Y = Relu(X @ W + B), X f32[N,3] (a symbolic batch)."""
    w = np.array([[0.5, -1.0], [2.0, 0.25], [-1.5, 1.0]], np.float32)
    b = np.array([0.1, -0.2], np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["X", "W", "B"], ["G"]), helper.make_node("Relu", ["G"], ["Y"])], "gemm_relu",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 2])],
        [onnx.numpy_helper.from_array(w, "W"), onnx.numpy_helper.from_array(b, "B")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), lambda x: np.maximum(x @ w + b, 0)


def test_supports_only_the_cpu():
    assert backend.supports_device("CPU")
    assert not backend.supports_device("CUDA")
    model, _ = gemm_relu_model()
    assert backend.is_compatible(model)
    with pytest.raises(RuntimeError, match="device 'CUDA' is not supported"):
        backend.prepare(model, "CUDA")


@pytest.mark.parametrize("form", ["proto", "bytes", "path"])
def test_run_model_from_each_form(form, tmp_path):
    model, ref = gemm_relu_model()
    if form == "bytes":
        model = model.SerializeToString()
    elif form == "path":
        onnx.save(model, tmp_path / "m.onnx")
        model = str(tmp_path / "m.onnx")
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    (y,) = backend.run_model(model, [x])
    np.testing.assert_allclose(y, ref(x), rtol=1e-5, atol=1e-6)


def test_prepared_model_runs_repeatedly_with_each_input_form():
    model, ref = gemm_relu_model()
    rep = backend.prepare(model, intra_op_num_threads=1, atol=1e-7)  # atol: the test runner's, ignored
    rng = np.random.default_rng(1)
    for n in (1, 5, 2):
        x = rng.standard_normal((n, 3)).astype(np.float32)
        for inputs in ([x], {"X": x}, x):
            out = rep.run(inputs)
            np.testing.assert_allclose(out[0], ref(x), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(out["Y"], ref(x), rtol=1e-5, atol=1e-6)


def test_bad_arguments():
    model, _ = gemm_relu_model()
    with pytest.raises(TypeError, match="unknown keyword argument 'threads'"):
        backend.prepare(model, threads=2)
    rep = backend.prepare(model)
    x = np.zeros((1, 3), np.float32)
    with pytest.raises(ValueError, match="2 inputs given, the model takes 1"):
        rep.run([x, x])
    with pytest.raises(Exception, match="input 'X'"):  # Kiln's own message: expected vs got
        rep.run([np.zeros((1, 4), np.float32)])


def test_run_node_elementwise_and_broadcast():
    a = np.random.default_rng(2).standard_normal((2, 3)).astype(np.float32)
    b = np.arange(3, dtype=np.float32)
    (c,) = backend.run_node(helper.make_node("Add", ["a", "b"], ["c"]), [a, b])
    np.testing.assert_allclose(c, a + b, rtol=1e-6)
    (m,) = backend.run_node(helper.make_node("MatMul", ["a", "bt"], ["m"]), [a, a.T.copy()])
    np.testing.assert_allclose(m, a @ a.T, rtol=1e-5, atol=1e-6)


def test_run_node_attributes_integers_and_outputs_by_name():
    x = np.array([[3, 1, 2], [9, 7, 8]], np.int64)
    out = backend.run_node(helper.make_node("ArgMax", ["x"], ["i"], axis=1, keepdims=0), [x])
    np.testing.assert_array_equal(out["i"], np.argmax(x, axis=1))
    assert out["i"].dtype == np.int64
    values, indices = backend.run_node(helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1),
                                       [x, np.array([2], np.int64)])
    np.testing.assert_array_equal(values, -np.sort(-x, axis=1)[:, :2])
    np.testing.assert_array_equal(indices, np.argsort(-x, axis=1, kind="stable")[:, :2])


def test_run_node_omitted_optional_input():
    x = np.array([-3.0, 0.5, 4.0], np.float32)
    (y,) = backend.run_node(helper.make_node("Clip", ["x", "lo", "hi"], ["y"]), [x, None, np.float32(1.0)])
    np.testing.assert_array_equal(y, np.minimum(x, 1.0))
    (y,) = backend.run_node(helper.make_node("Clip", ["x", "", "hi"], ["y"]), [x, np.float32(1.0)])
    np.testing.assert_array_equal(y, np.minimum(x, 1.0))


def test_run_node_sequence_input():
    seq = [np.ones((2,), np.float32), np.zeros((3,), np.float32), np.ones((1,), np.float32)]
    (n,) = backend.run_node(helper.make_node("SequenceLength", ["s"], ["n"]), [seq])
    assert int(n) == 3


def test_run_node_with_outputs_info_and_opset():
    x = np.array([[1.0, -2.0], [3.0, 4.0]], np.float32)
    (y,) = backend.run_node(helper.make_node("Abs", ["x"], ["y"]), [x], outputs_info=[(np.float32, (2, 2))],
                            opset_version=13)
    np.testing.assert_array_equal(y, np.abs(x))


def test_run_node_input_count_mismatch():
    with pytest.raises(ValueError, match="has 2 inputs \\(a, b\\), 1 given"):
        backend.run_node(helper.make_node("Add", ["a", "b"], ["c"]), [np.zeros(2, np.float32)])
