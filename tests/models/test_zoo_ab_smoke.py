"""`bench/zoo_ab.py --smoke` on a model whose output names are no file names.

`kiln run --output-dir` writes each output to a sanitized file name ('/' -> '_', a repeated
name suffixed with its index); zoo_ab.py crashed on such outputs (PyTorch exports names like
`/head/Add_output_0`). The smoke run compares Kiln's outputs with ONNX Runtime's itself.
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

from kiln_helpers import REPO, kiln_bin


def test_zoo_ab_smoke_reads_sanitized_output_names(tmp_path):
    # "a/b" and "a_b" both sanitize to a_b: the second is written as a_b_1.
    nodes = [helper.make_node("Relu", ["x"], ["a/b"]), helper.make_node("Neg", ["x"], ["a_b"]),
             helper.make_node("Sigmoid", ["x"], ["out:2"])]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("a/b", "a_b", "out:2")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])], outs)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "names_b1.onnx"))
    np.savez(tmp_path / "names_b1_inputs.npz", x=np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    proc = subprocess.run([sys.executable, os.path.join(REPO, "bench", "zoo_ab.py"), "--smoke", "--kiln", kiln_bin(),
                           "--zoo-dir", str(tmp_path), "--models", "names", "--threads", "1"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "names: outputs match ORT" in proc.stdout, proc.stdout
