"""`kiln quantize` (docs/quantization.md) against independent references.

- A small conv net (stem, max pool, two residual blocks) quantized by Kiln: ONNX Runtime loads
  and runs the QDQ file, Kiln runs it with its int8 kernels, and the two agree within one
  quantization step of the output.
- The scales and zero points Kiln chose equal those ONNX Runtime's own quantize_static chooses
  from the same calibration data (same MinMax rule, ranges from ORT's fp32 run), and the weights
  and biases equal a numpy computation of ORT's rule (int8 symmetric per channel; int32 bias at
  x_scale * w_scale).
- --method percentile: the chosen range of the input is numpy's percentile of the calibration
  values (inverted CDF: an order statistic), widened by at most one histogram bin.
- The digits CNN (models/digits) quantized on its training images: int8 accuracy on the 360
  held-out images within 0.5 points of fp32 (fp32 run by ONNX Runtime).
- Bad calibration data is a clear error naming the input, expected vs got.
"""
import json
import os

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from kiln_helpers import REPO, kiln_has_dnnl, kiln_run_model, ort_outputs, run_kiln
from test_int8_vs_ort import _small_net

DIGITS = os.path.join(REPO, "models", "digits")


def _quantize(tmp_path, f32, calib, *extra):
    out, report = str(tmp_path / "q.onnx"), str(tmp_path / "report.json")
    proc = run_kiln(["quantize", f32, "-o", out, "--calibration", calib, "--report", report] + list(extra))
    assert proc.returncode == 0, proc.stderr
    with open(report) as f:
        return out, json.load(f)


def _net(tmp_path, batches=8):
    f32 = str(tmp_path / "f32.onnx")
    _small_net(f32, 1)
    x = np.random.default_rng(3).standard_normal((batches, 1, 3, 24, 24)).astype(np.float32)
    np.savez(tmp_path / "calib.npz", x=x)
    return f32, str(tmp_path / "calib.npz"), x


def _inits(path):
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}


@pytest.mark.parametrize("extra,relus_dropped", [
    ([], True),
    (["--activation-type", "int8"], True),  # zero point -128 where the range starts at 0
    (["--activation-type", "int8", "--symmetric-activations"], False),  # zero point 0: Relu kept (Max)
    (["--per-tensor"], True),
])
def test_quantized_net_runs_in_ort_and_kiln_agrees(tmp_path, extra, relus_dropped):
    f32, calib, _ = _net(tmp_path)
    q, report = _quantize(tmp_path, f32, calib, *extra)
    ops = [n.op_type for n in onnx.load(q).graph.node]
    assert ops.count("QuantizeLinear") >= 6 and ("Relu" not in ops) == relus_dropped, ops
    feed = {"x": np.random.default_rng(9).standard_normal((1, 3, 24, 24)).astype(np.float32)}
    np.savez(tmp_path / "in.npz", **feed)
    ref = ort_outputs(q, feed)["y"]
    outs, _ = kiln_run_model(q, str(tmp_path / "in.npz"), str(tmp_path / "out"))
    scale = _inits(q)["y_scale"]
    steps = np.abs(outs["y"].astype(np.float64) - ref) / scale
    assert steps.max() <= 1.0 + 1e-3, f"Kiln vs ORT on Kiln's QDQ model: {steps.max()} steps"
    f32_out = ort_outputs(f32, feed)["y"]
    rel = np.linalg.norm(ref - f32_out) / np.linalg.norm(f32_out)
    assert rel < 0.1, f"int8 vs fp32 relative L2 {rel}"
    assert all(l["sqnr_db"] is None or l["sqnr_db"] > 20 for l in report["layers"]), report["layers"]
    if kiln_has_dnnl():
        kernels = run_kiln(["inspect", q, "--kernels"]).stdout
        assert kernels.count("[dnnl_qconv]") == 5, kernels
        if relus_dropped:  # (a kept Relu between Add and Q leaves the add in float)
            # the residual adds stay 8-bit: fused into the convs feeding them (compiler/qconv_add_fusion.h)
            fused = kernels.count("Add+QuantizeLinear") - kernels.count("[kiln_qadd]")
            assert kernels.count("[kiln_qadd]") + fused == 2 and fused >= 1, kernels


