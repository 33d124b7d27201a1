"""Models that run in Kiln's graph interpreter (control flow, data-dependent shapes), built here
with onnx.helper, run through `kiln run` and compared with ONNX Runtime on the same inputs.

Each model is one a user would write: a Loop with an early exit and scan outputs, an If whose
branches read an outer-scope value, NonZero feeding a gather, a Range whose length is computed
from the input data, and a Scan computing a running sum."""
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from kiln_helpers import assert_matches_ort, kiln_run_model, ort_outputs, run_kiln

OPSET = 17


def f32_info(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def scalar(name, elem, value):
    return helper.make_tensor(name, elem, [], [value])


def loop_with_early_exit():
    """y_final, ys = Loop(M=10, cond=True, y=x): y <- y * 1.5 + 1, scan out y; stop once
    sum(y) > limit. Trip count and exit depend on the data."""
    body = helper.make_graph(
        [
            helper.make_node("Mul", ["y_in", "k"], ["y_mul"]),
            helper.make_node("Add", ["y_mul", "one"], ["y_out"]),
            helper.make_node("ReduceSum", ["y_out"], ["s"], keepdims=0),
            helper.make_node("Less", ["s", "limit"], ["cond_out"]),
            helper.make_node("Identity", ["y_out"], ["scan_out"]),
        ],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         f32_info("y_in", [3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         f32_info("y_out", [3]), f32_info("scan_out", [3])],
        [scalar("k", TensorProto.FLOAT, 1.5), scalar("one", TensorProto.FLOAT, 1.0)],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "cond", "x"], ["y_final", "ys"], body=body)],
        "loop_model",
        [f32_info("x", [3]), f32_info("limit", [])],
        [f32_info("y_final", [3]), f32_info("ys", [None, 3])],
        [scalar("M", TensorProto.INT64, 10), scalar("cond", TensorProto.BOOL, True)],
    )
    return graph, lambda rng: {"x": rng.uniform(-1, 1, 3).astype(np.float32),
                               "limit": np.array(rng.uniform(5, 40), np.float32)}


def if_reading_outer_value():
    """t = x * 2 (outer); If(sum(x) > 0) then t * t else t - 1."""
    then_g = helper.make_graph([helper.make_node("Mul", ["t", "t"], ["r1"])], "then", [],
                               [f32_info("r1", [2, 3])])
    else_g = helper.make_graph([helper.make_node("Sub", ["t", "one"], ["r2"])], "else", [],
                               [f32_info("r2", [2, 3])])
    graph = helper.make_graph(
        [
            helper.make_node("Add", ["x", "x"], ["t"]),
            helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
            helper.make_node("Greater", ["s", "zero"], ["c"]),
            helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g),
        ],
        "if_model",
        [f32_info("x", [2, 3])],
        [f32_info("y", [2, 3])],
        [scalar("zero", TensorProto.FLOAT, 0.0), scalar("one", TensorProto.FLOAT, 1.0)],
    )
    return graph, lambda rng: {"x": rng.uniform(-1, 1, (2, 3)).astype(np.float32)}


def nonzero_gather():
    """values = GatherND(x, Transpose(NonZero(x > 0.2))): the positive entries, data-dependent
    count; plus their count as a second output."""
    graph = helper.make_graph(
        [
            helper.make_node("Greater", ["x", "thr"], ["mask"]),
            helper.make_node("NonZero", ["mask"], ["nz"]),
            helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
            helper.make_node("GatherND", ["x", "idx"], ["values"]),
            helper.make_node("Shape", ["values"], ["count"]),
        ],
        "nonzero_model",
        [f32_info("x", [4, 5])],
        [f32_info("values", [None]), helper.make_tensor_value_info("count", TensorProto.INT64, [1])],
        [scalar("thr", TensorProto.FLOAT, 0.2)],
    )
    return graph, lambda rng: {"x": rng.uniform(-1, 1, (4, 5)).astype(np.float32)}


def range_from_data():
    """r = Range(0, floor(max(x)) , 1) as float, then r * 2 + Sum(x): a Range whose length is
    computed from the input's values."""
    graph = helper.make_graph(
        [
            helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0),
            helper.make_node("Floor", ["m"], ["limit"]),
            helper.make_node("Range", ["zero", "limit", "one"], ["r"]),
            helper.make_node("Mul", ["r", "two"], ["r2"]),
            helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
            helper.make_node("Add", ["r2", "s"], ["y"]),
        ],
        "range_model",
        [f32_info("x", [6])],
        [f32_info("y", [None])],
        [scalar("zero", TensorProto.FLOAT, 0.0), scalar("one", TensorProto.FLOAT, 1.0),
         scalar("two", TensorProto.FLOAT, 2.0)],
    )
    return graph, lambda rng: {"x": rng.uniform(0, 9, 6).astype(np.float32)}


