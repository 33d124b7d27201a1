"""Resize in nearest mode against ONNX Runtime and the ONNX reference implementation
(onnx.reference), for the sizes where Kiln computes the picked index with integer arithmetic (an
integer up- or downsampling: floor(x * in / out)) and for sizes where it keeps the
double-precision coordinate (1.5x, 0.6x), under every coordinate transform and nearest_mode.
Nearest copies values, so the outputs must be equal, not close. Kiln follows the reference's
double-precision coordinates; ORT computes them in float and picks another pixel where the
coordinate lands within float rounding of an integer (floor mode, 10 -> 6 with half_pixel:
4.5 / 0.6 - 0.5 is 7 + 1e-15 in double, 7 - 5e-7 in float): there Kiln must equal the reference,
everywhere else both."""
import os
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kiln_helpers import kiln_run_model, ort_outputs  # noqa: E402

CTMS = ["half_pixel", "asymmetric", "align_corners"]
MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
# (input H, W) -> output sizes: 2x and 3x up, 2x down (integer arithmetic where the mapping is
# floor(x * in / out)), 0.6x down (the coordinate in double). Kernels whose index arithmetic
# comes out alike are compiled once, which keeps the integer cases cheap.
SIZES = [((7, 10), (14, 30)), ((12, 10), (6, 5)), ((10, 10), (6, 6))]


def resize_model(h, w, oh, ow):
    """One Resize per (coordinate transform, nearest_mode), output y_<ctm>_<mode>."""
    sizes = helper.make_tensor("sizes", TensorProto.INT64, [4], [2, 3, oh, ow])
    nodes, outputs = [], []
    for ctm in CTMS:
        for mode in MODES:
            name = f"y_{ctm}_{mode}"
            nodes.append(helper.make_node("Resize", ["x", "", "", "sizes"], [name], mode="nearest",
                                          coordinate_transformation_mode=ctm, nearest_mode=mode))
            outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, h, w])],
                              outputs, initializer=[sizes])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0][0]}x{s[0][1]}to{s[1][0]}x{s[1][1]}")
def test_nearest_matches_reference_and_ort(tmp_path, size):
    (h, w), (oh, ow) = size
    model = resize_model(h, w, oh, ow)
    path = str(tmp_path / "resize.onnx")
    onnx.save(model, path)
    feed = {"x": np.arange(2 * 3 * h * w, dtype=np.float32).reshape(2, 3, h, w)}
    npz = str(tmp_path / "in.npz")
    np.savez(npz, **feed)
    got, _ = kiln_run_model(path, npz, str(tmp_path))
    names = [o.name for o in model.graph.output]
    refs = dict(zip(names, ReferenceEvaluator(model).run(None, feed)))
    orts = ort_outputs(path, feed)
    integer_scale = (oh % h == 0 or h % oh == 0) and (ow % w == 0 or w % ow == 0)
    for name in names:
        label = f"{name} {h}x{w} -> {oh}x{ow}"
        np.testing.assert_array_equal(got[name], refs[name], err_msg=label + " vs onnx.reference")
        agree = orts[name] == refs[name]
        np.testing.assert_array_equal(got[name][agree], orts[name][agree], err_msg=label + " vs ONNX Runtime")
        if integer_scale:
            assert agree.all(), f"{label}: ORT and the reference disagree on an integer scale"
