"""Convolutions on symbolic shapes (issue 23, docs/dynamic_shapes.md, "Convolutions on symbolic
shapes"): a CNN whose batch, height and width are dims of the run compiles once (`kiln run
--symbolic-shapes`, `kiln compile` without --dim) and matches ONNX Runtime at several sizes,
including sizes where a stride-2 window drops a row; a size the model itself cannot take (an
Add of two maps that disagree) is a clear error, as in ONNX Runtime."""
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from kiln_helpers import assert_matches_ort, kiln_has_dnnl, kiln_run_model, ort_outputs, run_kiln

pytestmark = pytest.mark.skipif(not kiln_has_dnnl(), reason="symbolic convolutions run on oneDNN")


def _const(name, arr):
    return numpy_helper.from_array(np.asarray(arr, dtype=np.float32), name)


def make_cnn(path):
    """[n, 3, h, w] -> stride-2 conv + BN + hard-swish -> depthwise 3x3 -> 1x1 conv with a
    squeeze-and-excitation scale (GlobalAveragePool) -> stride-2 conv -> ConvTranspose 2x up and
    nearest Resize 2x up, added to the stride-2 branch (equal when h and w are multiples of 4) ->
    Concat -> 1x1 conv -> Sigmoid."""
    rng = np.random.default_rng(0)
    w = lambda *s: rng.standard_normal(s).astype(np.float32) * (2.0 / np.prod(s[1:])) ** 0.5  # noqa: E731
    inits = [
        _const("w1", w(16, 3, 3, 3)), _const("b1", rng.standard_normal(16) * 0.1),
        _const("bn_s", rng.uniform(0.5, 1.5, 16)), _const("bn_b", rng.standard_normal(16) * 0.1),
        _const("bn_m", rng.standard_normal(16) * 0.1), _const("bn_v", rng.uniform(0.5, 1.5, 16)),
        _const("wd", w(16, 1, 3, 3)), _const("w2", w(32, 16, 1, 1)),
        _const("wse1", w(8, 32, 1, 1)), _const("wse2", w(32, 8, 1, 1)),
        _const("w3", w(32, 32, 3, 3)), _const("wt", w(32, 16, 2, 2)),
        _const("w4", w(1, 48, 1, 1)),
        _const("three", [3.0]), _const("six", [6.0]), _const("zero", [0.0]),
        _const("scales", [1, 1, 2, 2]), numpy_helper.from_array(np.zeros(0, np.float32), "roi"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("BatchNormalization", ["c1", "bn_s", "bn_b", "bn_m", "bn_v"], ["bn"], epsilon=1e-5),
        # Paddle's hard-swish written out: x * Clip(x + 3, 0, 6) / 6
        helper.make_node("Add", ["bn", "three"], ["hs_a"]),
        helper.make_node("Clip", ["hs_a", "zero", "six"], ["hs_c"]),
        helper.make_node("Mul", ["bn", "hs_c"], ["hs_m"]),
        helper.make_node("Div", ["hs_m", "six"], ["hs"]),
        helper.make_node("Conv", ["hs", "wd"], ["dw"], pads=[1, 1, 1, 1], group=16),
        helper.make_node("Relu", ["dw"], ["dwr"]),
        helper.make_node("Conv", ["dwr", "w2"], ["c2"]),
        helper.make_node("GlobalAveragePool", ["c2"], ["gap"]),
        helper.make_node("Conv", ["gap", "wse1"], ["se1"]),
        helper.make_node("Relu", ["se1"], ["se1r"]),
        helper.make_node("Conv", ["se1r", "wse2"], ["se2"]),
        helper.make_node("HardSigmoid", ["se2"], ["se"], alpha=0.2, beta=0.5),
        helper.make_node("Mul", ["c2", "se"], ["sc"]),
        helper.make_node("Conv", ["sc", "w3"], ["c3"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("ConvTranspose", ["c3", "wt"], ["up1"], strides=[2, 2]),
        helper.make_node("Resize", ["c3", "roi", "scales"], ["up2"], mode="nearest",
                         coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        helper.make_node("Slice", ["up2", "s_start", "s_end", "s_axes"], ["up2s"]),
        helper.make_node("Add", ["up1", "hs"], ["sum"]),
        helper.make_node("Concat", ["sum", "up2s"], ["cat"], axis=1),
        helper.make_node("Conv", ["cat", "w4"], ["c4"]),
        helper.make_node("Sigmoid", ["c4"], ["y"]),
    ]
    inits += [numpy_helper.from_array(np.array([0], np.int64), "s_start"),
              numpy_helper.from_array(np.array([32], np.int64), "s_end"),
              numpy_helper.from_array(np.array([1], np.int64), "s_axes")]
    graph = helper.make_graph(
        nodes, "symbolic_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 1, None, None]),
         helper.make_tensor_value_info("se", TensorProto.FLOAT, ["n", 32, 1, 1])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("symconv") / "cnn.onnx")
    make_cnn(path)
    return path


def _feed(shape, seed):
    return {"x": np.random.default_rng(seed).standard_normal(shape).astype(np.float32)}


# Multiples of 4 (the Add's two maps agree); 36 x 20 and 1 x 12 x 4 at the small end.
SHAPES = [(1, 3, 32, 32), (2, 3, 36, 20), (1, 3, 12, 4), (3, 3, 64, 48)]


@pytest.mark.parametrize("shape", SHAPES, ids=["x".join(map(str, s)) for s in SHAPES])
def test_symbolic_cnn_matches_ort(cnn, tmp_path, shape):
    feed = _feed(shape, sum(shape))
    np.savez(tmp_path / "in.npz", **feed)
    got, proc = kiln_run_model(cnn, str(tmp_path / "in.npz"), str(tmp_path / "out"),
                               extra=["--symbolic-shapes", "--repeat", "1"])
    assert "symbolic shapes: one compile serves every shape" in proc.stdout, proc.stdout
    assert_matches_ort(got, ort_outputs(cnn, feed), f"symbolic cnn {shape}", rtol=1e-4, atol=1e-5)


def test_symbolic_cnn_artifact_runs_every_shape(cnn, tmp_path):
    """One `.kiln` artifact (format 4: dnnl_conv steps made per shape, the dim equality saved)
    at two sizes, and a size the model cannot take refused naming the Add."""
    art = str(tmp_path / "cnn.kiln")
    proc = run_kiln(["compile", cnn, "-o", art])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for shape in [(1, 3, 32, 32), (2, 3, 24, 40)]:
        feed = _feed(shape, 7)
        np.savez(tmp_path / "in.npz", **feed)
        got, _ = kiln_run_model(art, str(tmp_path / "in.npz"), str(tmp_path / f"out{shape[2]}"),
                                extra=["--repeat", "1"])
        assert_matches_ort(got, ort_outputs(cnn, feed), f"artifact {shape}", rtol=1e-4, atol=1e-5)
    # h = 30: the stride-2 branch has 15 rows, the two up-sampled maps 16 (ORT fails too).
    np.savez(tmp_path / "bad.npz", **_feed((1, 3, 30, 32), 1))
    proc = run_kiln(["run", art, "--inputs", str(tmp_path / "bad.npz"), "--repeat", "1"])
    assert proc.returncode != 0
    err = proc.stdout + proc.stderr
    assert "needs dimensions" in err and "equal" in err and "15 and 16" in err.replace("16 and 15", "15 and 16"), err


def make_classifier(path):
    """A ResNet-style classifier head over a symbolic batch and image size: conv, 3x3 stride-2
    MaxPool with padding, AveragePool, GlobalAveragePool, Flatten, Gemm (M = the batch)."""
    rng = np.random.default_rng(1)
    inits = [_const("w1", rng.standard_normal((16, 3, 3, 3)) * 0.3), _const("b1", rng.standard_normal(16) * 0.1),
             _const("fc_w", rng.standard_normal((10, 16)) * 0.3), _const("fc_b", rng.standard_normal(10) * 0.1)]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("AveragePool", ["p1"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "symbolic_classifier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "h", "w"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


@pytest.mark.parametrize("shape", [(1, 3, 32, 32), (3, 3, 21, 17)], ids=["1x32x32", "3x21x17"])
def test_symbolic_classifier_matches_ort(tmp_path, shape):
    path = str(tmp_path / "cls.onnx")
    make_classifier(path)
    feed = _feed(shape, 5)
    np.savez(tmp_path / "in.npz", **feed)
    got, proc = kiln_run_model(path, str(tmp_path / "in.npz"), str(tmp_path / "out"),
                               extra=["--symbolic-shapes", "--repeat", "1"])
    assert "symbolic shapes: one compile serves every shape" in proc.stdout, proc.stdout
    assert_matches_ort(got, ort_outputs(path, feed), f"symbolic classifier {shape}", rtol=1e-4, atol=1e-5)


def make_ceil_pools(path):
    """GoogLeNet's and SqueezeNet's pools: ceil_mode windows whose last window may hang over the
    input's end (3x3 / 2x2 with stride 2), MaxPool and AveragePool (count_include_pad=0), between
    convs so that the layout pass runs them blocked."""
    rng = np.random.default_rng(2)
    inits = [_const("w1", rng.standard_normal((16, 3, 3, 3)) * 0.3), _const("w2", rng.standard_normal((16, 16, 1, 1)) * 0.3)]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("MaxPool", ["c1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
        helper.make_node("Conv", ["p1", "w2"], ["c2"]),
        helper.make_node("AveragePool", ["c2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
        helper.make_node("MaxPool", ["p2"], ["p3"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
        helper.make_node("Conv", ["p3", "w2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "ceil_pools", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 16, None, None])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def test_ceil_mode_pools_compile_once(tmp_path):
    """One artifact at sizes where the ceil windows hang over (odd) and where they do not (even)."""
    path = str(tmp_path / "ceil.onnx")
    make_ceil_pools(path)
    art = str(tmp_path / "ceil.kiln")
    proc = run_kiln(["compile", path, "-o", art])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for i, shape in enumerate([(1, 3, 32, 32), (2, 3, 27, 19), (1, 3, 14, 41)]):
        feed = _feed(shape, 11 + i)
        np.savez(tmp_path / "in.npz", **feed)
        got, _ = kiln_run_model(art, str(tmp_path / "in.npz"), str(tmp_path / f"out{i}"), extra=["--repeat", "1"])
        assert_matches_ort(got, ort_outputs(path, feed), f"ceil pools {shape}", rtol=1e-4, atol=1e-5)


def make_pads(path):
    """Pads on symbolic spatial dims: a zero Pad before an AveragePool (Inception's pool branch,
    folded into the pool's pads), an edge Pad, a constant-value Pad of 1.5 and a crop (negative
    pads), each followed by a conv."""
    rng = np.random.default_rng(3)
    inits = [_const("w1", rng.standard_normal((8, 3, 3, 3)) * 0.3), _const("w2", rng.standard_normal((8, 8, 3, 3)) * 0.3),
             numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "p1"),
             numpy_helper.from_array(np.array([0, 0, 2, 0, 0, 0, 1, 3], np.int64), "p2"),
             numpy_helper.from_array(np.array([0, 0, 0, -1, 0, 0, -1, 0], np.int64), "crop"),
             _const("v", 1.5)]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"]),
        helper.make_node("Pad", ["c1", "p1"], ["pd1"]),
        helper.make_node("AveragePool", ["pd1"], ["ap"], kernel_shape=[3, 3]),
        helper.make_node("Pad", ["ap", "p2"], ["pd2"], mode="edge"),
        helper.make_node("Conv", ["pd2", "w2"], ["c2"]),
        helper.make_node("Pad", ["c2", "p1", "v"], ["pd3"]),
        helper.make_node("Pad", ["pd3", "crop"], ["pd4"]),
        helper.make_node("Conv", ["pd4", "w2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "pads", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8, None, None])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def test_pads_compile_once(tmp_path):
    path = str(tmp_path / "pads.onnx")
    make_pads(path)
    art = str(tmp_path / "pads.kiln")
    proc = run_kiln(["compile", path, "-o", art])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for i, shape in enumerate([(1, 3, 16, 16), (2, 3, 9, 23), (1, 3, 5, 7)]):
        feed = _feed(shape, 21 + i)
        np.savez(tmp_path / "in.npz", **feed)
        got, _ = kiln_run_model(art, str(tmp_path / "in.npz"), str(tmp_path / f"out{i}"), extra=["--repeat", "1"])
        assert_matches_ort(got, ort_outputs(path, feed), f"pads {shape}", rtol=1e-4, atol=1e-5)


def test_declared_dim_ranges_refuse_sizes_outside_them(cnn, tmp_path):
    """`--dim-range` on `kiln compile` (kept in the artifact, checked by the runtime alone) and on
    `kiln run` (a session): a size inside runs and matches ONNX Runtime, one outside is an error
    naming the input, the axis, the dim and the range."""
    art = str(tmp_path / "ranged.kiln")
    proc = run_kiln(["compile", cnn, "-o", art, "--dim-range", "h=16..48", "--dim-range", "n=1..2"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    feed = _feed((2, 3, 48, 20), 4)
    np.savez(tmp_path / "in.npz", **feed)
    got, _ = kiln_run_model(art, str(tmp_path / "in.npz"), str(tmp_path / "out"), extra=["--repeat", "1"])
    assert_matches_ort(got, ort_outputs(cnn, feed), "ranged artifact", rtol=1e-4, atol=1e-5)
    np.savez(tmp_path / "tall.npz", **_feed((1, 3, 52, 20), 5))
    for model, extra in [(art, []), (cnn, ["--dim-range", "h=16..48", "--symbolic-shapes"]), (cnn, ["--dim-range", "h=16..48"])]:
        proc = run_kiln(["run", model, "--inputs", str(tmp_path / "tall.npz"), "--repeat", "1"] + extra)
        assert proc.returncode != 0, f"{model} {extra}: a height of 52 ran"
        err = proc.stdout + proc.stderr
        assert "input 'x' (axis 2): dimension 'h' is 52, outside its declared range 16..48" in err, err
    proc = run_kiln(["compile", cnn, "-o", str(tmp_path / "bad.kiln"), "--dim-range", "height=1..4"])
    assert proc.returncode != 0 and "no input has a symbolic dimension 'height'" in proc.stdout + proc.stderr


def make_bilinear_upsamples(path):
    """A U-Net decoder's upsamples: PyTorch's Upsample(scale_factor=2, mode="bilinear") as Resize
    linear with pytorch_half_pixel, then half_pixel at scale 3 along the width only, then
    asymmetric 2x, each followed by a conv (the blocked layout around them)."""
    rng = np.random.default_rng(4)
    inits = [_const("w1", rng.standard_normal((16, 3, 3, 3)) * 0.3), _const("w2", rng.standard_normal((16, 16, 1, 1)) * 0.3),
             _const("s2", [1, 1, 2, 2]), _const("s3", [1, 1, 1, 3]),
             numpy_helper.from_array(np.zeros(0, np.float32), "roi")]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Resize", ["c1", "roi", "s2"], ["u1"], mode="linear",
                         coordinate_transformation_mode="pytorch_half_pixel"),
        helper.make_node("Conv", ["u1", "w2"], ["c2"]),
        helper.make_node("Resize", ["c2", "roi", "s3"], ["u2"], mode="linear",
                         coordinate_transformation_mode="half_pixel"),
        helper.make_node("Conv", ["u2", "w2"], ["c3"]),
        helper.make_node("Resize", ["c3", "roi", "s2"], ["u3"], mode="linear",
                         coordinate_transformation_mode="asymmetric"),
        helper.make_node("Conv", ["u3", "w2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "bilinear", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 16, None, None])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def test_bilinear_upsamples_compile_once(tmp_path):
    path = str(tmp_path / "bilinear.onnx")
    make_bilinear_upsamples(path)
    art = str(tmp_path / "bilinear.kiln")
    proc = run_kiln(["compile", path, "-o", art])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for i, shape in enumerate([(1, 3, 16, 16), (2, 3, 9, 23), (1, 3, 2, 2)]):
        feed = _feed(shape, 31 + i)
        np.savez(tmp_path / "in.npz", **feed)
        got, _ = kiln_run_model(art, str(tmp_path / "in.npz"), str(tmp_path / f"out{i}"), extra=["--repeat", "1"])
        assert_matches_ort(got, ort_outputs(path, feed), f"bilinear {shape}", rtol=1e-4, atol=1e-5)


def make_plain_global_pools(path):
    """GlobalAveragePool over plain [n, c, h, w] (5 channels: no block divides them, so the
    layout pass leaves them NCHW) and over a [n, c, l]: rows of the last axis summed over
    vector lanes with a run-time tail, then the rows summed."""
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["y"]),
             helper.make_node("GlobalAveragePool", ["x3"], ["y3"])]
    graph = helper.make_graph(
        nodes, "plain_global_pools",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 5, "h", "w"]),
         helper.make_tensor_value_info("x3", TensorProto.FLOAT, ["n", 5, "l"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 5, 1, 1]),
         helper.make_tensor_value_info("y3", TensorProto.FLOAT, ["n", 5, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def test_plain_global_average_pools_compile_once(tmp_path):
    """Rows shorter than a vector, exactly one, with a tail, and several: one artifact against
    ONNX Runtime."""
    path = str(tmp_path / "gap.onnx")
    make_plain_global_pools(path)
    art = str(tmp_path / "gap.kiln")
    proc = run_kiln(["compile", path, "-o", art])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for i, shape in enumerate([(1, 5, 3, 7), (2, 5, 4, 16), (1, 5, 9, 37), (3, 5, 20, 64), (1, 5, 1, 1)]):
        rng = np.random.default_rng(31 + i)
        feed = {"x": rng.standard_normal(shape).astype(np.float32) + 1.0,
                "x3": rng.standard_normal((shape[0], 5, shape[2] * shape[3] + 1)).astype(np.float32)}
        np.savez(tmp_path / "in.npz", **feed)
        got, _ = kiln_run_model(art, str(tmp_path / "in.npz"), str(tmp_path / f"out{i}"), extra=["--repeat", "1"])
        assert_matches_ort(got, ort_outputs(path, feed), f"global pools {shape}", rtol=1e-5, atol=1e-5)
