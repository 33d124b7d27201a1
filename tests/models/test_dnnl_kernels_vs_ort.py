"""oneDNN extern kernels (`--kernels dnnl`) against ONNX Runtime, one small model per pattern.

Each case is a single Conv / MatMul / Gemm with the epilogue Kiln fuses into it (bias, ReLU,
Clip, erf GELU, scalar scale, residual Add). It must (1) compile to a oneDNN extern kernel
(`kiln inspect --kernels` names dnnl_conv / dnnl_matmul: a test of the matcher) and (2) agree
with ONNX Runtime. The same models under `--kernels generated` must agree too, so both paths stay
tested. Tolerance: oneDNN and Kiln's generated kernels use FMA and reassociate the reduction;
rtol 1e-4 / atol 1e-4 over reductions of at most ~600 terms of O(1) values.
"""
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from kiln_helpers import assert_matches_ort, kiln_has_dnnl, kiln_run_model, ort_outputs, run_kiln

RTOL, ATOL = 1e-4, 1e-4


def _save(tmp_path, nodes, inputs, inits, feed):
    inits = {k: v.astype(np.float32) for k, v in inits.items()}
    out_name = nodes[-1].output[0]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, feed[n].shape)
                                       for n in inputs],
                          [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    np.savez(tmp_path / "in.npz", **feed)
    return str(path), str(tmp_path / "in.npz")


def _rand(rng, *shape):
    return (rng.standard_normal(shape) * 0.5).astype(np.float32)


def conv_case(rng, cin, cout, hw, k, stride, pad, group=1, dil=1, post=(), batch=1):
    w = _rand(rng, cout, cin // group, k, k) / np.sqrt(cin // group * k * k)
    inits = {"w": w, "b": _rand(rng, cout)}
    feed = {"x": _rand(rng, batch, cin, hw, hw)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y0"], kernel_shape=[k, k], strides=[stride] * 2,
                              pads=[pad] * 4, group=group, dilations=[dil] * 2)]
    cur = "y0"
    for i, p in enumerate(post):
        nxt = f"y{i + 1}"
        if p == "relu":
            nodes.append(helper.make_node("Relu", [cur], [nxt]))
        elif p == "clip":
            inits["lo"], inits["hi"] = np.array(0, np.float32), np.array(6, np.float32)
            nodes.append(helper.make_node("Clip", [cur, "lo", "hi"], [nxt]))
        elif p == "silu":  # x * sigmoid(x), as torch exports nn.SiLU
            nodes += [helper.make_node("Sigmoid", [cur], [f"s{i}"]), helper.make_node("Mul", [cur, f"s{i}"], [nxt])]
        elif p == "hardswish_written":  # x * hardsigmoid(x) with torch's 1/6, 1/2
            nodes += [helper.make_node("HardSigmoid", [cur], [f"s{i}"], alpha=1 / 6, beta=0.5),
                      helper.make_node("Mul", [f"s{i}", cur], [nxt])]
        elif p == "hardswish":
            nodes.append(helper.make_node("HardSwish", [cur], [nxt]))
        elif p == "paddle_hardswish":  # a learned scale and shift, then x * clip(x + 3, 0, 6) / 6
            inits.update(ps=np.array([0.9], np.float32), pb=np.array([0.1], np.float32), three=np.array(3, np.float32),
                         zero=np.array(0, np.float32), six=np.array(6, np.float32))
            nodes += [helper.make_node("Mul", ["ps", cur], [f"m{i}"]), helper.make_node("Add", [f"m{i}", "pb"], [f"x{i}"]),
                      helper.make_node("Add", [f"x{i}", "three"], [f"a{i}"]),
                      helper.make_node("Clip", [f"a{i}", "zero", "six"], [f"c{i}"]),
                      helper.make_node("Mul", [f"x{i}", f"c{i}"], [f"p{i}"]), helper.make_node("Div", [f"p{i}", "six"], [nxt])]
        elif p in ("scale", "shift"):  # a learned scalar scale or shift, as PP-OCR has after hard-swish
            inits[f"k{i}"] = np.array([0.47 if p == "scale" else -0.3], np.float32)
            nodes.append(helper.make_node("Mul" if p == "scale" else "Add", [f"k{i}", cur], [nxt]))
        elif p == "sigmoid":
            nodes.append(helper.make_node("Sigmoid", [cur], [nxt]))
        elif p == "hardsigmoid":  # ONNX's defaults, alpha 0.2, beta 0.5
            nodes.append(helper.make_node("HardSigmoid", [cur], [nxt]))
        elif p == "residual":  # a second conv's output of the same shape
            inits["w2"] = w.copy()
            nodes.insert(0, helper.make_node("Conv", ["x", "w2"], ["r"], kernel_shape=[k, k], strides=[stride] * 2,
                                             pads=[pad] * 4, group=group, dilations=[dil] * 2))
            nodes.append(helper.make_node("Add", [cur, "r"], [nxt]))
        cur = nxt
    return nodes, ["x"], inits, feed


def deconv_case(rng, cin, cout, hw, k, bias, batch=1):
    """ConvTranspose with kernel == stride: oneDNN's matmul and a pixel shuffle (dnnl_deconv_shuffle.cc)."""
    inits = {"w": _rand(rng, cin, cout, k, k) / np.sqrt(cin)}
    if bias:
        inits["b"] = _rand(rng, cout)
    feed = {"x": _rand(rng, batch, cin, hw, hw + 3)}
    nodes = [helper.make_node("ConvTranspose", ["x", "w"] + (["b"] if bias else []), ["y"], kernel_shape=[k, k],
                              strides=[k, k])]
    return nodes, ["x"], inits, feed


def matmul_case(rng, a_shape, b_shape, bias=False, post=()):
    inits = {"B": _rand(rng, *b_shape) / np.sqrt(b_shape[-2])}
    feed = {"A": _rand(rng, *a_shape)}
    nodes = [helper.make_node("MatMul", ["A", "B"], ["y0"])]
    cur = "y0"
    if bias:
        inits["bias"] = _rand(rng, b_shape[-1])
        nodes.append(helper.make_node("Add", [cur, "bias"], ["yb"]))
        cur = "yb"
    for i, p in enumerate(post):
        nxt = f"y{i + 1}"
        if p == "gelu":  # x * 0.5 * (1 + erf(x / sqrt 2)), as torch exports it below opset 20
            inits.update(sqrt2=np.array(1.4142135381698608, np.float32), one=np.array(1, np.float32),
                         half=np.array(0.5, np.float32))
            nodes += [helper.make_node("Div", [cur, "sqrt2"], ["g0"]), helper.make_node("Erf", ["g0"], ["g1"]),
                      helper.make_node("Add", ["g1", "one"], ["g2"]), helper.make_node("Mul", [cur, "g2"], ["g3"]),
                      helper.make_node("Mul", ["g3", "half"], [nxt])]
        elif p == "scale":
            inits["s"] = np.array(8.0, np.float32)
            nodes.append(helper.make_node("Div", [cur, "s"], [nxt]))
        cur = nxt
    return nodes, ["A"], inits, feed


def batched_matmul_case(rng):  # attention scores: two activations, batch of heads
    feed = {"A": _rand(rng, 1, 4, 32, 16), "B": _rand(rng, 1, 4, 16, 32)}
    return [helper.make_node("MatMul", ["A", "B"], ["y"])], ["A", "B"], {}, feed


def gemm_case(rng, m, k, n, trans_b):
    inits = {"B": _rand(rng, *((n, k) if trans_b else (k, n))) / np.sqrt(k), "C": _rand(rng, n)}
    feed = {"A": _rand(rng, m, k)}
    nodes = [helper.make_node("Gemm", ["A", "B", "C"], ["y0"], transB=int(trans_b)),
             helper.make_node("Relu", ["y0"], ["y1"])]
    return nodes, ["A"], inits, feed


CASES = {
    "stem_7x7_s2": lambda r: conv_case(r, 3, 64, 56, 7, 2, 3, post=("relu",)),
    "conv3x3_blocked": lambda r: conv_case(r, 32, 32, 14, 3, 1, 1, post=("relu",)),
    "conv1x1_residual": lambda r: conv_case(r, 32, 64, 14, 1, 1, 0, post=("residual", "relu")),
    "conv3x3_s2_dilated": lambda r: conv_case(r, 16, 32, 15, 3, 2, 2, dil=2),
    # ResNet's downsampling shortcut: the last input row is never read (ONNX end pad 0).
    "conv1x1_s2_residual": lambda r: conv_case(r, 32, 64, 14, 1, 2, 0, post=("residual", "relu")),
    # 24 channels: blocks of 8, which oneDNN computes in blocks of 16 (residual reordered in).
    "conv_block8_residual": lambda r: conv_case(r, 24, 24, 12, 1, 1, 0, post=("residual",)),
    "conv_block8_clip": lambda r: conv_case(r, 24, 40, 14, 1, 1, 0, post=("clip",)),
    "depthwise_clip": lambda r: conv_case(r, 32, 32, 14, 3, 1, 1, group=32, post=("clip",)),
    "grouped": lambda r: conv_case(r, 32, 64, 10, 3, 1, 1, group=4, post=("relu",)),
    # The activations of EfficientNet and MobileNetV3 ride in the conv as oneDNN post-ops.
    "conv1x1_silu": lambda r: conv_case(r, 16, 48, 14, 1, 1, 0, post=("silu",)),
    "conv3x3_hardswish_written": lambda r: conv_case(r, 16, 32, 12, 3, 1, 1, post=("hardswish_written",)),
    "depthwise_hardswish": lambda r: conv_case(r, 32, 32, 12, 3, 1, 1, group=32, post=("hardswish",)),
    # PP-OCR's export writes hard-swish out (Add, Clip, Mul, Div): one oneDNN post-op.
    "depthwise_paddle_hardswish": lambda r: conv_case(r, 32, 32, 12, 3, 1, 1, group=32, post=("paddle_hardswish",)),
    "conv1x1_paddle_hardswish": lambda r: conv_case(r, 16, 48, 10, 1, 1, 0, post=("paddle_hardswish",)),
    "depthwise_paddle_hardswish_affine": lambda r: conv_case(r, 32, 32, 12, 3, 1, 1, group=32,
                                                             post=("paddle_hardswish", "scale", "shift")),
    # An activation, a scale and a shift: one linear post-op (oneDNN 2.6 computed two wrongly).
    "conv3x3_relu_scale_shift": lambda r: conv_case(r, 16, 32, 10, 3, 1, 1, post=("relu", "scale", "shift")),
    # Channels that 8 but not 16 divides (24, 40, 72) are one NHWC block (transform_layout): NHWC
    # on both sides is read as it is (oneDNN's brgemm convs), one image split by bands of rows
    # (dense in NHWC); under --kernels generated they are blocks of 8.
    "depthwise_nhwc": lambda r: conv_case(r, 24, 24, 14, 3, 1, 1, group=24, post=("relu",)),
    "conv1x1_nhwc_72": lambda r: conv_case(r, 24, 72, 14, 1, 1, 0, post=("relu",)),
    "conv1x1_nhwc_residual": lambda r: conv_case(r, 72, 72, 9, 1, 1, 0, post=("residual", "relu")),
    "conv3x3_nhwc_s2_odd": lambda r: conv_case(r, 40, 40, 15, 3, 2, 1, post=("relu",)),
    "depthwise5x5_nhwc_s2": lambda r: conv_case(r, 72, 72, 13, 5, 2, 2, group=72),
    "conv1x1_nhwc_batch3": lambda r: conv_case(r, 24, 40, 7, 1, 1, 0, post=("relu",), batch=3),
    # NHWC on one side, nChw16c on the other: oneDNN's layout, reordered; an NHWC output split by
    # channels (strided views of it), with a residual.
    "conv1x1_nhwc_to_blocked16": lambda r: conv_case(r, 24, 48, 14, 1, 1, 0, post=("relu",)),
    "conv1x1_blocked16_to_nhwc_residual": lambda r: conv_case(r, 48, 24, 14, 1, 1, 0, post=("residual",)),
    # One image whose 24 output channels split badly: bands of output rows (dnnl_kernels.cc,
    # split_by_rows), halos and edge pads per band; strided with an odd size; a residual.
    "conv3x3_rows": lambda r: conv_case(r, 64, 24, 20, 3, 1, 1, post=("relu",)),
    "conv3x3_s2_rows": lambda r: conv_case(r, 64, 24, 35, 3, 2, 1),
    "conv5x5_rows_residual": lambda r: conv_case(r, 32, 24, 16, 5, 1, 2, post=("residual",)),
    # A stem of 3 input channels: bands of rows whatever the FLOPs per byte (channel parts each
    # reordered the whole image; runtime/extern_split.h).
    "stem3_s2_rows": lambda r: conv_case(r, 3, 24, 66, 3, 2, 1, post=("relu",)),
    "deconv_k2_to_one_channel": lambda r: deconv_case(r, 24, 1, 20, 2, False),  # PP-OCR det's last
    "deconv_k2_bias": lambda r: deconv_case(r, 32, 16, 12, 2, True),
    "deconv_k3_batch2": lambda r: deconv_case(r, 8, 5, 7, 3, True, batch=2),
    "conv1x1_hardsigmoid": lambda r: conv_case(r, 16, 32, 10, 1, 1, 0, post=("hardsigmoid",)),
    "matmul_bias_gelu": lambda r: matmul_case(r, (1, 32, 64), (64, 96), bias=True, post=("gelu",)),
    "matmul_scale": lambda r: matmul_case(r, (48, 64), (64, 40), post=("scale",)),
    "batched_matmul": batched_matmul_case,
    "gemm_transb": lambda r: gemm_case(r, 8, 96, 40, True),
    "gemm": lambda r: gemm_case(r, 8, 96, 40, False),
    # Splits with fewer parts than threads (runtime/extern_split.h), run at 5 threads below:
    # 3 images, 64 channels (4 blocks), one row of 320 columns (5 parts of 64).
    "conv3x3_batch3": lambda r: conv_case(r, 16, 32, 10, 3, 1, 1, post=("relu",), batch=3),
    "conv3x3_64ch": lambda r: conv_case(r, 32, 64, 12, 3, 1, 1, post=("relu",)),
    "gemv_cols": lambda r: gemm_case(r, 1, 96, 320, True),
    # ShuffleNetV2's 58-channel 1x1 convs run blocked on channels zero-padded to 64 (docs/passes.md;
    # they ran plain NCHW on oneDNN's GEMM conv before); by images at 5 threads; a residual (the sum
    # post-op).
    "conv1x1_plain_58": lambda r: conv_case(r, 58, 58, 28, 1, 1, 0, post=("relu",)),
    "conv1x1_plain_24_58_batch3": lambda r: conv_case(r, 24, 58, 14, 1, 1, 0, post=("relu",), batch=3),
    "conv1x1_plain_residual": lambda r: conv_case(r, 58, 58, 9, 1, 1, 0, post=("residual", "relu")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_dnnl_matches_ort(tmp_path, name):
    if not kiln_has_dnnl():
        pytest.skip("kiln built without oneDNN")
    rng = np.random.default_rng(sorted(CASES).index(name))
    path, inputs = _save(tmp_path, *CASES[name](rng))
    kernels = run_kiln(["inspect", path, "--kernel-source", "dnnl"])
    assert kernels.returncode == 0, kernels.stderr
    assert "extern kernel dnnl_" in kernels.stdout, f"{name}: no oneDNN kernel chosen:\n{kernels.stdout[-3000:]}"
    if "residual" in name:  # the residual Add itself rides in the oneDNN kernel
        assert any("extern kernel dnnl_conv" in line and "add:" in line for line in kernels.stdout.splitlines()), \
            f"{name}: the residual conv is not a oneDNN kernel:\n{kernels.stdout[-3000:]}"
    posts = {"silu": "swish", "hardswish": "hardswish", "hardsigmoid": "clip:0:1"}
    for kind, post in posts.items():
        if name.endswith(kind) or name.endswith(kind + "_written"):
            assert any("extern kernel dnnl_conv" in line and post in line for line in kernels.stdout.splitlines()), \
                f"{name}: the activation is not a oneDNN post-op:\n{kernels.stdout[-3000:]}"
    if "_rows" in name:  # the split by rows is taken at 2 threads
        verbose = run_kiln(["run", path, "--inputs", inputs, "--threads", "2", "--kernels", "dnnl"],
                           env={"KILN_DNNL_VERBOSE": "1"})
        assert "(by rows)" in verbose.stderr, f"{name}: not split by rows:\n{verbose.stderr[-3000:]}"
    if "nhwc" in name:  # one NHWC block of 24, 40 or 72 channels, on both sides or one
        verbose = run_kiln(["run", path, "--inputs", inputs, "--threads", "2", "--kernels", "dnnl"],
                           env={"KILN_DNNL_VERBOSE": "1"})
        convs = [line for line in verbose.stderr.splitlines() if line.startswith("kiln dnnl: conv") and "2 thread" in line]
        one_block = r" (src|dst) \d+x(\d+)x\d+x\d+/\2 "
        assert convs and all(re.search(one_block, line) for line in convs), f"{name}: no NHWC block:\n{verbose.stderr[-3000:]}"
        if "blocked16" not in name:  # NHWC both sides: brgconv / brdgmm, not the avx2 kernels of nChw8c
            assert all("brg" in line or "brdgmm" in line for line in convs), f"{name}:\n{verbose.stderr[-3000:]}"
    if "_plain_" in name:  # 58 channels, which no block divides: blocked on channels zero-padded to 64
        verbose = run_kiln(["run", path, "--inputs", inputs, "--threads", "2", "--kernels", "dnnl"],
                           env={"KILN_DNNL_VERBOSE": "1"})
        convs = [line for line in verbose.stderr.splitlines() if line.startswith("kiln dnnl: conv") and " k 1x1 " in line]
        assert convs and all(re.search(r" dst \d+x64x\d+x\d+/16 ", line) for line in convs), \
            f"{name}: not the padded blocked conv:\n{verbose.stderr[-3000:]}"
    feed = dict(np.load(inputs))
    ref = ort_outputs(path, feed)
    for source in ("dnnl", "generated"):
        # 5 threads (oversubscribed here): oneDNN steps with fewer parts than threads.
        for threads in ("1", "2", "5") if source == "dnnl" else ("1", "2"):
            outs, _ = kiln_run_model(path, inputs, str(tmp_path / f"{source}{threads}"),
                                     extra=["--kernels", source, "--threads", threads])
            assert_matches_ort(outs, ref, f"{name} --kernels {source} --threads {threads}", RTOL, ATOL)


# Epilogues oneDNN 2.6 computes wrongly (two linear post-ops with different parameters, apart):
# whichever kernel runs them, the output must match ONNX Runtime.
WRONG_IN_DNNL = {
    "sigmoid_shift_relu_scale": lambda r: conv_case(r, 16, 32, 10, 3, 1, 1, post=("sigmoid", "shift", "relu", "scale")),
    "relu_scale_relu_shift": lambda r: conv_case(r, 32, 32, 10, 3, 1, 1, group=32, post=("relu", "scale", "relu", "shift")),
}


@pytest.mark.parametrize("name", sorted(WRONG_IN_DNNL))
def test_dnnl_epilogue_matches_ort(tmp_path, name):
    if not kiln_has_dnnl():
        pytest.skip("kiln built without oneDNN")
    path, inputs = _save(tmp_path, *WRONG_IN_DNNL[name](np.random.default_rng(7)))
    ref = ort_outputs(path, dict(np.load(inputs)))
    outs, _ = kiln_run_model(path, inputs, str(tmp_path / "out"), extra=["--kernels", "dnnl", "--threads", "2"])
    assert_matches_ort(outs, ref, f"{name} --kernels dnnl", RTOL, ATOL)


def test_kernels_flag_rejects_unknown_value(tmp_path):
    rng = np.random.default_rng(0)
    path, inputs = _save(tmp_path, *CASES["gemm"](rng))
    proc = run_kiln(["run", path, "--kernels", "mkl"])
    assert proc.returncode != 0
    assert "--kernels" in proc.stderr and "mkl" in proc.stderr
