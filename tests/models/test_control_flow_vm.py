"""Models with If/Loop/Scan run by the VM (docs/control_flow.md), against ONNX Runtime and the
ONNX node tests' reference outputs; `kiln run` must say `executor vm`.

Covers: the ONNX node tests test_if, test_loop11, test_scan_sum, test_scan9_sum (their
expected outputs are the reference); a Loop whose body has several ops (MatMul, Add, Tanh, a scan
output) with M given and with an early exit; an If taking both branches; a Scan along axis 1 in
reverse; a Loop whose carried value grows (its body runs in the graph interpreter, still right);
an If inside a Loop reading values of two enclosing scopes (the body's `y`, named like the
Loop's own output, and a graph input); an If on a two-element condition is an error naming the
node.
"""
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from kiln_helpers import assert_matches_ort, kiln_run_model, ort_outputs

OPSET = 17
NODE_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")


def run_vm(tmp_path, model, feed, tag="m"):
    path = str(tmp_path / f"{tag}.onnx")
    if isinstance(model, str):
        path = model
    else:
        onnx.save(model, path)
    npz = str(tmp_path / f"{tag}.npz")
    np.savez(npz, **feed)
    out_dir = tmp_path / f"out_{tag}"
    out_dir.mkdir()
    got, proc = kiln_run_model(path, npz, str(out_dir), extra=["--repeat", "2"])
    assert "executor vm" in proc.stdout, proc.stdout
    return got, path


