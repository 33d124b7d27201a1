"""The ops whose kernels issue 24's cliff sweep (bench/cliffs_ops.py) rescheduled, against ONNX
Runtime, on the shapes that take each path and its fallback:
- MaxPool as separable clamped passes (op/pool_compute.h separable_max_pool): stride 2 with
  pads, ceil_mode, stride 1, asymmetric pads, 1-D and 3-D, uint8; the padded-copy fallback
  (dilation, a kernel wider than 16) and the Indices output;
- GlobalAveragePool / GlobalMaxPool in the flat lane form (planes with a tail, a 3-D plane,
  planes too short for lanes);
- Softmax / LogSoftmax / Hardmax over a leading axis (the column schedule) and short axes;
- InstanceNormalization and GroupNormalization sums in the flat lane form, and the short plain
  form;
- Tile as a strided row copy: tiled last axis, tiled leading axis, an untiled last axis, a
  last axis too short to vectorize;
- Resize linear / cubic from per-axis tap tables: 2x, align_corners, downscales, antialias,
  3-D;
- Transpose moving the contiguous axis, in blocks: 3-D, NCHW -> NHWC, extents that leave
  tails, rows too short for the blocks.

One model holds every case (one compile, one `kiln run`), at 1 and 2 threads."""
import os
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kiln_helpers import assert_matches_ort, kiln_run_model, ort_outputs  # noqa: E402

F, U8 = TensorProto.FLOAT, TensorProto.UINT8


def _cases():
    """(name, nodes builder(input, output) -> nodes, input shape, input type)."""
    def mp(**kw):
        return lambda x, y: [helper.make_node("MaxPool", [x], [y], **kw)]

    def op(name, **kw):
        return lambda x, y: [helper.make_node(name, [x], [y], **kw)]

    return [
        ("mp_3x3_s2_p1", mp(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), [1, 8, 30, 36], F),
        ("mp_3x3_s2_ceil", mp(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1), [2, 5, 27, 31], F),
        ("mp_3x3_s1_p1", mp(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]), [1, 6, 17, 40], F),
        ("mp_2x2_s2", mp(kernel_shape=[2, 2], strides=[2, 2]), [1, 4, 20, 34], F),
        ("mp_asym_pads", mp(kernel_shape=[3, 2], strides=[2, 1], pads=[0, 1, 2, 0]), [1, 3, 19, 23], F),
        ("mp_5x5_s3_p2", mp(kernel_shape=[5, 5], strides=[3, 3], pads=[2, 2, 2, 2]), [1, 3, 25, 40], F),
        ("mp_1d", mp(kernel_shape=[3], strides=[2], pads=[1, 1]), [2, 4, 101], F),
        ("mp_3d", mp(kernel_shape=[2, 3, 3], strides=[2, 2, 2], pads=[0, 1, 1, 0, 1, 1]), [1, 3, 6, 14, 18], F),
        ("mp_uint8", mp(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), [1, 4, 21, 33], U8),
        ("mp_dilated", mp(kernel_shape=[3, 3], dilations=[2, 2], pads=[2, 2, 2, 2]), [1, 3, 17, 19], F),
        ("mp_wide_17", mp(kernel_shape=[1, 17], strides=[1, 4]), [1, 2, 5, 70], F),
        ("gap_7x7", op("GlobalAveragePool"), [2, 96, 7, 7], F),
        ("gap_28x28", op("GlobalAveragePool"), [1, 40, 28, 28], F),
        ("gap_3d", op("GlobalAveragePool"), [1, 6, 4, 9, 11], F),
        ("gap_2x3_short", op("GlobalAveragePool"), [1, 5, 2, 3], F),
        ("gmp_13x13", op("GlobalMaxPool"), [1, 33, 13, 13], F),
        ("softmax_axis1", op("Softmax", axis=1), [2, 300, 56], F),
        ("softmax_axis0", op("Softmax", axis=0), [50, 3, 37], F),
        ("softmax_axis1_short", op("Softmax", axis=1), [3, 7, 5], F),
        ("logsoftmax_axis1", op("LogSoftmax", axis=1), [2, 200, 40], F),
        ("hardmax_axis1", op("Hardmax", axis=1), [2, 31, 20], F),
        ("tile_hw", op_tile([1, 1, 2, 2]), [1, 16, 28, 28], F),
        ("tile_mixed", op_tile([2, 1, 3, 2]), [2, 3, 5, 7], F),
        ("tile_leading", op_tile([3, 2, 1]), [2, 5, 33], F),
        ("tile_short_last", op_tile([2, 3]), [5, 2], F),
        ("resize_linear_2x", op_resize([1, 1, 2, 2], mode="linear"), [1, 8, 28, 30], F),
        ("resize_linear_align", op_resize([1, 1, 1.5, 2.5], mode="linear",
                                          coordinate_transformation_mode="align_corners"), [2, 3, 10, 14], F),
        ("resize_linear_down", op_resize([1, 1, 0.6, 0.5], mode="linear",
                                         coordinate_transformation_mode="asymmetric"), [1, 4, 25, 40], F),
        ("resize_linear_antialias", op_resize([1, 1, 0.5, 0.25], mode="linear", antialias=1), [1, 3, 24, 64], F),
        ("resize_cubic_2x", op_resize([1, 1, 2, 2], mode="cubic"), [1, 3, 9, 21], F),
        ("resize_linear_3d", op_resize([1, 1, 2, 2, 2], mode="linear"), [1, 2, 4, 6, 20], F),
        ("transpose_201", op("Transpose", perm=[2, 0, 1]), [64, 128, 96], F),
        ("transpose_nchw_nhwc", op("Transpose", perm=[0, 2, 3, 1]), [2, 24, 10, 50], F),
        ("transpose_210_tails", op("Transpose", perm=[2, 1, 0]), [37, 5, 41], F),
        ("transpose_short_rows", op("Transpose", perm=[2, 1, 0]), [3, 20, 3], F),
        # Batch 1: the q blocks share the parallel loop with the one outer row (MLP-Mixer's tokens).
        ("transpose_batch1_tokens", op("Transpose", perm=[0, 2, 1]), [1, 196, 512], F),
        ("transpose_batch1_tail", op("Transpose", perm=[0, 2, 1]), [1, 37, 120], F),
    ]


