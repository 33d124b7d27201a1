"""`kiln run --device cuda`: on a machine without a GPU (CI) a clean error saying why; on a GPU
machine the run succeeds and matches the CPU (scripts/gpu_check.sh covers the latter at scale)."""
import numpy as np
import onnx
from onnx import TensorProto, helper

from kiln_helpers import run_kiln
from test_cli_errors import assert_clean_error


def _relu_model(path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_device_cuda_is_clear_error_or_runs(tmp_path):
    model = tmp_path / "relu.onnx"
    _relu_model(model)
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out"
    proc = run_kiln(["run", model, "--device", "cuda", "--input", f"x={tmp_path / 'x.npy'}", "--repeat", "1",
                     "--output-dir", out])
    if "no usable GPU" in proc.stderr:  # no driver or no GPU: the CPU-only machines
        assert_clean_error(proc, must_contain=("--device cuda",))
        return
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_array_equal(np.load(out / "y.npy"), np.maximum(x, 0))


def test_unknown_device_is_rejected(tmp_path):
    model = tmp_path / "relu.onnx"
    _relu_model(model)
    proc = run_kiln(["run", model, "--device", "tpu"])
    assert proc.returncode != 0 and "tpu" in (proc.stderr + proc.stdout)


def _two_op_model(path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [helper.make_node("Softmax", ["x"], ["s"], name="soft", axis=1),
             helper.make_node("Exp", ["s"], ["y"], name="exp")]
    onnx.save(helper.make_model(helper.make_graph(nodes, "two", [x], [y]), opset_imports=[helper.make_opsetid("", 17)]),
              str(path))


def test_inspect_place_shows_pins_and_copies(tmp_path):
    """`kiln inspect --place cuda` needs no GPU: the GPU compile's placement, a copy at each
    device boundary, and the pinned node named."""
    model = tmp_path / "two.onnx"
    _two_op_model(model)
    proc = run_kiln(["inspect", model, "--place", "cuda", "--pin", "exp=cpu"])
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert 'Exp(%"s/cpu")' in text and 'kiln.device="cpu"' in text, text
    assert text.count("= KilnDeviceCopy(") == 2, text  # x to the GPU, s back to the host
    assert "pinned" in text and "node 'exp' (Exp)" in text, text


def test_bad_device_pins_are_clear_errors(tmp_path):
    model = tmp_path / "two.onnx"
    _two_op_model(model)
    proc = run_kiln(["inspect", model, "--place", "cuda", "--pin", "nope=cpu"])
    assert_clean_error(proc, must_contain=("nope=cpu", "no node of that name"))
    proc = run_kiln(["inspect", model, "--place", "cuda", "--pin-op", "Exp=tpu"])
    assert_clean_error(proc, must_contain=("unknown device 'tpu'",))
