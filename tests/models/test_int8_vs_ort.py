"""Int8 (QDQ) models against ONNX Runtime: pass/fuse_qdq.h rewrites the QDQ sandwich into
QLinearConv / QLinearMatMul, which run as oneDNN's int8 convolution / matmul (dnnl_qconv,
dnnl_qmatmul); the residual add as kiln_qadd.

Models: single QDQ convs written with onnx.helper (per-tensor / per-channel weights, strides,
padding with a non-zero input zero point, groups, s8 activations, a Relu kept as Max), and a small
conv net quantized by ONNX Runtime's own `quantize_static` (QDQ, per-channel s8 weights, u8
activations; MinMax calibration on random data) with residual adds and a max pool, whose
activations between int8 kernels stay NHWC, at batch 1 and 2, and an MLP
of two MatMuls quantized the same way.

Checks: (1) the pass fused and the int8 kernels were chosen (`kiln inspect --kernels`); (2) every
8-bit output is within 1 quantization step of ORT's, and few elements are off at all. ORT
requantizes in float32 (MLAS) and oneDNN multiplies in float32 and adds the zero point after
rounding, so a value within float rounding of a half may round the other way: measured on these
cases, at most 1 step on at most ~1% of the elements of a single conv, a few % through the net
(differences propagate). The generated path (--kernels generated) is held to the same bound.
"""
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from kiln_helpers import kiln_has_dnnl, kiln_run_model, ort_outputs, ort_quantize_static, run_kiln


def _qdq_conv(rng, cin, cout, hw, k, stride, pad, group=1, per_channel=True, act=np.uint8, relu_zp=None, w_zp=0):
    """DQ(x_q) and DQ(W_q) -> Conv(+bias) [-> Relu] -> Q, as ORT's quantizer writes them."""
    lo, hi = (0, 255) if act == np.uint8 else (-128, 127)
    xs, xz = np.float32(0.03), act(40 if act == np.uint8 else -20)
    w = rng.integers(-127, 128, (cout, cin // group, k, k)).astype(np.int8)
    ws = (rng.uniform(0.002, 0.01, cout) if per_channel else np.array(0.005)).astype(np.float32)
    bq = rng.integers(-3000, 3000, cout).astype(np.int32)
    ys = np.float32(0.4 if cin // group * k * k > 16 else 0.1)
    yz = act(relu_zp if relu_zp is not None else (128 if act == np.uint8 else 0))
    ttype = TensorProto.UINT8 if act == np.uint8 else TensorProto.INT8
    inits = [numpy_helper.from_array(v, n) for n, v in [
        ("xs", np.array(xs)), ("xz", np.array(xz)), ("wq", w), ("ws", ws), ("wz", np.full(ws.shape, w_zp, np.int8)),
        ("bq", bq), ("bs", (xs * ws).astype(np.float32)), ("ys", np.array(ys)), ("yz", np.array(yz))]]
    nodes = [helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["x"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], axis=0),
             helper.make_node("DequantizeLinear", ["bq", "bs"], ["b"], axis=0),
             helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[k, k], strides=[stride] * 2,
                              pads=[pad] * 4, group=group)]
    if relu_zp is not None:
        nodes.append(helper.make_node("Relu", ["c"], ["r"]))
    nodes.append(helper.make_node("QuantizeLinear", ["r" if relu_zp is not None else "c", "ys", "yz"], ["y"]))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("xq", ttype, [1, cin, hw, hw])],
                          [helper.make_tensor_value_info("y", ttype, None)], inits)
    feed = {"xq": rng.integers(lo, hi + 1, (1, cin, hw, hw)).astype(act)}
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), feed