def op_resize(scales, **kw):
    def build(x, y):
        sc = y + "_scales"
        return [helper.make_node("Constant", [], [sc], value=numpy_helper.from_array(np.array(scales, np.float32), sc)),
                helper.make_node("Resize", [x, "", sc], [y], **kw)]
    return build


def op_tile(reps):
    def build(x, y):
        r = y + "_reps"
        return [helper.make_node("Constant", [], [r], value=numpy_helper.from_array(np.array(reps, np.int64), r)),
                helper.make_node("Tile", [x, r], [y])]
    return build


def _norm_cases():
    """(name, op, input shape, param length, attrs)."""
    return [
        ("instnorm_56", "InstanceNormalization", [1, 16, 56, 56], 16, {}),
        ("instnorm_tail", "InstanceNormalization", [2, 8, 15, 17], 8, {"epsilon": 1e-3}),
        ("instnorm_short", "InstanceNormalization", [1, 4, 3, 3], 4, {}),
        ("groupnorm_4", "GroupNormalization", [2, 12, 9, 10], 12, {"num_groups": 4}),
    ]


def _model(rng):
    nodes, inputs, outputs, feed = [], [], [], {}
    for name, build, shape, ty in _cases():
        x = name + "_x"
        inputs.append(helper.make_tensor_value_info(x, ty, shape))
        outputs.append(helper.make_tensor_value_info(name, ty, None))
        nodes += build(x, name)
        if ty == U8:
            feed[x] = rng.randint(0, 256, shape).astype(np.uint8)
        else:
            feed[x] = (rng.randn(*shape) * 3).astype(np.float32)
    inits = []
    for name, op, shape, c, attrs in _norm_cases():
        x = name + "_x"
        inputs.append(helper.make_tensor_value_info(x, F, shape))
        outputs.append(helper.make_tensor_value_info(name, F, None))
        inits += [numpy_helper.from_array(rng.rand(c).astype(np.float32) + 0.5, name + "_s"),
                  numpy_helper.from_array(rng.randn(c).astype(np.float32), name + "_b")]
        nodes.append(helper.make_node(op, [x, name + "_s", name + "_b"], [name], **attrs))
        # An offset mean: a one-pass E[x^2] - E[x]^2 would lose digits here, the two passes not.
        feed[x] = (rng.randn(*shape) + 20).astype(np.float32)
    # The Indices output keeps the padded-copy MaxPool.
    inputs.append(helper.make_tensor_value_info("mpi_x", F, [1, 3, 15, 15]))
    feed["mpi_x"] = rng.randn(1, 3, 15, 15).astype(np.float32)
    nodes.append(helper.make_node("MaxPool", ["mpi_x"], ["mpi_y", "mpi_i"], kernel_shape=[3, 3], strides=[2, 2],
                                  pads=[1, 1, 1, 1]))
    outputs += [helper.make_tensor_value_info("mpi_y", F, None), helper.make_tensor_value_info("mpi_i", TensorProto.INT64, None)]
    graph = helper.make_graph(nodes, "cliff_ops", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model, feed


@pytest.mark.parametrize("threads", [1, 2])
def test_cliff_ops_match_ort(tmp_path, threads):
    model, feed = _model(np.random.RandomState(7))
    path = str(tmp_path / "cliff_ops.onnx")
    onnx.save(model, path)
    npz = str(tmp_path / "in.npz")
    np.savez(npz, **feed)
    got, _ = kiln_run_model(path, npz, str(tmp_path), extra=["--threads", str(threads)])
    want = ort_outputs(path, feed, threads)
    norms = {name: _norm_reference(model, feed, name, attrs) for name, _, _, _, attrs in _norm_cases()}
    for name in norms:
        del want[name]
    assert_matches_ort(got, want, f"cliff ops, {threads} threads", rtol=1e-5, atol=1e-5)
    # ORT's GroupNormalization loses ~1e-4 to the offset mean: the norms are held to float64 numpy.
    for name, ref in norms.items():
        np.testing.assert_allclose(got[name], ref, rtol=2e-5, atol=2e-5, err_msg=name)


def _norm_reference(model, feed, name, attrs):
    x = feed[name + "_x"].astype(np.float64)
    inits = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in model.graph.initializer}
    scale, bias = inits[name + "_s"], inits[name + "_b"]
    groups = attrs.get("num_groups", x.shape[1])
    xg = x.reshape(x.shape[0], groups, -1)
    mean, var = xg.mean(-1, keepdims=True), xg.var(-1, keepdims=True)
    y = ((xg - mean) / np.sqrt(var + attrs.get("epsilon", 1e-5))).reshape(x.shape)
    bc = (1, -1) + (1,) * (x.ndim - 2)
    return (y * scale.reshape(bc) + bias.reshape(bc)).astype(np.float32)