def test_scales_match_ort_quantize_static(tmp_path):
    quantization = pytest.importorskip("onnxruntime.quantization")
    f32, calib, x = _net(tmp_path)
    q, _ = _quantize(tmp_path, f32, calib)

    class Reader(quantization.CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": b} for b in x])

        def get_next(self):
            return next(self.it, None)

    ort_q = str(tmp_path / "ort.onnx")
    quantization.quantize_static(f32, ort_q, Reader(), quant_format=quantization.QuantFormat.QDQ, per_channel=True,
                                 activation_type=quantization.QuantType.QUInt8,
                                 weight_type=quantization.QuantType.QInt8)
    mine, theirs = _inits(q), _inits(ort_q)
    acts = [n[:-len("_scale")] for n in mine if n.endswith("_scale") and n[:-len("_scale")] + "_zero_point" in mine
            and mine[n].ndim == 0 and not n.endswith("_w_scale")]
    compared = 0
    for t in acts:
        if t + "_scale" not in theirs:
            continue  # ORT shares its input's names for a max pool's output
        np.testing.assert_allclose(mine[t + "_scale"], theirs[t + "_scale"], rtol=1e-5, err_msg=t)
        assert mine[t + "_zero_point"] == theirs[t + "_zero_point"], t
        compared += 1
    assert compared >= 5, acts
    for conv in ["c1", "c2", "c3", "c4", "y"]:
        w = theirs.get(conv + "_w_quantized")
        np.testing.assert_array_equal(mine[conv + "_w_quantized"], w, err_msg=conv)
        np.testing.assert_allclose(mine[conv + "_w_scale"], theirs[conv + "_w_scale"], rtol=1e-6)


def test_weights_and_bias_follow_numpy_rule(tmp_path):
    f32, calib, _ = _net(tmp_path)
    q, report = _quantize(tmp_path, f32, calib)
    src, mine = _inits(f32), _inits(q)
    x_scale = {l["tensor"]: np.float32(l["scale"]) for l in report["layers"]}
    w = src["c2_w"]
    s = (np.abs(w).reshape(w.shape[0], -1).max(axis=1) * 2 / np.float32(254)).astype(np.float32)
    np.testing.assert_allclose(mine["c2_w_scale"], s, rtol=1e-6)
    wq = np.clip(np.rint(w / s[:, None, None, None]), -127, 127).astype(np.int8)
    np.testing.assert_array_equal(mine["c2_w_quantized"], wq)
    bias = [k for k in mine if k.startswith("c2_b") and k.endswith("_quantized")]
    assert len(bias) == 1, list(mine)
    bs = (x_scale["p"] * mine["c2_w_scale"]).astype(np.float32)
    np.testing.assert_array_equal(mine[bias[0]], np.rint(src["c2_b"] / bs).astype(np.int32))
    # The activation rule (ORT's compute_scale_zp, u8): the range widened to 0, scale = range / 255.
    for l in report["layers"]:
        lo, hi = np.float32(min(l["range"][0], 0)), np.float32(max(l["range"][1], 0))
        scale = np.float32((hi - lo) / np.float32(255))
        assert np.isclose(l["scale"], scale, rtol=1e-6), l
        assert l["zero_point"] == int(np.rint(np.float32(0) - lo / scale)), l


def test_percentile_range_is_numpy_percentile(tmp_path):
    f32, calib, x = _net(tmp_path)
    q, report = _quantize(tmp_path, f32, calib, "--method", "percentile", "--percentile", "99.9")
    got = next(l for l in report["layers"] if l["tensor"] == "x")["range"]
    width = (x.max() - x.min()) / 2048  # the histogram's bin: Kiln returns the outer edge of the bin
    lo, hi = (np.percentile(x, p, method="inverted_cdf") for p in (0.1, 99.9))  # no interpolation
    assert got[0] <= lo + 1e-6 and lo - got[0] <= 1.01 * width, (got, lo)
    assert got[1] >= hi - 1e-6 and got[1] - hi <= 1.01 * width, (got, hi)
    assert got[1] < x.max() and got[0] > x.min()
    ort_outputs(q, {"x": x[0]})  # ORT runs it


def test_entropy_method_runs(tmp_path):
    f32, calib, x = _net(tmp_path)
    q, report = _quantize(tmp_path, f32, calib, "--method", "entropy")
    for l in report["layers"]:
        assert l["range"][1] > 0, l
    ort_outputs(q, {"x": x[0]})


def test_digits_int8_accuracy(tmp_path):
    sklearn = pytest.importorskip("sklearn")  # noqa: F841 (the training images for calibration)
    import sys
    sys.path.insert(0, os.path.join(REPO, "scripts"))
    import train_digits_data
    (x_train, _), _ = train_digits_data.split()
    np.savez(tmp_path / "calib.npz", image=x_train[:256].reshape(8, 32, 1, 8, 8))
    model = os.path.join(DIGITS, "digits_cnn.onnx")
    q, _ = _quantize(tmp_path, model, str(tmp_path / "calib.npz"))
    images = os.path.join(DIGITS, "test_images.npz")
    labels = np.load(os.path.join(DIGITS, "test_labels.npy"))
    fp32 = (ort_outputs(model, {"image": np.load(images)["image"]})["digit"] == labels).mean()
    outs, _ = kiln_run_model(q, images, str(tmp_path / "out"))
    int8 = (outs["digit"] == labels).mean()
    assert int8 >= fp32 - 0.005, f"int8 accuracy {int8:.4f} vs fp32 {fp32:.4f}"


@pytest.mark.parametrize("arrays,message", [
    ({"x": np.zeros((4, 3, 20, 20), np.float32)}, "calibration input 'x': expected shape [1,3,24,24]"),
    ({"image": np.zeros((1, 3, 24, 24), np.float32)}, "array 'image' is no input of the model"),
    ({"x": np.zeros((1, 3, 24, 24), np.float64)}, "input 'x': expected dtype f32, got f64"),
])
def test_bad_calibration_data_is_a_clear_error(tmp_path, arrays, message):
    f32, _, _ = _net(tmp_path, batches=1)
    np.savez(tmp_path / "bad.npz", **arrays)
    proc = run_kiln(["quantize", f32, "-o", str(tmp_path / "q.onnx"), "--calibration", str(tmp_path / "bad.npz")])
    assert proc.returncode == 1, proc.stderr
    assert "InvalidArgument" in proc.stderr and message in proc.stderr, proc.stderr
    assert not os.path.exists(tmp_path / "q.onnx")


def test_batchnorm_folds_into_the_int8_conv(tmp_path):
    """Conv -> BatchNormalization -> Relu (an exporter's training-mode graph): the BN is folded
    into the conv's weights before quantizing, so no float BN sits between QDQ pairs; the int8
    model stays close to the fp32 one (ORT runs both)."""
    from onnx import TensorProto, helper
    rng = np.random.default_rng(11)
    c = 8
    inits = [numpy_helper.from_array(a.astype(np.float32), n) for n, a in [
        ("w", rng.standard_normal((c, 3, 3, 3)) * 0.3), ("gamma", rng.uniform(0.5, 2, c)),
        ("beta", rng.standard_normal(c) * 0.1), ("mean", rng.standard_normal(c) * 0.2),
        ("var", rng.uniform(0.5, 2, c))]]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1] * 4, name="conv"),
             helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["bn"], epsilon=1e-3),
             helper.make_node("Relu", ["bn"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 12, 12])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    f32 = str(tmp_path / "bn.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f32)
    x = rng.standard_normal((8, 1, 3, 12, 12)).astype(np.float32)
    np.savez(tmp_path / "calib.npz", x=x)
    q, _ = _quantize(tmp_path, f32, str(tmp_path / "calib.npz"))
    ops = [n.op_type for n in onnx.load(q).graph.node]
    assert "BatchNormalization" not in ops and ops.count("Conv") == 1, ops
    ref, got = ort_outputs(f32, {"x": x[0]})["y"], ort_outputs(q, {"x": x[0]})["y"]
    scale = _inits(q)["y_scale"]
    assert np.abs(got - ref).max() <= 3 * scale, np.abs(got - ref).max() / scale


def test_dynamic_quantization_kiln_equals_ort(tmp_path):
    """`kiln quantize --dynamic` (no calibration): MatMulInteger with int8 weights, the input
    quantized at run time; Kiln runs the file as ONNX Runtime does."""
    from onnx import TensorProto, helper
    rng = np.random.default_rng(4)
    inits = [numpy_helper.from_array((rng.standard_normal((24, 40)) * 0.2).astype(np.float32), "w1"),
             numpy_helper.from_array((rng.standard_normal((40, 8)) * 0.2).astype(np.float32), "w2")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 24])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    f32, q = str(tmp_path / "mm.onnx"), str(tmp_path / "mm.dyn.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f32)
    proc = run_kiln(["quantize", f32, "-o", q, "--dynamic"])
    assert proc.returncode == 0 and "2 MatMuls" in proc.stdout, proc.stdout + proc.stderr
    feed = {"x": rng.standard_normal((3, 24)).astype(np.float32)}
    np.savez(tmp_path / "in.npz", **feed)
    ref = ort_outputs(q, feed)["y"]
    outs, _ = kiln_run_model(q, str(tmp_path / "in.npz"), str(tmp_path / "out"))
    np.testing.assert_allclose(outs["y"], ref, rtol=1e-5, atol=1e-5)
    f = ort_outputs(f32, feed)["y"]
    assert np.abs(ref - f).max() < 0.05 * np.abs(f).max()


def test_output_over_input_is_refused(tmp_path):
    f32, calib, _ = _net(tmp_path, batches=1)
    before = open(f32, "rb").read()
    proc = run_kiln(["quantize", f32, "-o", f32, "--calibration", calib])
    assert proc.returncode == 1 and "is the input model" in proc.stderr, proc.stderr
    assert open(f32, "rb").read() == before


def test_a_quantized_model_is_refused(tmp_path):
    f32, calib, _ = _net(tmp_path, batches=1)
    q, _ = _quantize(tmp_path, f32, calib)
    for extra in (["--calibration", calib], ["--dynamic"]):
        proc = run_kiln(["quantize", q, "-o", str(tmp_path / "qq.onnx")] + extra)
        assert proc.returncode == 1 and "is quantized already" in proc.stderr, proc.stderr