CONVS = {
    "conv3x3_per_channel": dict(cin=16, cout=32, hw=12, k=3, stride=1, pad=1),
    "conv3x3_stride2_per_tensor": dict(cin=16, cout=48, hw=13, k=3, stride=2, pad=1, per_channel=False),
    "conv1x1_stride2": dict(cin=32, cout=64, hw=14, k=1, stride=2, pad=0),
    "stem7x7": dict(cin=3, cout=16, hw=32, k=7, stride=2, pad=3),
    "depthwise": dict(cin=32, cout=32, hw=10, k=3, stride=1, pad=1, group=32),
    "s8_activations": dict(cin=16, cout=32, hw=9, k=3, stride=1, pad=1, act=np.int8),
    "relu_as_max": dict(cin=16, cout=32, hw=9, k=3, stride=1, pad=1, relu_zp=50),
    # oneDNN has no weight zero points: the generated integer QLinearConv runs it.
    "weight_zero_point": dict(cin=16, cout=32, hw=9, k=3, stride=1, pad=1, w_zp=5),
}


def _within_one_step(got, ref, label, max_off_fraction):
    assert got.dtype == ref.dtype and got.shape == ref.shape, f"{label}: {got.dtype}{got.shape} vs {ref.dtype}{ref.shape}"
    d = np.abs(got.astype(np.int64) - ref.astype(np.int64))
    assert d.max() <= 1, f"{label}: {d.max()} steps off at {np.unravel_index(d.argmax(), d.shape)}"
    assert (d > 0).mean() <= max_off_fraction, f"{label}: {(d > 0).mean():.2%} of the elements 1 step off"


def _kernels(path):
    proc = run_kiln(["inspect", path, "--kernels"])
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("name", sorted(CONVS))
def test_qdq_conv_matches_ort(tmp_path, name):
    if not kiln_has_dnnl():
        pytest.skip("kiln built without oneDNN")
    rng = np.random.default_rng(sorted(CONVS).index(name) + 1)
    model, feed = _qdq_conv(rng, **CONVS[name])
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    np.savez(tmp_path / "in.npz", **feed)
    kernels = _kernels(path)
    assert "QLinearConv" in kernels, f"{name}: not fused:\n{kernels}"
    assert ("[dnnl_qconv]" in kernels) == (name != "weight_zero_point"), f"{name}: kernel choice:\n{kernels}"
    if name == "relu_as_max":
        assert "Max" in kernels, kernels
    ref = ort_outputs(path, feed)["y"]
    for source in ("auto", "generated"):
        for threads in ("1", "2"):
            outs, _ = kiln_run_model(path, str(tmp_path / "in.npz"), str(tmp_path / f"{source}{threads}"),
                                     extra=["--kernels", source, "--threads", threads])
            _within_one_step(outs["y"], ref, f"{name} --kernels {source} --threads {threads}", 0.01)


def _small_net(path, batch):
    """A float conv net (what quantize_static reads): a stem and a max pool (kiln_qmaxpool, NHWC in
    and out), a residual block whose
    sum feeds another conv (so the 8-bit activations between the int8 kernels stay NHWC:
    compiler/int8_layout.h), a second residual add and a last conv whose result is the output."""
    rng = np.random.default_rng(7)
    nodes, inits = [], []

    def conv(name, x, cin, cout, k, s, p, relu=True):
        w = (rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float32)
        inits.extend([numpy_helper.from_array(w, name + "_w"),
                      numpy_helper.from_array((rng.standard_normal(cout) * 0.1).astype(np.float32), name + "_b")])
        nodes.append(helper.make_node("Conv", [x, name + "_w", name + "_b"], [name], kernel_shape=[k, k],
                                      strides=[s, s], pads=[p] * 4))
        if not relu:
            return name
        nodes.append(helper.make_node("Relu", [name], [name + "_r"]))
        return name + "_r"

    a = conv("c1", "x", 3, 16, 3, 1, 1)
    nodes.append(helper.make_node("MaxPool", [a], ["p"], kernel_shape=[2, 2], strides=[2, 2]))
    b = conv("c2", "p", 16, 32, 3, 1, 1)
    c = conv("c3", b, 32, 32, 1, 1, 0, relu=False)
    nodes += [helper.make_node("Add", [c, b], ["s"]), helper.make_node("Relu", ["s"], ["sr"])]
    d = conv("c4", "sr", 32, 32, 3, 1, 1, relu=False)
    nodes += [helper.make_node("Add", [d, "sr"], ["s2"]), helper.make_node("Relu", ["s2"], ["s2r"])]
    conv("y", "s2r", 32, 16, 1, 1, 0, relu=False)
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 24, 24])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


