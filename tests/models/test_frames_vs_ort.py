"""If and Loop lowered to TF1 frames (`kiln run --control-flow frames`) against ONNX Runtime.

Models built here with onnx.helper: a for-loop (trip count), a while-loop (cond only) whose
body computes its next cond, an If on an input (both branches), a Loop whose body holds an If
(a dead branch in every iteration), a nested Loop reading the outer iteration number, a trip
count given as an input, an If passing an outer value or a constant on, and scan outputs. Each
runs with 1 and 2 inter-op threads; outputs must match ORT, and the two thread counts must agree
bitwise.
"""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from kiln_helpers import assert_matches_ort, kiln_run_model, ort_outputs, run_kiln

F = TensorProto.FLOAT


def vec(name, n=6):
    return helper.make_tensor_value_info(name, F, [n])


def scalar(name, elem):
    return helper.make_tensor_value_info(name, elem, [])


def const(name, elem, value):
    return helper.make_tensor(name, elem, [], [value])


def body_inputs(prefix):
    return [scalar(prefix + "i", TensorProto.INT64), scalar(prefix + "c", TensorProto.BOOL), vec(prefix + "y")]


def affine_nodes(p, extra_add=None):
    """y * 0.5 + float(i) [+ float(extra_add)] -> p + 'out'."""
    nodes = [helper.make_node("Cast", [p + "i"], [p + "fi"], to=F),
             helper.make_node("Mul", [p + "y", p + "half"], [p + "m"]),
             helper.make_node("Add", [p + "m", p + "fi"], [p + "a"])]
    last = p + "a"
    if extra_add:
        nodes += [helper.make_node("Cast", [extra_add], [p + "fx"], to=F),
                  helper.make_node("Add", [last, p + "fx"], [p + "a2"])]
        last = p + "a2"
    nodes.append(helper.make_node("Identity", [last], [p + "out"]))
    return nodes


def model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "frames", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def for_loop():
    body = helper.make_graph(affine_nodes("b_") + [helper.make_node("Identity", ["b_c"], ["b_co"])], "body",
                             body_inputs("b_"), [scalar("b_co", TensorProto.BOOL), vec("b_out")],
                             [const("b_half", F, 0.5)])
    return model([helper.make_node("Loop", ["M", "cond", "x"], ["y"], body=body, name="for")],
                 [vec("x")], [vec("y")], [const("M", TensorProto.INT64, 7), const("cond", TensorProto.BOOL, True)])


def for_loop_no_cond():
    # M only: the body's cond_in is true. (A false cond output: the spec's for-loop ignores it, as
    # Kiln does, where ORT stops; not compared here.)
    body = helper.make_graph(affine_nodes("u_") + [helper.make_node("Identity", ["u_c"], ["u_co"])], "body",
                             body_inputs("u_"), [scalar("u_co", TensorProto.BOOL), vec("u_out")],
                             [const("u_half", F, 0.5)])
    return model([helper.make_node("Loop", ["M", "", "x"], ["y"], body=body, name="for_no_cond")],
                 [vec("x")], [vec("y")], [const("M", TensorProto.INT64, 4)])


def while_loop():
    # while sum(y) < limit: y = y * 2 + 1 (the body computes its next cond)
    nodes = [helper.make_node("Mul", ["w_y", "w_two"], ["w_m"]), helper.make_node("Add", ["w_m", "w_one"], ["w_out"]),
             helper.make_node("ReduceSum", ["w_out"], ["w_s"], keepdims=0),
             helper.make_node("Less", ["w_s", "w_limit"], ["w_co"])]
    body = helper.make_graph(nodes, "body", body_inputs("w_"), [scalar("w_co", TensorProto.BOOL), vec("w_out")],
                             [const("w_two", F, 2.0), const("w_one", F, 1.0), const("w_limit", F, 500.0)])
    return model([helper.make_node("Loop", ["", "cond", "x"], ["y"], body=body, name="while")],
                 [vec("x")], [vec("y")], [const("cond", TensorProto.BOOL, True)])


def branches(prefix, x):
    then_g = helper.make_graph([helper.make_node("Mul", [x, prefix + "three"], [prefix + "t"])], "then", [],
                               [vec(prefix + "t")], [const(prefix + "three", F, 3.0)])
    else_g = helper.make_graph([helper.make_node("Sub", [x, prefix + "four"], [prefix + "e"])], "else", [],
                               [vec(prefix + "e")], [const(prefix + "four", F, 4.0)])
    return then_g, else_g


