"""Tests of the `kiln` command-line program: argument handling, `run`, `inspect`, and the
output format and exit status of `test-onnx`.

Expected values are computed here with numpy (x + y), never taken from Kiln's own output.
The binary is $KILN_BIN, or <repo>/build/bin/kiln.
"""
import json
import os
import pathlib
import re
import subprocess

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
KILN = pathlib.Path(os.environ.get("KILN_BIN", REPO / "build" / "bin" / "kiln"))

pytestmark = pytest.mark.skipif(not KILN.is_file(), reason=f"kiln binary not built: {KILN}")


def kiln(*args, cwd=None, timeout=300):
    return subprocess.run([str(KILN), *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout)


# ---- model and test-directory builders --------------------------------------------------------

def binary_model(path, op="Add", shape=(2, 3)):
    """A one-node model z = op(x, y) with f32 inputs of `shape` (strings are symbolic dims)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, list(shape))
    graph = helper.make_graph([helper.make_node(op, ["x", "y"], ["z"])], "g", [x, y], [z])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, str(path))


def inputs_2x3(seed=0, shape=(2, 3)):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape).astype(np.float32),
            rng.standard_normal(shape).astype(np.float32))


def node_test(dir_path, op="Add", corrupt=False, shape=(2, 3)):
    """An ONNX backend-style test directory: model.onnx + test_data_set_0/{input,output}_*.pb."""
    data = dir_path / "test_data_set_0"
    data.mkdir(parents=True)
    binary_model(dir_path / "model.onnx", op=op, shape=shape)
    x, y = inputs_2x3(shape=shape)
    expected = x + y
    if corrupt:
        expected.flat[4] += 1.0
    for name, arr in [("input_0", x), ("input_1", y), ("output_0", expected)]:
        (data / f"{name}.pb").write_bytes(numpy_helper.from_array(arr, name).SerializeToString())
    return dir_path


SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed, (\d+) unsupported$", re.M)


# ---- argument handling (no model needed) -------------------------------------------------------

def test_version():
    r = kiln("--version")
    assert r.returncode == 0
    assert r.stdout.strip() in ("kiln 0.1.0 (oneDNN kernels)", "kiln 0.1.0 (no oneDNN)")


def test_help_lists_subcommands():
    r = kiln("--help")
    assert r.returncode == 0
    for sub in ("run", "inspect", "test-onnx"):
        assert sub in r.stdout


def test_no_subcommand_is_usage_error():
    r = kiln()
    assert r.returncode == 2
    assert "Usage" in r.stdout + r.stderr


def test_unknown_subcommand_is_usage_error():
    r = kiln("frobnicate")
    assert r.returncode == 2


def test_run_without_model_prints_usage():
    r = kiln("run")
    assert r.returncode == 2
    out = r.stdout + r.stderr
    assert "Usage: kiln run" in out
    assert "model" in out


def test_run_missing_model_names_the_path(tmp_path):
    missing = tmp_path / "missing.onnx"
    r = kiln("run", missing)
    assert r.returncode == 1
    assert str(missing) in r.stderr
    assert r.stderr.startswith("error: ")


def test_malformed_name_value_options_are_usage_errors(tmp_path):
    model = tmp_path / "m.onnx"
    binary_model(model)
    assert kiln("run", model, "--input", "no_equals_sign").returncode == 2
    assert kiln("run", model, "--dim", "N=abc").returncode == 2
    assert kiln("run", model, "--repeat", "0").returncode == 2
    assert kiln("inspect", model, "--dim", "N").returncode == 2


def test_test_onnx_missing_directory(tmp_path):
    r = kiln("test-onnx", tmp_path / "nope")
    assert r.returncode == 1
    assert "nope" in r.stderr


def test_test_onnx_directory_without_tests(tmp_path):
    r = kiln("test-onnx", tmp_path)
    assert r.returncode == 1
    assert "no ONNX tests" in r.stderr


# ---- the whole stack ---------------------------------------------------------------------------

def test_run_writes_outputs_matching_numpy(tmp_path):
    model = tmp_path / "add.onnx"
    binary_model(model)
    x, y = inputs_2x3(seed=1)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    out_dir = tmp_path / "out"
    r = kiln("run", model, "--input", f"x={tmp_path / 'x.npy'}",
             "--input", f"y={tmp_path / 'y.npy'}", "--output-dir", out_dir, "--repeat", "3")
    assert r.returncode == 0, r.stderr
    assert "z: f32 [2,3]" in r.stdout
    compiled = r"^compiled \d+ kernels \(\d+ compiled, \d+ cached\) in \d+\.\d\d s$"
    assert re.search(compiled, r.stdout, re.M)
    assert re.search(r"^median \d+\.\d\d ms \(3 runs\)$", r.stdout, re.M)
    values = re.search(r"^  values: (.*)$", r.stdout, re.M).group(1)
    np.testing.assert_allclose([float(v) for v in values.split(", ")], (x + y).ravel(), rtol=1e-5)
    np.testing.assert_allclose(np.load(out_dir / "z.npy"), x + y, rtol=1e-6)


def test_run_timings_json_has_one_entry_per_timed_run(tmp_path):
    model = tmp_path / "add.onnx"
    binary_model(model)
    timings = tmp_path / "t.json"
    r = kiln("run", model, "--repeat", "4", "--timings-json", timings)
    assert r.returncode == 0, r.stderr
    t = json.loads(timings.read_text())
    assert len(t["runs_ms"]) == 4 and all(ms > 0 for ms in t["runs_ms"])
    assert t["load_ms"] > 0 and t["first_run_ms"] > 0 and t["compile_s"] >= 0
    median = float(re.search(r"^median (\d+\.\d\d) ms", r.stdout, re.M).group(1))
    assert abs(median - float(np.median(t["runs_ms"]))) <= 0.006


def test_run_npz_inputs_and_random_fill_are_seeded(tmp_path):
    model = tmp_path / "add.onnx"
    binary_model(model)
    x, _ = inputs_2x3(seed=2)
    np.savez(tmp_path / "in.npz", x=x)
    outs = []
    for i in range(2):
        d = tmp_path / f"out{i}"
        r = kiln("run", model, "--inputs", tmp_path / "in.npz", "--seed", "7", "--output-dir", d,
                 "--repeat", "1")
        assert r.returncode == 0, r.stderr
        outs.append(np.load(d / "z.npy"))
    np.testing.assert_array_equal(outs[0], outs[1])
    y = outs[0] - x  # the random y: uniform in [-1, 1)
    assert np.all(y >= -1.0 - 1e-6) and np.all(y < 1.0 + 1e-6)


def test_run_unknown_input_name_lists_model_inputs(tmp_path):
    model = tmp_path / "add.onnx"
    binary_model(model)
    np.save(tmp_path / "w.npy", np.zeros((2, 3), np.float32))
    r = kiln("run", model, "--input", f"w={tmp_path / 'w.npy'}")
    assert r.returncode == 1
    assert "'w'" in r.stderr and "x, y" in r.stderr


def test_run_symbolic_dimension_needs_dim(tmp_path):
    model = tmp_path / "sym.onnx"
    binary_model(model, shape=("N", 3))
    r = kiln("run", model)
    assert r.returncode == 1
    assert "input 'x' has symbolic dimension 'N': pass --dim N=VALUE" in r.stderr
    r = kiln("run", model, "--dim", "N=4", "--repeat", "1")
    assert r.returncode == 0, r.stderr
    assert "z: f32 [4,3]" in r.stdout


def test_run_specialize_compiles_every_shape_at_load(tmp_path):
    model = tmp_path / "sym.onnx"
    binary_model(model, shape=("N", 3))
    r = kiln("run", model, "--specialize", "N=2,5,7", "--repeat", "2", "--output-dir", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert "specialized 3 shapes at load (3 compiles" in r.stdout
    assert "z: f32 [2,3]" in r.stdout  # random inputs take the first shape
    for n in (2, 5, 7):
        assert re.search(rf"N={n}: first run [0-9.]+ ms, median [0-9.]+ ms \(2 runs\)", r.stdout), r.stdout
    assert np.load(tmp_path / "out" / "z.npy").shape == (2, 3)
    bad = kiln("run", model, "--specialize", "M=2")
    assert bad.returncode == 1 and "no input has a symbolic dimension 'M'" in bad.stderr
    assert kiln("run", model, "--specialize", "N=2,x").returncode == 1
    assert kiln("run", model, "--specialize", "N").returncode == 2


def test_inspect_prints_ir_and_kernels(tmp_path):
    model = tmp_path / "add.onnx"
    binary_model(model)
    r = kiln("inspect", model)
    assert r.returncode == 0, r.stderr
    assert "Add" in r.stdout


def test_test_onnx_single_directory_passes(tmp_path):
    test_dir = node_test(tmp_path / "test_add")
    r = kiln("test-onnx", test_dir)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["PASS test_add", "1 passed, 0 failed, 0 unsupported"]


def test_test_onnx_suite_reports_pass_fail_unsupported(tmp_path):
    node_test(tmp_path / "test_b_add")
    node_test(tmp_path / "test_a_wrong", corrupt=True)
    node_test(tmp_path / "test_c_unsupported", op="KilnNoSuchOp")
    (tmp_path / "not_a_test").mkdir()
    r = kiln("test-onnx", tmp_path, "--jobs", "3")
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert len(lines) == 4, r.stdout
    # One line per test, in name order, whatever order the children finished in.
    assert lines[0].startswith("FAIL test_a_wrong: output 'z' element 4: expected ")
    assert lines[1] == "PASS test_b_add"
    assert lines[2].startswith("UNSUPPORTED test_c_unsupported: ")
    assert "KilnNoSuchOp" in lines[2]
    assert SUMMARY.match(lines[3]).groups() == ("1", "1", "1")


def test_test_onnx_filter(tmp_path):
    node_test(tmp_path / "test_add")
    node_test(tmp_path / "test_wrong", corrupt=True)
    r = kiln("test-onnx", tmp_path, "--filter", "add")
    assert r.returncode == 0
    assert r.stdout.splitlines() == ["PASS test_add", "1 passed, 0 failed, 0 unsupported"]


def test_test_onnx_shape_mismatch(tmp_path):
    test_dir = node_test(tmp_path / "test_shape")
    x, y = inputs_2x3()
    bad = (x + y).reshape(3, 2)
    (test_dir / "test_data_set_0" / "output_0.pb").write_bytes(
        numpy_helper.from_array(bad, "output_0").SerializeToString())
    r = kiln("test-onnx", test_dir)
    assert r.returncode == 1
    assert "FAIL test_shape: output 'z' shape mismatch: expected [3,2] got [2,3]" in r.stdout


def test_test_onnx_timeout_kills_the_test_and_goes_on(tmp_path):
    # Reading 3 x 16 MiB of test data and comparing 4M elements takes far longer than 1 ms, so
    # every test times out; the run still reports each test and the summary.
    node_test(tmp_path / "test_one", shape=(2048, 2048))
    node_test(tmp_path / "test_two", shape=(2048, 2048))
    r = kiln("test-onnx", tmp_path, "--timeout", "0.001")
    assert r.returncode == 1
    assert r.stdout.splitlines() == [
        "FAIL test_one: timed out after 0.001 s",
        "FAIL test_two: timed out after 0.001 s",
        "0 passed, 2 failed, 0 unsupported",
    ]
