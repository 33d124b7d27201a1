"""Run-time indices outside the axis they address are errors naming the node, the element and the
range (ONNX leaves them undefined; Kiln's generated kernels clamp them; ONNX Runtime refuses them),
and every index inside the axis (negative ones where the op allows them, a loss's ignore_index)
still gives ONNX Runtime's result: Gather (an embedding lookup), GatherElements, ScatterElements, GatherND,
SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss; static and symbolic compiles, and a compiled
artifact run by the runtime alone (runtime/index_check.h, compiler/index_checks.h).
"""
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from kiln_helpers import KILN_TIMEOUT_S, assert_matches_ort, kiln_bin, kiln_run_model, ort_outputs, run_kiln

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def save(tmp_path, name, nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    path = str(tmp_path / f"{name}.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def embedding(tmp_path, rows=10, symbolic=False):
    """y = table[ids]: the table an initializer of `rows` rows, the ids an input."""
    table = numpy_helper.from_array(np.random.default_rng(0).standard_normal((rows, 4)).astype(np.float32), "table")
    ids = helper.make_tensor_value_info("ids", I64, ["batch", "seq"] if symbolic else [2, 3])
    y = helper.make_tensor_value_info("y", F, ["batch", "seq", 4] if symbolic else [2, 3, 4])
    return save(tmp_path, "embedding", [helper.make_node("Gather", ["table", "ids"], ["y"], name="emb")], [ids], [y],
                [table])


def run(tmp_path, model, feed, extra=()):
    np.savez(tmp_path / "in.npz", **feed)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    return run_kiln(["run", model, "--inputs", tmp_path / "in.npz", "--output-dir", out] + list(extra))


def ort_refuses(model, feed):
    import onnxruntime as ort
    with pytest.raises(Exception):
        ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feed)


@pytest.mark.parametrize("symbolic", [False, True])
def test_gather_in_range_matches_ort_and_out_of_range_is_an_error(tmp_path, symbolic):
    model = embedding(tmp_path, symbolic=symbolic)
    extra = ["--symbolic-shapes"] if symbolic else []
    good = {"ids": np.array([[0, 9, -1], [-10, 3, 4]], np.int64)}  # negatives count from the end
    np.savez(tmp_path / "good.npz", **good)
    outs, _ = kiln_run_model(model, str(tmp_path / "good.npz"), str(tmp_path), extra=extra)
    assert_matches_ort(outs, ort_outputs(model, good), "embedding")
    for bad, value in ((10, "10"), (-11, "-11")):
        feed = {"ids": np.array([[0, 1, 2], [3, bad, 4]], np.int64)}
        proc = run(tmp_path, model, feed, extra)
        assert proc.returncode != 0, proc.stdout
        assert f"node 'emb' (Gather): indices element 4 is {value}, outside [-10, 10)" in proc.stderr, proc.stderr
        ort_refuses(model, feed)


def test_a_symbolic_axis_is_checked_against_its_run_time_extent(tmp_path):
    """x[:, ids] with x [N, L], L symbolic: the bound is the run's L."""
    x = helper.make_tensor_value_info("x", F, ["N", "L"])
    ids = helper.make_tensor_value_info("ids", I64, [3])
    y = helper.make_tensor_value_info("y", F, ["N", 3])
    model = save(tmp_path, "columns", [helper.make_node("Gather", ["x", "ids"], ["y"], name="cols", axis=1)], [x, ids], [y])
    xs = np.arange(12, dtype=np.float32).reshape(2, 6)
    good = {"x": xs, "ids": np.array([5, 0, -6], np.int64)}
    np.savez(tmp_path / "good.npz", **good)
    outs, _ = kiln_run_model(model, str(tmp_path / "good.npz"), str(tmp_path), extra=["--symbolic-shapes"])
    assert_matches_ort(outs, ort_outputs(model, good), "columns")
    proc = run(tmp_path, model, {"x": xs, "ids": np.array([1, 6, 0], np.int64)}, ["--symbolic-shapes"])
    assert proc.returncode != 0 and "indices element 1 is 6, outside [-6, 6)" in proc.stderr, proc.stderr


def test_gather_elements_and_scatter_elements(tmp_path):
    data = helper.make_tensor_value_info("data", F, [3, 4])
    idx = helper.make_tensor_value_info("idx", I64, [3, 2])
    upd = helper.make_tensor_value_info("upd", F, [3, 2])
    ge = save(tmp_path, "ge", [helper.make_node("GatherElements", ["data", "idx"], ["y"], name="ge", axis=1)],
              [data, idx], [helper.make_tensor_value_info("y", F, [3, 2])])
    se = save(tmp_path, "se", [helper.make_node("ScatterElements", ["data", "idx", "upd"], ["y"], name="se", axis=1)],
              [data, idx, upd], [helper.make_tensor_value_info("y", F, [3, 4])])
    d = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    u = np.ones((3, 2), np.float32)
    good_idx = np.array([[0, 3], [-1, 1], [2, -4]], np.int64)
    for model, feed in ((ge, {"data": d, "idx": good_idx}), (se, {"data": d, "idx": good_idx, "upd": u})):
        np.savez(tmp_path / "good.npz", **feed)
        outs, _ = kiln_run_model(model, str(tmp_path / "good.npz"), str(tmp_path))
        assert_matches_ort(outs, ort_outputs(model, feed), os.path.basename(model))
        bad = dict(feed, idx=np.array([[0, 3], [4, 1], [2, 0]], np.int64))
        proc = run(tmp_path, model, bad)
        name = os.path.basename(model)[:-5]
        assert proc.returncode != 0 and f"node '{name}'" in proc.stderr and "element 2 is 4, outside [-4, 4)" in proc.stderr, \
            proc.stderr


def test_gather_nd_checks_each_index_against_its_own_axis(tmp_path):
    """indices [2, 2, 2] into data [2, 3, 5] with batch_dims 1: each pair is (row of 3, column of 5)."""
    data = helper.make_tensor_value_info("data", F, [2, 3, 5])
    idx = helper.make_tensor_value_info("idx", I64, [2, 2, 2])
    model = save(tmp_path, "gnd", [helper.make_node("GatherND", ["data", "idx"], ["y"], name="gnd", batch_dims=1)],
                 [data, idx], [helper.make_tensor_value_info("y", F, [2, 2])])
    d = np.random.default_rng(3).standard_normal((2, 3, 5)).astype(np.float32)
    good = {"data": d, "idx": np.array([[[2, 4], [0, -5]], [[-3, 1], [1, 3]]], np.int64)}
    np.savez(tmp_path / "good.npz", **good)
    outs, _ = kiln_run_model(model, str(tmp_path / "good.npz"), str(tmp_path))
    assert_matches_ort(outs, ort_outputs(model, good), "gnd")
    for bad, message in ((np.array([[[2, 4], [0, 0]], [[3, 1], [1, 3]]], np.int64), "element 4 is 3, outside [-3, 3)"),
                         (np.array([[[2, 5], [0, 0]], [[2, 1], [1, 3]]], np.int64), "element 1 is 5, outside [-5, 5)")):
        proc = run(tmp_path, model, {"data": d, "idx": bad})  # a row index of 3 is fine as a column, not as a row
        assert proc.returncode != 0 and f"node 'gnd' (GatherND): indices {message}" in proc.stderr, proc.stderr


@pytest.mark.parametrize("op", ["SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"])
def test_loss_targets_and_ignore_index(tmp_path, op):
    scores = helper.make_tensor_value_info("scores", F, [4, 5])
    target = helper.make_tensor_value_info("target", I64, [4])
    model = save(tmp_path, "loss", [helper.make_node(op, ["scores", "target"], ["loss"], name="loss", ignore_index=-1)],
                 [scores, target], [helper.make_tensor_value_info("loss", F, [])])
    s = np.random.default_rng(2).standard_normal((4, 5)).astype(np.float32)
    good = {"scores": s, "target": np.array([0, 4, -1, 2], np.int64)}  # -1: ignored
    np.savez(tmp_path / "good.npz", **good)
    outs, _ = kiln_run_model(model, str(tmp_path / "good.npz"), str(tmp_path))
    assert_matches_ort(outs, ort_outputs(model, good), op)
    for bad in (5, -2):  # no negative classes: only ignore_index itself is allowed
        proc = run(tmp_path, model, {"scores": s, "target": np.array([0, bad, 1, 2], np.int64)})
        assert proc.returncode != 0, proc.stdout
        assert f"node 'loss' ({op}): target element 1 is {bad}, outside [0, 5) (the axis it addresses has 5 entries; " \
               "ignore_index -1)" in proc.stderr, proc.stderr


def test_a_compiled_artifact_keeps_the_check(tmp_path):
    model = embedding(tmp_path)
    artifact = str(tmp_path / "emb.kiln")
    proc = run_kiln(["compile", model, "-o", artifact])
    assert proc.returncode == 0, proc.stderr
    runner = os.path.join(os.path.dirname(kiln_bin()), "kiln-run-artifact")
    for ids, ok in ((np.array([[0, 1, 2], [3, 4, 9]], np.int64), True), (np.array([[0, 1, 2], [3, 4, 12]], np.int64), False)):
        np.save(tmp_path / "ids.npy", ids)
        p = subprocess.run([runner, artifact, "--input", f"ids={tmp_path / 'ids.npy'}"], capture_output=True, text=True,
                           timeout=KILN_TIMEOUT_S)
        if ok:
            assert p.returncode == 0, p.stderr
        else:
            assert p.returncode != 0 and "indices element 5 is 12, outside [-10, 10)" in p.stderr, p.stdout + p.stderr
