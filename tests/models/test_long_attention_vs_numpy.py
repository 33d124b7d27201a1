"""Long-sequence attention fused into KilnBlockedAttention (pass/fuse_long_attention.h) and run a
block of query rows at a time (runtime/attention_kernel.h), against numpy in float64:
MatMul(Q, Kt) -> Div or Mul by a scalar, or no scale -> Softmax -> MatMul(., V) over 600 keys,
query counts that leave a partial block, a value width other than the key width; under
`--kernels auto` the kernel list names kiln_attention, under `--kernels generated` the op's
reference compute runs; 1 and 2 threads. Patterns the pass must leave alone (fewer than 512
keys; the probabilities also a graph output) keep their MatMul/Softmax kernels and still match."""
import os
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kiln_helpers import kiln_run_model, run_kiln  # noqa: E402


def _model(path, shapes, scale_op, probs_out):
    (b, h, s, d), t, dv = shapes
    nodes = [helper.make_node("MatMul", ["q", "kt"], ["qk"])]
    inits, src = [], "qk"
    if scale_op:
        inits.append(numpy_helper.from_array(np.float32(np.sqrt(d) if scale_op == "Div" else 1 / np.sqrt(d)), "c"))
        nodes.append(helper.make_node(scale_op, ["qk", "c"], ["scaled"]))
        src = "scaled"
    nodes += [helper.make_node("Softmax", [src], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["y"])]
    inputs = [helper.make_tensor_value_info("q", TensorProto.FLOAT, [b, h, s, d]),
              helper.make_tensor_value_info("kt", TensorProto.FLOAT, [b, h, d, t]),
              helper.make_tensor_value_info("v", TensorProto.FLOAT, [b, h, t, dv])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [b, h, s, dv])]
    if probs_out:
        outputs.append(helper.make_tensor_value_info("p", TensorProto.FLOAT, [b, h, s, t]))
    g = helper.make_graph(nodes, "attention", inputs, outputs, inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def _reference(q, kt, v, scale):
    qk = np.einsum("bhsd,bhdt->bhst", q.astype(np.float64), kt.astype(np.float64)) * scale
    e = np.exp(qk - qk.max(-1, keepdims=True))
    return np.einsum("bhst,bhtv->bhsv", e / e.sum(-1, keepdims=True), v.astype(np.float64))


CASES = {
    # name: ((B, H, S, D), T, Dv, scale op, probabilities an output, fused)
    "div_scale": ((1, 3, 70, 32), 600, 32, "Div", False, True),
    "mul_scale_dv": ((2, 2, 33, 16), 640, 24, "Mul", False, True),
    "no_scale": ((1, 1, 5, 8), 512, 8, None, False, True),
    "short_keys": ((1, 2, 40, 16), 200, 16, "Div", False, False),
    "probs_used": ((1, 1, 20, 16), 600, 16, "Div", True, False),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_long_attention_matches_numpy(tmp_path, name):
    (b, h, s, d), t, dv, scale_op, probs_out, fused = CASES[name]
    path = str(tmp_path / "m.onnx")
    _model(path, ((b, h, s, d), t, dv), scale_op, probs_out)
    rng = np.random.default_rng(len(name))
    q = rng.standard_normal((b, h, s, d)).astype(np.float32)
    kt = rng.standard_normal((b, h, d, t)).astype(np.float32)
    v = rng.standard_normal((b, h, t, dv)).astype(np.float32)
    np.savez(tmp_path / "in.npz", q=q, kt=kt, v=v)
    listing = run_kiln(["inspect", path, "--kernels"]).stdout
    assert ("kiln_attention" in listing) == fused, listing
    scale = {"Div": 1 / np.float32(np.sqrt(d)), "Mul": np.float32(1 / np.sqrt(d)), None: 1.0}[scale_op]
    want = _reference(q, kt, v, float(scale))
    for source in ("auto", "generated"):
        for threads in ("1", "2"):
            got, _ = kiln_run_model(path, str(tmp_path / "in.npz"), str(tmp_path / f"{source}{threads}"),
                                    extra=["--kernels", source, "--threads", threads])
            np.testing.assert_allclose(got["y"], want, rtol=1e-4, atol=1e-5,
                                       err_msg=f"{name} --kernels {source} --threads {threads}")