def if_model():
    then_g, else_g = branches("if_", "x")
    return model([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="if")],
                 [vec("x"), scalar("c", TensorProto.BOOL)], [vec("y")])


def loop_with_if():
    # y = y * 3 if i is even else y - 4
    then_g, else_g = branches("li_", "l_y")
    nodes = [helper.make_node("Mod", ["l_i", "l_two"], ["l_r"]),
             helper.make_node("Equal", ["l_r", "l_zero"], ["l_even"]),
             helper.make_node("If", ["l_even"], ["l_out"], then_branch=then_g, else_branch=else_g, name="inner_if"),
             helper.make_node("Identity", ["l_c"], ["l_co"])]
    body = helper.make_graph(nodes, "body", body_inputs("l_"), [scalar("l_co", TensorProto.BOOL), vec("l_out")],
                             [const("l_two", TensorProto.INT64, 2), const("l_zero", TensorProto.INT64, 0)])
    return model([helper.make_node("Loop", ["M", "cond", "x"], ["y"], body=body, name="loop_if")],
                 [vec("x")], [vec("y")], [const("M", TensorProto.INT64, 5), const("cond", TensorProto.BOOL, True)])


def nested_loop():
    inner = helper.make_graph(affine_nodes("n_", extra_add="o_i") + [helper.make_node("Identity", ["n_c"], ["n_co"])],
                              "inner", body_inputs("n_"), [scalar("n_co", TensorProto.BOOL), vec("n_out")],
                              [const("n_half", F, 0.5)])
    outer = helper.make_graph([helper.make_node("Loop", ["o_M", "o_c", "o_y"], ["o_out"], body=inner, name="inner"),
                               helper.make_node("Identity", ["o_c"], ["o_co"])], "outer", body_inputs("o_"),
                              [scalar("o_co", TensorProto.BOOL), vec("o_out")], [const("o_M", TensorProto.INT64, 3)])
    return model([helper.make_node("Loop", ["M", "cond", "x"], ["y"], body=outer, name="outer")],
                 [vec("x")], [vec("y")], [const("M", TensorProto.INT64, 4), const("cond", TensorProto.BOOL, True)])


def loop_trip_from_input():
    # M and cond are graph inputs (run-time values: M enters the frame as a loop invariant)
    body = helper.make_graph(affine_nodes("t_") + [helper.make_node("Identity", ["t_c"], ["t_co"])], "body",
                             body_inputs("t_"), [scalar("t_co", TensorProto.BOOL), vec("t_out")],
                             [const("t_half", F, 0.5)])
    return model([helper.make_node("Loop", ["M", "cond", "x"], ["y"], body=body, name="trip_input")],
                 [vec("x"), scalar("M", TensorProto.INT64), scalar("cond", TensorProto.BOOL)], [vec("y")])


def if_passthrough():
    # then passes the outer x on (ORT wants an Identity), else returns a constant: both reach the
    # Merge through gating Switches
    then_g = helper.make_graph([helper.make_node("Identity", ["x"], ["xt"])], "then", [], [vec("xt")])
    else_g = helper.make_graph([], "else", [], [vec("k")],
                               [helper.make_tensor("k", F, [6], [7.0] * 6)])
    return model([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="pass")],
                 [vec("x"), scalar("c", TensorProto.BOOL)], [vec("y")])


def scan_loop(trips=5, cond_input=True):
    # carried y, plus two scan outputs: y itself ([M, 6]) and sum(y * i) ([M])
    nodes = affine_nodes("s_") + [helper.make_node("Identity", ["s_c"], ["s_co"]),
                                   helper.make_node("Cast", ["s_i"], ["s_fi2"], to=F),
                                   helper.make_node("Mul", ["s_out", "s_fi2"], ["s_w"]),
                                   helper.make_node("ReduceSum", ["s_w"], ["s_sum"], keepdims=0),
                                   helper.make_node("Identity", ["s_out"], ["s_scan"])]
    body = helper.make_graph(nodes, "body", body_inputs("s_"),
                             [scalar("s_co", TensorProto.BOOL), vec("s_out"), vec("s_scan"), scalar("s_sum", F)],
                             [const("s_half", F, 0.5)])
    loop_in = ["M", "cond" if cond_input else "", "x"]
    inits = [const("M", TensorProto.INT64, trips)] + ([const("cond", TensorProto.BOOL, True)] if cond_input else [])
    return model([helper.make_node("Loop", loop_in, ["y", "ys", "sums"], body=body, name="scanning")],
                 [vec("x")], [vec("y"), helper.make_tensor_value_info("ys", F, [trips, 6]),
                              helper.make_tensor_value_info("sums", F, [trips])], inits)