@pytest.mark.parametrize("fuse_add", [True, False])
@pytest.mark.parametrize("batch", [1, 2])
def test_quantize_static_net_matches_ort(tmp_path, monkeypatch, batch, fuse_add):
    """fuse_add: each residual add fused into the conv that feeds it (dnnl_qconv's sum post-op,
    compiler/qconv_add_fusion.h); else (KILN_INT8_FUSE_ADD=0) the separate kiln_qadd."""
    if not fuse_add:
        monkeypatch.setenv("KILN_INT8_FUSE_ADD", "0")
    if not kiln_has_dnnl():
        pytest.skip("kiln built without oneDNN")
    quantization = pytest.importorskip("onnxruntime.quantization")
    f32, q = str(tmp_path / "f32.onnx"), str(tmp_path / "q.onnx")
    _small_net(f32, batch)
    rng = np.random.default_rng(3)
    shape = (batch, 3, 24, 24)

    ort_quantize_static(quantization, f32, q, shape, rng)
    kernels = _kernels(q)
    assert kernels.count("[dnnl_qconv]") == 5, f"not every conv runs as the int8 kernel:\n{kernels}"
    full = run_kiln(["inspect", q]).stdout
    fused = [line for line in full.splitlines() if "extern kernel dnnl_qconv" in line and ";sum=" in line]
    if fuse_add:  # both adds: c3's and c4's output feed only their add
        assert kernels.count("[kiln_qadd]") == 0 and len(fused) == 2, f"the adds are not fused:\n{kernels}"
        assert all("y_layout=nhwc" in line for line in fused), f"the fused residuals stay NCHW: {fused}"
    else:
        assert kernels.count("[kiln_qadd]") == 2 and not fused, f"the residual adds are not the int8 add:\n{kernels}"
    assert "x_layout=nhwc" in full and "y_layout=nhwc" in full, "no activation stays NHWC between int8 kernels"
    # The max pool between the stem conv and the block reads and writes NHWC (runtime/qmaxpool_kernel.h).
    pool = [line for line in full.splitlines() if "extern kernel kiln_qmaxpool" in line]
    assert len(pool) == 1 and "x_layout=nhwc" in pool[0] and "y_layout=nhwc" in pool[0], f"the int8 max pool: {pool}"
    feed = {"x": rng.standard_normal(shape).astype(np.float32)}
    np.savez(tmp_path / "in.npz", **feed)
    ref = ort_outputs(q, feed)["y"]
    # The output is DequantizeLinear(y_q): steps of y's scale, read back from the model.
    scale = next(numpy_helper.to_array(t) for t in onnx.load(q).graph.initializer if t.name == "y_scale")
    for threads in ("1", "2"):
        outs, _ = kiln_run_model(q, str(tmp_path / "in.npz"), str(tmp_path / f"o{threads}"), extra=["--threads", threads])
        steps = np.rint(np.abs(outs["y"] - ref) / scale)
        assert steps.max() <= 1, f"--threads {threads}: {steps.max()} steps off"
        assert (steps > 0).mean() <= 0.05, f"--threads {threads}: {(steps > 0).mean():.2%} of the outputs 1 step off"


