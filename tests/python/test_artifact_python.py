"""A compiled `.kiln` artifact (`python -m kiln compile`) through kiln.InferenceSession: from a
path and from bytes, results against ONNX Runtime on the ONNX model it came from, ORT's
ModelMetadata from the fields the artifact copied, and clear errors for bad artifact bytes."""
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime
import pytest

import kiln

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIGITS = os.path.join(REPO, "models", "digits", "digits_cnn.onnx")


@pytest.fixture(scope="module")
def digits_artifact(tmp_path_factory):
    out = tmp_path_factory.mktemp("artifact") / "digits.kiln"
    proc = subprocess.run([sys.executable, "-m", "kiln", "compile", DIGITS, "-o", str(out), "--dim", "N=4"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return str(out)


def digits_input(seed=0):
    return np.random.default_rng(seed).random((4, 1, 8, 8), dtype=np.float32) * 16


@pytest.mark.parametrize("source", ["path", "bytes"])
def test_artifact_matches_onnxruntime(digits_artifact, source):
    model = digits_artifact if source == "path" else open(digits_artifact, "rb").read()
    sess = kiln.InferenceSession(model)
    ref = onnxruntime.InferenceSession(DIGITS, providers=["CPUExecutionProvider"])
    assert [i.name for i in sess.get_inputs()] == [i.name for i in ref.get_inputs()]
    assert sess.get_inputs()[0].shape == [4, 1, 8, 8]  # static: compiled for N=4
    assert [o.name for o in sess.get_outputs()] == [o.name for o in ref.get_outputs()]
    for seed in range(3):
        x = digits_input(seed)
        got = sess.run(None, {"image": x})
        want = ref.run(None, {"image": x})
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_artifact_modelmeta_is_the_onnx_models(digits_artifact):
    m = onnx.load(DIGITS)
    meta = kiln.InferenceSession(digits_artifact).get_modelmeta()
    assert meta.producer_name == m.producer_name
    assert meta.graph_name == m.graph.name
    assert meta.version == m.model_version
    assert meta.custom_metadata_map == {p.key: p.value for p in m.metadata_props}


def test_artifact_wrong_shape_names_the_input(digits_artifact):
    sess = kiln.InferenceSession(digits_artifact)
    with pytest.raises(kiln.InvalidArgument, match="image"):
        sess.run(None, {"image": np.zeros((3, 1, 8, 8), np.float32)})


def test_truncated_artifact_is_invalid_model(digits_artifact):
    data = open(digits_artifact, "rb").read()
    for cut in (len(data) // 2, 100, 9):
        with pytest.raises(kiln.InvalidModel):
            kiln.InferenceSession(data[:cut])


def test_artifact_iobinding_writes_the_bound_buffer(digits_artifact):
    """An artifact session writes a bound output in place too (the artifact's shapes are fixed)."""
    sess = kiln.InferenceSession(digits_artifact)
    ref = onnxruntime.InferenceSession(DIGITS, providers=["CPUExecutionProvider"])
    x = digits_input(5)
    name = sess.get_outputs()[0].name
    expected = ref.run([name], {ref.get_inputs()[0].name: x})[0]
    io = sess.io_binding()
    io.bind_cpu_input(sess.get_inputs()[0].name, x)
    buf = np.full(expected.shape, np.nan, expected.dtype)
    io.bind_output(name, "cpu", 0, buf.dtype.type, buf.shape, buf.ctypes.data)
    sess.run_with_iobinding(io)
    assert io.get_outputs()[0].data_ptr() == buf.ctypes.data
    np.testing.assert_allclose(buf, expected, rtol=1e-4, atol=1e-5)


def _symbolic_mlp(path):
    """x[batch, 16] -> MatMul -> Relu -> Softmax, batch symbolic."""
    rng = np.random.default_rng(2)
    w = onnx.numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "w")
    nodes = [onnx.helper.make_node("MatMul", ["x", "w"], ["h"]), onnx.helper.make_node("Relu", ["h"], ["r"]),
             onnx.helper.make_node("Softmax", ["r"], ["y"], axis=-1)]
    graph = onnx.helper.make_graph(nodes, "sym_mlp",
                                   [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 16])],
                                   [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 8])],
                                   initializer=[w])
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]), path)


def test_symbolic_artifact_serves_every_batch(tmp_path):
    """`python -m kiln compile` without --dim: one artifact whose input shape names the dim,
    run at three batch sizes against ONNX Runtime."""
    model, out = str(tmp_path / "sym.onnx"), str(tmp_path / "sym.kiln")
    _symbolic_mlp(model)
    proc = subprocess.run([sys.executable, "-m", "kiln", "compile", model, "-o", out], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    sess = kiln.InferenceSession(out)
    assert sess.get_inputs()[0].shape == ["batch", 16]
    ref = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    for batch in (1, 5, 32):
        x = np.random.default_rng(batch).standard_normal((batch, 16)).astype(np.float32)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], ref.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)
    with pytest.raises(kiln.InvalidArgument, match="x"):
        sess.run(None, {"x": np.zeros((2, 15), np.float32)})