CASES = {
    "scan_outputs": (scan_loop, {}),
    "scan_outputs_no_cond": (lambda: scan_loop(4, cond_input=False), {}),
    "scan_outputs_zero_trips": (lambda: scan_loop(0), {}),
    "trip_from_input": (loop_trip_from_input, {"M": np.array(5, np.int64), "cond": np.array(True)}),
    "trip_from_input_zero": (loop_trip_from_input, {"M": np.array(0, np.int64), "cond": np.array(True)}),
    "if_passthrough_true": (if_passthrough, {"c": np.array(True)}),
    "if_passthrough_false": (if_passthrough, {"c": np.array(False)}),
    "for_loop": (for_loop, {}),
    "for_loop_no_cond": (for_loop_no_cond, {}),
    "while_loop": (while_loop, {}),
    "if_true": (if_model, {"c": np.array(True)}),
    "if_false": (if_model, {"c": np.array(False)}),
    "loop_with_if": (loop_with_if, {}),
    "nested_loop": (nested_loop, {}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_frames_match_ort(name, tmp_path):
    make, extra = CASES[name]
    path = str(tmp_path / f"{name}.onnx")
    onnx.save(make(), path)
    feed = {"x": np.linspace(-2, 3, 6).astype(np.float32), **extra}
    inputs = str(tmp_path / "inputs.npz")
    np.savez(inputs, **feed)
    want = ort_outputs(path, feed)
    names = sorted(want)
    runs = []
    for inter in (1, 2):
        outs, proc = kiln_run_model(path, inputs, str(tmp_path / f"out{inter}"),
                                    extra=["--control-flow", "frames", "--inter-op-threads", str(inter), "--repeat", "2"])
        assert "executor frames" in proc.stdout, proc.stdout
        assert_matches_ort(outs, want, f"{name} ({inter} inter-op threads)")
        runs.append([outs[k] for k in names])
    for k, a, b in zip(names, runs[0], runs[1]):
        assert a.tobytes() == b.tobytes(), f"{name}/{k}: 1 and 2 inter-op threads differ"


def test_frames_bind_symbolic_dims(tmp_path):
    # x: f32[N] with N given by --dim: the body (and its scan stacks) compile at N=6
    m = scan_loop()
    for vi in list(m.graph.input) + list(m.graph.output):
        dims = vi.type.tensor_type.shape.dim
        dims[len(dims) - 1].dim_param = "N"
    path = str(tmp_path / "symbolic.onnx")
    onnx.save(m, path)
    feed = {"x": np.linspace(-2, 3, 6).astype(np.float32)}
    inputs = str(tmp_path / "inputs.npz")
    np.savez(inputs, **feed)
    outs, _ = kiln_run_model(path, inputs, str(tmp_path / "out"), dims={"N": 6},
                             extra=["--control-flow", "frames", "--repeat", "1"])
    assert_matches_ort(outs, ort_outputs(path, feed), "symbolic N=6")


def test_frames_refuse_scan_outputs_of_a_data_dependent_length(tmp_path):
    body = helper.make_graph([helper.make_node("Less", ["d_i", "d_three"], ["d_co"]),
                              helper.make_node("Identity", ["d_y"], ["d_out"]),
                              helper.make_node("Identity", ["d_y"], ["d_scan"])], "body", body_inputs("d_"),
                             [scalar("d_co", TensorProto.BOOL), vec("d_out"), vec("d_scan")],
                             [const("d_three", TensorProto.INT64, 3)])
    m = model([helper.make_node("Loop", ["M", "cond", "x"], ["y", "scan"], body=body, name="early_exit")],
              [vec("x")], [vec("y"), helper.make_tensor_value_info("scan", F, [None, 6])],
              [const("M", TensorProto.INT64, 8), const("cond", TensorProto.BOOL, True)])
    path = str(tmp_path / "scan.onnx")
    onnx.save(m, path)
    proc = run_kiln(["run", path, "--control-flow", "frames", "--repeat", "1"])
    assert proc.returncode != 0
    assert "early_exit" in proc.stderr and "runs exactly its trip count" in proc.stderr, proc.stderr


