"""kiln.quantization.quantize_static: ONNX Runtime's API shape over `kiln quantize`.

The same script quantizes with onnxruntime.quantization or kiln.quantization (one import): both
write a QDQ model that ONNX Runtime runs; Kiln's file equals the one the CLI writes from the same
batches; unsupported options and bad batches raise kiln's exceptions naming the problem.
"""
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "models"))

from test_int8_vs_ort import _small_net  # noqa: E402

kq = pytest.importorskip("kiln.quantization")


def _batches(n=4):
    rng = np.random.default_rng(5)
    return [{"x": rng.standard_normal((1, 3, 24, 24)).astype(np.float32)} for _ in range(n)]


def _reader(mod, batches):
    class Reader(mod.CalibrationDataReader):
        def __init__(self):
            self.it = iter(batches)

        def get_next(self):
            return next(self.it, None)

    return Reader()


def _inits(path):
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}


@pytest.fixture()
def f32(tmp_path):
    path = str(tmp_path / "f32.onnx")
    _small_net(path, 1)
    return path


@pytest.mark.parametrize("modname", ["onnxruntime.quantization", "kiln.quantization"])
def test_one_script_both_quantizers(tmp_path, f32, modname):
    mod = pytest.importorskip(modname)
    out = str(tmp_path / "q.onnx")
    mod.quantize_static(f32, out, _reader(mod, _batches()), quant_format=mod.QuantFormat.QDQ, per_channel=True,
                        activation_type=mod.QuantType.QUInt8, weight_type=mod.QuantType.QInt8,
                        calibrate_method=mod.CalibrationMethod.MinMax)
    import onnxruntime as ort
    x = _batches(1)[0]
    q = ort.InferenceSession(out).run(None, x)[0]
    ref = ort.InferenceSession(f32).run(None, x)[0]
    assert np.linalg.norm(q - ref) / np.linalg.norm(ref) < 0.1


def test_python_equals_cli(tmp_path, f32):
    batches = _batches()
    py_out, cli_out = str(tmp_path / "py.onnx"), str(tmp_path / "cli.onnx")
    report = kq.quantize_static(f32, py_out, _reader(kq, batches), per_channel=True,
                                activation_type=kq.QuantType.QUInt8)
    np.savez(tmp_path / "calib.npz", x=np.stack([b["x"] for b in batches]))
    proc = subprocess.run([kq._cli(), "quantize", f32, "-o", cli_out, "--calibration", str(tmp_path / "calib.npz")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    a, b = _inits(py_out), _inits(cli_out)
    assert sorted(a) == sorted(b)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    assert [n.op_type for n in onnx.load(py_out).graph.node] == [n.op_type for n in onnx.load(cli_out).graph.node]
    assert {l["tensor"] for l in report["layers"]} >= {"x", "p", "y"}


def test_defaults_are_ort_defaults(tmp_path, f32):
    out = str(tmp_path / "q.onnx")
    kq.quantize_static(f32, out, _reader(kq, _batches()))  # ORT: per-tensor weights, int8 activations
    inits = _inits(out)
    assert inits["x_zero_point"].dtype == np.int8
    assert inits["c1_w_scale"].shape == ()


def test_errors(tmp_path, f32):
    import kiln
    bad = [{"x": np.zeros((1, 3, 20, 20), np.float32)}]
    with pytest.raises(kiln.InvalidArgument, match=r"input 'x': expected shape \[1,3,24,24\].*got \[1,3,20,20\]"):
        kq.quantize_static(f32, str(tmp_path / "q.onnx"), _reader(kq, bad))
    with pytest.raises(kiln.InvalidArgument, match="no batch"):
        kq.quantize_static(f32, str(tmp_path / "q.onnx"), _reader(kq, []))
    with pytest.raises(kiln.NotImplemented, match="QOperator"):
        kq.quantize_static(f32, str(tmp_path / "q.onnx"), _reader(kq, _batches()),
                           quant_format=kq.QuantFormat.QOperator)


def test_quantize_dynamic_equals_ort(tmp_path):
    """Per-tensor dynamic quantization writes the same int8 weights as ORT's quantize_dynamic: the
    two files compute the same outputs in ORT; fp32 stays close."""
    import small_models
    from onnxruntime.quantization import quantize_dynamic as ort_quantize_dynamic
    import onnxruntime as ort
    model, _ = small_models.mlp(np.random.default_rng(7))
    f32, mine, theirs = (str(tmp_path / n) for n in ("mlp.onnx", "kiln.onnx", "ort.onnx"))
    onnx.save(model, f32)
    assert kq.quantize_dynamic(f32, mine) == 2
    ort_quantize_dynamic(f32, theirs)
    ops = [n.op_type for n in onnx.load(mine).graph.node]
    assert ops.count("MatMulInteger") == 2 and "MatMul" not in ops, ops
    x = {"x": np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)}
    a, b, f = (ort.InferenceSession(p).run(None, x)[0] for p in (mine, theirs, f32))
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
    assert np.abs(a - f).max() < 0.05 * np.abs(f).max()