@pytest.mark.parametrize("name", ["test_if", "test_loop11", "test_scan_sum", "test_scan9_sum"])
def test_onnx_node_test_through_vm(tmp_path, name):
    case = os.path.join(NODE_DIR, name)
    if not os.path.isdir(case):
        pytest.skip(f"onnx has no node test {name}")
    model = onnx.load(os.path.join(case, "model.onnx"))
    data = os.path.join(case, "test_data_set_0")
    feed = {}
    for i, inp in enumerate(model.graph.input):
        t = onnx.TensorProto()
        with open(os.path.join(data, f"input_{i}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        feed[inp.name] = numpy_helper.to_array(t)
    got, path = run_vm(tmp_path, os.path.join(case, "model.onnx"), feed)
    for i, out in enumerate(model.graph.output):
        t = onnx.TensorProto()
        with open(os.path.join(data, f"output_{i}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        np.testing.assert_allclose(got[out.name], numpy_helper.to_array(t), rtol=1e-5, atol=1e-6)
    assert_matches_ort(got, ort_outputs(path, feed), name)


def rnn_loop(hidden, early_exit):
    """h_{i+1} = tanh(h_i W + x_i U + b), x_i = X[i]; scan output h per step; carried h.
    With early_exit the body's cond is sum(h) < limit (read from the graph input `limit`)."""
    rng = np.random.default_rng(1)
    w = (rng.standard_normal((hidden, hidden)) * 0.3).astype(np.float32)
    u = (rng.standard_normal((hidden, hidden)) * 0.3).astype(np.float32)
    b = (rng.standard_normal((1, hidden)) * 0.1).astype(np.float32)
    nodes = [
        helper.make_node("Gather", ["X", "i"], ["xi"], axis=0),
        helper.make_node("MatMul", ["h", "W"], ["hw"]),
        helper.make_node("MatMul", ["xi", "U"], ["xu"]),
        helper.make_node("Add", ["hw", "xu"], ["s"]),
        helper.make_node("Add", ["s", "B"], ["s2"]),
        helper.make_node("Tanh", ["s2"], ["h_out"]),
        helper.make_node("Identity", ["h_out"], ["h_scan"]),
    ]
    if early_exit:
        nodes += [helper.make_node("ReduceSum", ["h_out"], ["tot"], keepdims=0),
                  helper.make_node("Less", ["tot", "limit"], ["c_out"])]
    else:
        nodes += [helper.make_node("Identity", ["c"], ["c_out"])]
    body = helper.make_graph(
        nodes, "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, hidden])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_out", TensorProto.FLOAT, [1, hidden]),
         helper.make_tensor_value_info("h_scan", TensorProto.FLOAT, [1, hidden])])
    inputs = [helper.make_tensor_value_info("M", TensorProto.INT64, []),
              helper.make_tensor_value_info("h0", TensorProto.FLOAT, [1, hidden]),
              helper.make_tensor_value_info("X", TensorProto.FLOAT, ["T", 1, hidden])]
    if early_exit:
        inputs.append(helper.make_tensor_value_info("limit", TensorProto.FLOAT, []))
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["cond0"], value=helper.make_tensor("c0", TensorProto.BOOL, [], [True])),
         helper.make_node("Loop", ["M", "cond0", "h0"], ["h_final", "hs"], body=body),
         helper.make_node("Mul", ["h_final", "h_final"], ["h_sq"])],
        "rnn_loop", inputs,
        [helper.make_tensor_value_info("h_sq", TensorProto.FLOAT, [1, hidden]),
         helper.make_tensor_value_info("hs", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(w, "W"), numpy_helper.from_array(u, "U"),
                     numpy_helper.from_array(b, "B")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


@pytest.mark.parametrize("early_exit", [False, True])
def test_loop_with_several_ops_matches_ort(tmp_path, early_exit):
    hidden, steps = 16, 12
    rng = np.random.default_rng(2)
    feed = {"M": np.array(steps, np.int64),
            "h0": rng.standard_normal((1, hidden)).astype(np.float32),
            "X": rng.standard_normal((steps, 1, hidden)).astype(np.float32)}
    if early_exit:
        feed["limit"] = np.array(1.0, np.float32)
    model = rnn_loop(hidden, early_exit)
    got, path = run_vm(tmp_path, model, feed)
    ref = ort_outputs(path, feed)
    assert_matches_ort(got, ref, f"rnn loop early_exit={early_exit}")
    if early_exit:
        assert ref["hs"].shape[0] < steps, "the test's limit should stop the loop early"


def test_if_both_branches_match_ort(tmp_path):
    then_g = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "then", [],
                               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    else_g = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["y2"]), helper.make_node("Neg", ["y2"], ["y"])],
                               "else", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
         helper.make_node("Greater", ["s", "zero"], ["c"]),
         helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Sigmoid", ["y"], ["z"])],
        "if_model", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])],
        initializer=[numpy_helper.from_array(np.array(0, np.float32), "zero")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    for sign, tag in ((1.0, "pos"), (-1.0, "neg")):
        feed = {"x": (sign * np.abs(np.random.default_rng(3).standard_normal((2, 3)))).astype(np.float32)}
        got, path = run_vm(tmp_path, model, feed, tag)
        assert_matches_ort(got, ort_outputs(path, feed), f"If {tag}")


def test_scan_axis1_reversed_matches_ort(tmp_path):
    body = helper.make_graph(
        [helper.make_node("Add", ["acc", "xt"], ["acc_out"]), helper.make_node("Mul", ["acc_out", "xt"], ["y"])],
        "body",
        [helper.make_tensor_value_info("acc", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("xt", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    graph = helper.make_graph(
        [helper.make_node("Scan", ["init", "x"], ["final", "ys"], body=body, num_scan_inputs=1,
                          scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[1],
                          scan_output_directions=[1])],
        "scan_model",
        [helper.make_tensor_value_info("init", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])],
        [helper.make_tensor_value_info("final", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("ys", TensorProto.FLOAT, [3, 5])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    rng = np.random.default_rng(4)
    feed = {"init": rng.standard_normal(3).astype(np.float32), "x": rng.standard_normal((3, 5)).astype(np.float32)}
    got, path = run_vm(tmp_path, model, feed)
    assert_matches_ort(got, ort_outputs(path, feed), "Scan axis 1 reversed")


def test_loop_growing_carried_value_falls_back_and_matches_ort(tmp_path):
    """The body concatenates to its carried value: its shape changes every iteration, so the
    body runs in the graph interpreter, inside the VM program."""
    body = helper.make_graph(
        [helper.make_node("Concat", ["acc", "one"], ["acc_out"], axis=0), helper.make_node("Identity", ["c"], ["c_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, None)])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "x"], ["acc"], body=body)],
        "grow", [helper.make_tensor_value_info("M", TensorProto.INT64, []),
                 helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("acc", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.array([1.5], np.float32), "one")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    feed = {"M": np.array(4, np.int64), "x": np.array([3.0, 4.0], np.float32)}
    got, path = run_vm(tmp_path, model, feed)
    assert_matches_ort(got, ort_outputs(path, feed), "growing loop")


def test_if_with_a_two_element_condition_names_the_node(tmp_path):
    """A bad condition is an error naming the If node, not a crash."""
    branch = helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "b", [],
                               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], name="the_if", then_branch=branch, else_branch=branch)],
        "bad_if", [helper.make_tensor_value_info("c", TensorProto.BOOL, ["n"]), f32_info("x", [3])],
        [f32_info("y", [3])])
    path = str(tmp_path / "bad_if.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), path)
    np.savez(tmp_path / "in.npz", c=np.array([True, False]), x=np.ones(3, np.float32))
    from kiln_helpers import run_kiln
    proc = run_kiln(["run", path, "--inputs", str(tmp_path / "in.npz")])
    assert proc.returncode != 0, proc.stdout
    assert "the_if" in proc.stderr and "one element" in proc.stderr, proc.stderr


def f32_info(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def test_if_inside_a_loop_reading_two_scopes_matches_ort(tmp_path):
    """Loop body: an If on the parity of the iteration whose branches read `y` (the body's value)
    and `w` (a graph input, two scopes up); the branches compile inside the body's function."""
    even = helper.make_graph([helper.make_node("Add", ["y", "w"], ["z"])], "even", [], [f32_info("z", [4])])
    odd = helper.make_graph([helper.make_node("Mul", ["y", "w"], ["z2"]), helper.make_node("Neg", ["z2"], ["z"])],
                            "odd", [], [f32_info("z", [4])])
    body = helper.make_graph(
        [helper.make_node("Mod", ["i", "two"], ["r"]),
         helper.make_node("Equal", ["r", "zero"], ["is_even"]),
         helper.make_node("If", ["is_even"], ["z"], then_branch=even, else_branch=odd),
         helper.make_node("Tanh", ["z"], ["y_out"]),
         helper.make_node("Identity", ["c"], ["c_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c", TensorProto.BOOL, []), f32_info("y", [4])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), f32_info("y_out", [4]), f32_info("z", [4])],
        [numpy_helper.from_array(np.array(2, np.int64), "two"), numpy_helper.from_array(np.array(0, np.int64), "zero")])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "y0"], ["y", "zs"], body=body)], "nested",
        [helper.make_tensor_value_info("M", TensorProto.INT64, []), f32_info("y0", [4]), f32_info("w", [4])],
        [f32_info("y", [4]), helper.make_tensor_value_info("zs", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    rng = np.random.default_rng(6)
    feed = {"M": np.array(7, np.int64), "y0": rng.standard_normal(4).astype(np.float32),
            "w": rng.standard_normal(4).astype(np.float32)}
    got, path = run_vm(tmp_path, model, feed)
    assert_matches_ort(got, ort_outputs(path, feed), "If inside a Loop")
