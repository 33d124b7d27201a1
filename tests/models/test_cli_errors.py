"""The Kiln CLI on bad input: a clean error (non-zero exit, "error"-prefixed message on stderr
naming what is wrong), never a crash signal."""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper

from kiln_helpers import load_npz, run_kiln

KIND_NAMES = ("InvalidModel", "InvalidArgument", "Unsupported", "IOError", "ParseError",
              "CompileError", "OutOfMemory")


def assert_clean_error(proc, must_contain=(), any_of=()):
    rc = proc.returncode
    detail = f"exit {rc}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert rc != 0, f"expected a non-zero exit, {detail}"
    # Negative: killed by a signal (subprocess); >= 128: a shell-style signal status
    # (134 SIGABRT, 139 SIGSEGV, ...).
    assert 0 < rc < 128, f"expected a clean error exit, got a crash-like status: {detail}"
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines, f"expected an error message on stderr, {detail}"
    first = lines[0].strip()
    assert first.lower().startswith("error") or first.startswith(KIND_NAMES), \
        f"stderr should start with the error kind ('error: ...'), {detail}"
    assert "Internal" not in proc.stderr and "bug in Kiln" not in proc.stderr, \
        f"bad user input must not surface as an internal error, {detail}"
    for s in must_contain:
        assert s in proc.stderr, f"expected {s!r} in the message, {detail}"
    if any_of:
        assert any(s in proc.stderr for s in any_of), f"expected one of {any_of}, {detail}"


def _run(tmp_path, model, inputs):
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    return run_kiln(["run", model, "--inputs", inputs, "--output-dir", str(out)])


def test_truncated_model(models_dir, tmp_path):
    data = (models_dir / "small_cnn.onnx").read_bytes()
    bad = tmp_path / "truncated.onnx"
    bad.write_bytes(data[: len(data) // 3])
    proc = _run(tmp_path, str(bad), str(models_dir / "small_cnn_inputs.npz"))
    assert_clean_error(proc, any_of=("InvalidModel", "ParseError", "truncated", "parse"))


def test_garbage_file(models_dir, tmp_path):
    bad = tmp_path / "garbage.onnx"
    bad.write_bytes(np.random.default_rng(7).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    proc = _run(tmp_path, str(bad), str(models_dir / "mlp_inputs.npz"))
    assert_clean_error(proc, any_of=("InvalidModel", "ParseError"))


def test_text_file_as_model(models_dir, tmp_path):
    bad = tmp_path / "notes.onnx"
    bad.write_text("this is not an ONNX model\n" * 20)
    proc = _run(tmp_path, str(bad), str(models_dir / "mlp_inputs.npz"))
    assert_clean_error(proc, any_of=("InvalidModel", "ParseError"))


def test_input_with_wrong_shape(models_dir, tmp_path):
    feed = load_npz(str(models_dir / "mlp_inputs.npz"))
    assert feed["x"].shape == (4, 64)
    inputs = tmp_path / "wrong.npz"
    np.savez(inputs, x=np.zeros((4, 63), np.float32))
    proc = _run(tmp_path, str(models_dir / "mlp.onnx"), str(inputs))
    assert_clean_error(proc, must_contain=("x",), any_of=("expected", "got", "63"))


def test_input_with_wrong_rank(models_dir, tmp_path):
    inputs = tmp_path / "wrong_rank.npz"
    np.savez(inputs, input=np.zeros((3, 32, 32), np.float32))
    proc = _run(tmp_path, str(models_dir / "small_cnn.onnx"), str(inputs))
    assert_clean_error(proc, must_contain=("input",), any_of=("expected", "got", "rank"))


def _single_op_model(op, path, **attrs):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])
    node = helper.make_node(op, ["x"], ["y"], name=f"my_{op.lower()}", **attrs)
    m = helper.make_model(helper.make_graph([node], "unsupported", [x], [y]),
                          opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


# Random ops: their outputs are not reproducible, so Kiln rejects them (by name) at load.
def test_unsupported_op_bernoulli(tmp_path):
    model = str(tmp_path / "bernoulli.onnx")
    _single_op_model("Bernoulli", model)
    inputs = tmp_path / "x.npz"
    np.savez(inputs, x=np.ones((2, 5), np.float32))
    proc = _run(tmp_path, model, str(inputs))
    assert_clean_error(proc, must_contain=("Bernoulli",))


def test_unsupported_op_random_uniform_like(tmp_path):
    model = str(tmp_path / "random_uniform_like.onnx")
    _single_op_model("RandomUniformLike", model)
    inputs = tmp_path / "x.npz"
    np.savez(inputs, x=np.ones((2, 5), np.float32))
    proc = _run(tmp_path, model, str(inputs))
    assert_clean_error(proc, must_contain=("RandomUniformLike",))


def test_nonexistent_model(models_dir, tmp_path):
    missing = str(tmp_path / "no_such_model.onnx")
    proc = _run(tmp_path, missing, str(models_dir / "mlp_inputs.npz"))
    assert_clean_error(proc, must_contain=("no_such_model.onnx",))


def test_nonexistent_inputs_file(models_dir, tmp_path):
    missing = str(tmp_path / "no_such_inputs.npz")
    proc = _run(tmp_path, str(models_dir / "mlp.onnx"), missing)
    assert_clean_error(proc, must_contain=("no_such_inputs.npz",))