def test_pool_into_a_view_stays_nchw(tmp_path):
    """conv -> max pool -> Flatten -> Gemm: the pool's output is read through a view (no kernel of its
    own), so it must stay NCHW (compiler/int8_layout.h); written NHWC, the classifier read its
    features in the wrong order (the digits CNN's int8 accuracy fell to 17%)."""
    if not kiln_has_dnnl():
        pytest.skip("kiln built without oneDNN")
    quantization = pytest.importorskip("onnxruntime.quantization")
    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array((rng.standard_normal((16, 3, 3, 3)) / 5).astype(np.float32), "cw"),
             numpy_helper.from_array((rng.standard_normal(16) * 0.1).astype(np.float32), "cb"),
             numpy_helper.from_array((rng.standard_normal((16 * 4 * 4, 10)) / 16).astype(np.float32), "fw"),
             numpy_helper.from_array((rng.standard_normal(10) * 0.1).astype(np.float32), "fb")]
    nodes = [helper.make_node("Conv", ["x", "cw", "cb"], ["c"], kernel_shape=[3, 3], pads=[1] * 4),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]), helper.make_node("Gemm", ["f", "fw", "fb"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    f32, q = str(tmp_path / "f32.onnx"), str(tmp_path / "q.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f32)

    ort_quantize_static(quantization, f32, q, (4, 3, 8, 8), rng)
    kernels = _kernels(q)
    assert "[dnnl_qconv]" in kernels and "[kiln_qmaxpool]" in kernels, kernels
    pool = [line for line in run_kiln(["inspect", q]).stdout.splitlines() if "extern kernel kiln_qmaxpool" in line]
    assert len(pool) == 1 and "y_layout=nhwc" not in pool[0], f"the pool read through a view writes NHWC: {pool}"
    feed = {"x": rng.standard_normal((4, 3, 8, 8)).astype(np.float32)}
    np.savez(tmp_path / "in.npz", **feed)
    ref = ort_outputs(q, feed)["y"]
    outs, _ = kiln_run_model(q, str(tmp_path / "in.npz"), str(tmp_path / "o"))
    step = next(numpy_helper.to_array(t) for t in onnx.load(q).graph.initializer if t.name == "y_scale")
    steps = np.rint(np.abs(outs["y"] - ref) / step)
    assert steps.max() <= 1 and (steps > 0).mean() <= 0.05, f"{steps.max()} steps off, {(steps > 0).mean():.2%}"


def test_quantize_static_mlp_matches_ort(tmp_path):
    """QDQ MatMul (per-column s8 weights, axis 1) -> QLinearMatMul -> dnnl_qmatmul."""
    if not kiln_has_dnnl():
        pytest.skip("kiln built without oneDNN")
    quantization = pytest.importorskip("onnxruntime.quantization")
    rng = np.random.default_rng(11)
    inits = [numpy_helper.from_array((rng.standard_normal((64, 96)) / 8).astype(np.float32), "W1"),
             numpy_helper.from_array((rng.standard_normal(96) * 0.1).astype(np.float32), "b1"),
             numpy_helper.from_array((rng.standard_normal((96, 40)) / 10).astype(np.float32), "W2")]
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("MatMul", ["r", "W2"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    f32, q = str(tmp_path / "f32.onnx"), str(tmp_path / "q.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f32)

    ort_quantize_static(quantization, f32, q, (2, 16, 64), rng)
    kernels = _kernels(q)
    assert kernels.count("[dnnl_qmatmul]") == 2, f"not every MatMul runs as the int8 kernel:\n{kernels}"
    feed = {"x": rng.standard_normal((2, 16, 64)).astype(np.float32)}
    np.savez(tmp_path / "in.npz", **feed)
    ref = ort_outputs(q, feed)["y"]
    scale = next(numpy_helper.to_array(t) for t in onnx.load(q).graph.initializer if t.name == "y_scale")
    for source in ("auto", "generated"):
        outs, _ = kiln_run_model(q, str(tmp_path / "in.npz"), str(tmp_path / source), extra=["--kernels", source])
        steps = np.rint(np.abs(outs["y"] - ref) / scale)
        assert steps.max() <= 1 and (steps > 0).mean() <= 0.05, \
            f"--kernels {source}: {steps.max()} steps off, {(steps > 0).mean():.2%} of the outputs"


@pytest.mark.parametrize("quantizer", ["kiln", "ort"])
def test_dynamic_matmul_matches_ort(tmp_path, quantizer):
    """Dynamic quantization (DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(a_s * W_s)),
    the bias Add and the Relu or residual Add after it -> one dnnl_dqmatmul per MatMul, each
    DynamicQuantizeLinear kiln_dql; equal to ORT on the file written by `kiln quantize --dynamic`
    or by ORT's `quantize_dynamic` (so the activations were quantized to the same bytes)."""
    if not kiln_has_dnnl():
        pytest.skip("kiln built without oneDNN")
    rng = np.random.default_rng(12)
    inits = [numpy_helper.from_array((rng.standard_normal((64, 96)) / 8).astype(np.float32), "W1"),
             numpy_helper.from_array((rng.standard_normal(96) * 0.1).astype(np.float32), "b1"),
             numpy_helper.from_array((rng.standard_normal((96, 64)) / 10).astype(np.float32), "W2"),
             numpy_helper.from_array((rng.standard_normal(64) * 0.1).astype(np.float32), "b2")]
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("MatMul", ["r", "W2"], ["m2"]),
             helper.make_node("Add", ["m2", "b2"], ["mb"]), helper.make_node("Add", ["mb", "x"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    f32, q = str(tmp_path / "f32.onnx"), str(tmp_path / "q.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f32)
    if quantizer == "kiln":
        proc = run_kiln(["quantize", f32, "-o", q, "--dynamic"])
        assert proc.returncode == 0, proc.stderr
    else:
        quantization = pytest.importorskip("onnxruntime.quantization")
        quantization.quantize_dynamic(f32, q, weight_type=quantization.QuantType.QInt8)
    kernels = _kernels(q)
    assert kernels.count("[dnnl_dqmatmul]") == 2, f"not every MatMulInteger runs as the int8 kernel:\n{kernels}"
    assert kernels.count("[kiln_dql]") == 2, kernels
    feed = {"x": rng.standard_normal((2, 16, 64)).astype(np.float32)}
    np.savez(tmp_path / "in.npz", **feed)
    ref = ort_outputs(q, feed)["y"]
    for source in ("auto", "generated"):
        outs, _ = kiln_run_model(q, str(tmp_path / "in.npz"), str(tmp_path / source), extra=["--kernels", source])
        np.testing.assert_allclose(outs["y"], ref, rtol=1e-5, atol=1e-5, err_msg=f"--kernels {source}")


@pytest.mark.parametrize("case", ["mixed", "positive", "constant"])
def test_dynamic_quantize_linear_equals_ort(tmp_path, case):
    """DynamicQuantizeLinear alone (kiln_dql under --kernels auto, the generated kernel under
    generated): y, y_scale and y_zero_point byte-equal to ORT's, over a range with 0 inside, one
    of positives only (zero point 0) and a constant tensor (scale 1)."""
    rng = np.random.default_rng(13)
    x = {"mixed": rng.standard_normal((3, 50, 700)) * 4 - 1, "positive": rng.uniform(0.5, 3, (3, 50, 700)),
         "constant": np.full((3, 50, 700), 2.5)}[case].astype(np.float32)
    if case == "mixed":  # values near halves of a step
        x.flat[:50] = (np.arange(50) + 0.5) * ((x.max() - min(x.min(), 0)) / 255)
    g = helper.make_graph([helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "ys", "yz"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info(n, t, None) for n, t in
                           [("y", TensorProto.UINT8), ("ys", TensorProto.FLOAT), ("yz", TensorProto.UINT8)]])
    path = str(tmp_path / "dql.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    assert "[kiln_dql]" in _kernels(path)  # not oneDNN: in every build
    np.savez(tmp_path / "in.npz", x=x)
    ref = ort_outputs(path, {"x": x})
    for source in ("auto", "generated"):
        outs, _ = kiln_run_model(path, str(tmp_path / "in.npz"), str(tmp_path / source), extra=["--kernels", source])
        for name in ("y", "ys", "yz"):
            np.testing.assert_array_equal(outs[name], ref[name], err_msg=f"--kernels {source}: {name}")


def _inverted_residual(path, cmid, k, stride):
    """MobileNetV2's block: 1x1 expand + ReLU6, depthwise k x k + ReLU6, 1x1 project. Between the
    two 1x1 int8 convs the depthwise conv reads and writes NHWC (runtime/int8_dwconv.h)."""
    rng = np.random.default_rng(11 + cmid + k + stride)
    inits, nodes = [], []

    def conv(name, x, cin, cout, kk, s, group=1, clip=True):
        w = (rng.standard_normal((cout, cin // group, kk, kk)) / np.sqrt(cin // group * kk * kk)).astype(np.float32)
        inits.extend([numpy_helper.from_array(w, name + "_w"),
                      numpy_helper.from_array((rng.standard_normal(cout) * 0.1).astype(np.float32), name + "_b")])
        nodes.append(helper.make_node("Conv", [x, name + "_w", name + "_b"], [name], kernel_shape=[kk, kk],
                                      strides=[s, s], pads=[kk // 2] * 4, group=group))
        if not clip:
            return name
        nodes.append(helper.make_node("Clip", [name, "lo", "hi"], [name + "_r"]))
        return name + "_r"

    inits += [numpy_helper.from_array(np.array(0, np.float32), "lo"), numpy_helper.from_array(np.array(6, np.float32), "hi")]
    a = conv("expand", "x", 16, cmid, 1, 1)
    b = conv("dw", a, cmid, cmid, k, stride, group=cmid)
    conv("y", b, cmid, 24, 1, 1, clip=False)
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 19, 19])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


@pytest.mark.parametrize("cmid,k,stride", [(48, 3, 1), (96, 3, 2), (40, 3, 1), (32, 5, 2)])
def test_depthwise_between_int8_convs_matches_ort(tmp_path, monkeypatch, cmid, k, stride):
    """The depthwise conv of an inverted residual block, quantized by ORT's quantize_static, runs on
    Kiln's VNNI depthwise kernel where the host has VNNI (KILN_DNNL_VERBOSE names it), and the
    block's output is within 1 step of ORT's; also with the kernel off (KILN_INT8_DW=0: oneDNN's)."""
    if not kiln_has_dnnl():
        pytest.skip("kiln built without oneDNN")
    quantization = pytest.importorskip("onnxruntime.quantization")
    f32, q = str(tmp_path / "f32.onnx"), str(tmp_path / "q.onnx")
    _inverted_residual(f32, cmid, k, stride)
    rng = np.random.default_rng(5)
    shape = (1, 16, 19, 19)

    ort_quantize_static(quantization, f32, q, shape, rng)
    assert _kernels(q).count("[dnnl_qconv]") == 3, _kernels(q)
    feed = {"x": rng.standard_normal(shape).astype(np.float32)}
    np.savez(tmp_path / "in.npz", **feed)
    ref = ort_outputs(q, feed)["y"]
    scale = next(numpy_helper.to_array(t) for t in onnx.load(q).graph.initializer if t.name == "y_scale")
    monkeypatch.setenv("KILN_DNNL_VERBOSE", "1")
    vnni = os.path.exists("/proc/cpuinfo") and "avx512_vnni" in open("/proc/cpuinfo").read()
    for dw in ("1", "0"):
        monkeypatch.setenv("KILN_INT8_DW", dw)
        for threads in ("1", "2"):
            outs, proc = kiln_run_model(q, str(tmp_path / "in.npz"), str(tmp_path / f"o{dw}{threads}"),
                                        extra=["--threads", threads])
            assert ("kiln int8_dwconv" in proc.stderr) == (vnni and dw == "1"), proc.stderr
            steps = np.rint(np.abs(outs["y"] - ref) / scale)
            assert steps.max() <= 1, f"KILN_INT8_DW={dw} --threads {threads}: {steps.max()} steps off"
            assert (steps > 0).mean() <= 0.05, f"KILN_INT8_DW={dw} --threads {threads}: {(steps > 0).mean():.2%} 1 step off"