def scan_running_sum():
    """Scan over the rows of x: state <- state + row, scan out state (a cumulative sum)."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "row"], ["s_out"]),
         helper.make_node("Identity", ["s_out"], ["scan_out"])],
        "scan_body",
        [f32_info("s_in", [4]), f32_info("row", [4])],
        [f32_info("s_out", [4]), f32_info("scan_out", [4])],
    )
    graph = helper.make_graph(
        [helper.make_node("Scan", ["init", "x"], ["final", "cumsum"], body=body, num_scan_inputs=1)],
        "scan_model",
        [f32_info("init", [4]), f32_info("x", [5, 4])],
        [f32_info("final", [4]), f32_info("cumsum", [5, 4])],
    )
    return graph, lambda rng: {"init": rng.uniform(-1, 1, 4).astype(np.float32),
                               "x": rng.uniform(-1, 1, (5, 4)).astype(np.float32)}


MODELS = {
    "loop_with_early_exit": loop_with_early_exit,
    "if_reading_outer_value": if_reading_outer_value,
    "nonzero_gather": nonzero_gather,
    "range_from_data": range_from_data,
    "scan_running_sum": scan_running_sum,
}


@pytest.mark.parametrize("name", list(MODELS))
def test_interpreted_model_matches_ort(tmp_path, name):
    graph, make_inputs = MODELS[name]()
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.checker.check_model(model, full_check=True)
    path = str(tmp_path / f"{name}.onnx")
    onnx.save(model, path)
    rng = np.random.default_rng(7)
    for trial in range(3):  # different data: different trip counts, branches, lengths
        feed = make_inputs(rng)
        npz = str(tmp_path / f"in{trial}.npz")
        np.savez(npz, **feed)
        out_dir = tmp_path / f"out{trial}"
        out_dir.mkdir()
        got, _ = kiln_run_model(path, npz, str(out_dir), extra=["--repeat", "1"])
        assert_matches_ort(got, ort_outputs(path, feed), f"{name} trial {trial}")


def test_inspect_says_the_model_is_interpreted(tmp_path):
    graph, _ = loop_with_early_exit()
    path = str(tmp_path / "loop.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), path)
    proc = run_kiln(["inspect", path, "--kernels"])
    assert proc.returncode == 0, proc.stderr
    assert "graph interpreter" in proc.stdout and "Loop" in proc.stdout, proc.stdout


def test_string_model_matches_ort(tmp_path):
    """Strings in and out through .npy files (numpy unicode arrays): StringConcat with a constant
    suffix, RegexFullMatch on the result, StringSplit on the input."""
    suffix = helper.make_tensor("suffix", TensorProto.STRING, [], [b"@kiln.dev"])
    graph = helper.make_graph(
        [
            helper.make_node("StringConcat", ["x", "suffix"], ["email"]),
            helper.make_node("RegexFullMatch", ["email"], ["valid"], pattern=r"[a-z]+@[a-z]+\.dev"),
            helper.make_node("StringSplit", ["x"], ["parts", "counts"], delimiter="-"),
        ],
        "strings",
        [helper.make_tensor_value_info("x", TensorProto.STRING, [4])],
        [helper.make_tensor_value_info("email", TensorProto.STRING, [4]),
         helper.make_tensor_value_info("valid", TensorProto.BOOL, [4]),
         helper.make_tensor_value_info("parts", TensorProto.STRING, [4, None]),
         helper.make_tensor_value_info("counts", TensorProto.INT64, [4])],
        [suffix],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    onnx.checker.check_model(model, full_check=True)
    path = str(tmp_path / "strings.onnx")
    onnx.save(model, path)
    proc = run_kiln(["inspect", path])  # string constants print in the IR text
    assert proc.returncode == 0 and '["@kiln.dev"]' in proc.stdout, proc.stdout + proc.stderr
    x = np.array(["ada", "grace-hopper", "x-y-", "\u00e9t\u00e9"])
    np.savez(str(tmp_path / "in.npz"), x=x)
    (tmp_path / "out").mkdir()
    got, _ = kiln_run_model(path, str(tmp_path / "in.npz"), str(tmp_path / "out"), extra=["--repeat", "1"])
    want = ort_outputs(path, {"x": x.astype(object)})
    for name, ref in want.items():
        ref = np.asarray(ref)
        if ref.dtype == object:
            ref = ref.astype(str)
        assert got[name].shape == ref.shape, name
        np.testing.assert_array_equal(got[name], ref, err_msg=name)
