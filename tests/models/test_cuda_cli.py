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
