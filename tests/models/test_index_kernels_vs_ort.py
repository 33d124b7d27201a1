"""TopK, CumSum and ScatterND, computed by the runtime's kernels (runtime/index_kernels.h), against
ONNX Runtime: largest and smallest, a middle axis, ties (the lower index first), only one of
TopK's outputs used, int64 and float data, long lines run in parallel with small and large k; exclusive and reverse sums; ScatterND without and
with reductions, repeated and negative indices; an index out of range is an error naming the
op. `kiln inspect` shows that the runtime kernel, not the generated O(n^2) one, runs."""
import os
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kiln_helpers import assert_matches_ort, kiln_run_model, ort_outputs, run_kiln  # noqa: E402

ELEM = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64}


def model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, ELEM[a.dtype], a.shape) for n, a in inputs],
                          [helper.make_tensor_value_info(n, t, None) for n, t in outputs], initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def check(tmp_path, m, feed, label, kernel):
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    npz = str(tmp_path / "in.npz")
    np.savez(npz, **feed)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    got, _ = kiln_run_model(path, npz, str(out))
    assert_matches_ort(got, ort_outputs(path, feed), label, rtol=1e-6, atol=1e-6)
    inspect = run_kiln(["inspect", path])
    assert f"extern kernel {kernel}" in inspect.stdout, f"{label}: {kernel} did not run"


@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("outputs", ["both", "values", "indices"])
def test_topk(tmp_path, largest, outputs):
    rng = np.random.default_rng(3)
    x = rng.integers(0, 20, size=(3, 50, 4)).astype(np.float32)  # many ties
    x[1, 7, 2] = np.nan
    k = numpy_helper.from_array(np.array([6], np.int64), "k")
    outs = {"both": [("v", TensorProto.FLOAT), ("i", TensorProto.INT64)], "values": [("v", TensorProto.FLOAT)],
            "indices": [("i", TensorProto.INT64)]}[outputs]
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, largest=largest)
    check(tmp_path, model([node], [("x", x)], outs, [k]), {"x": x}, f"topk largest={largest} {outputs}", "kiln_topk")


@pytest.mark.parametrize("k", [5, 40])  # the insertion buffer, partial_sort (k > 32)
def test_topk_long_lines_in_parallel(tmp_path, k):
    rng = np.random.default_rng(5)
    x = rng.integers(0, 60, size=(64, 1000)).astype(np.float32)  # ties across the k-th place
    x[3, 500] = x[10, 0] = x[10, 999] = np.nan
    kt = numpy_helper.from_array(np.array([k], np.int64), "k")
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=-1)
    m = model([node], [("x", x)], [("v", TensorProto.FLOAT), ("i", TensorProto.INT64)], [kt])
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    npz = str(tmp_path / "in.npz")
    np.savez(npz, x=x)
    got, _ = kiln_run_model(path, npz, str(tmp_path), extra=["--threads", "2"])  # lines in parallel
    assert_matches_ort(got, ort_outputs(path, {"x": x}), f"topk k={k}", rtol=0, atol=0)


def test_topk_int64_last_axis(tmp_path):
    x = np.random.default_rng(4).integers(-1000, 1000, size=(8, 300)).astype(np.int64)
    k = numpy_helper.from_array(np.array([10], np.int64), "k")
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"])
    check(tmp_path, model([node], [("x", x)], [("v", TensorProto.INT64), ("i", TensorProto.INT64)], [k]),
          {"x": x}, "topk int64", "kiln_topk")


@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_cumsum(tmp_path, exclusive, reverse, dtype):
    x = (np.random.default_rng(5).standard_normal((4, 33, 5)) * 10).astype(dtype)
    axis = numpy_helper.from_array(np.array(-2, np.int64), "axis")
    node = helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)
    check(tmp_path, model([node], [("x", x)], [("y", ELEM[np.dtype(dtype)])], [axis]), {"x": x},
          f"cumsum {exclusive}{reverse} {dtype.__name__}", "kiln_cumsum")


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatternd(tmp_path, reduction):
    rng = np.random.default_rng(6)
    data = rng.standard_normal((10, 6, 3)).astype(np.float32)
    # Repeated rows only where a reduction makes the order irrelevant; a negative index.
    rows = [[1, 2], [-1, 0], [3, 5], [1, 2]] if reduction != "none" else [[1, 2], [-1, 0], [3, 5]]
    ind = numpy_helper.from_array(np.array(rows, np.int64), "ind")
    upd = rng.standard_normal((len(rows), 3)).astype(np.float32)
    node = helper.make_node("ScatterND", ["data", "ind", "upd"], ["y"], reduction=reduction)
    check(tmp_path, model([node], [("data", data), ("upd", upd)], [("y", TensorProto.FLOAT)], [ind]),
          {"data": data, "upd": upd}, f"scatternd {reduction}", "kiln_scatternd")


def test_scatternd_index_out_of_range_names_the_op(tmp_path):
    data = np.zeros((4, 3), np.float32)
    upd = np.ones((1, 3), np.float32)
    ind = np.array([[4]], np.int64)  # axis 0 has 4 rows
    node = helper.make_node("ScatterND", ["data", "ind", "upd"], ["y"])
    m = model([node], [("data", data), ("ind", ind), ("upd", upd)], [("y", TensorProto.FLOAT)])
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    npz = str(tmp_path / "in.npz")
    np.savez(npz, data=data, ind=ind, upd=upd)
    proc = run_kiln(["run", path, "--inputs", npz, "--repeat", "1"])
    assert proc.returncode != 0
    assert "ScatterND" in proc.stderr and "out of range" in proc.stderr, proc.stderr
