"""The runtime's row Softmax (runtime/softmax_kernel.h, matched by topi/softmax_match.h for a
float32 Softmax over a last axis of 16 or more) against numpy in float64, and against the
generated kernel's semantics it keeps: probabilities under float32's smallest normal are 0, a
row holding a NaN or a +inf, or a row of -inf, is NaN.

Rows of 16, of 40 (a tail of 8 lanes), of 1500 (attention over Whisper's frames), masked rows
(-100, the float minimum), large magnitudes; the Softmax read from a graph input (its own output
buffer) and from a Mul before it (the scores die at the Softmax: it may run in place). Under
`--kernels auto` the kernel list names kiln_softmax; `--kernels generated` computes the same."""
import os
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kiln_helpers import kiln_run_model, run_kiln  # noqa: E402

TINY = np.finfo(np.float32).tiny


def _model(path, shape, scaled):
    nodes, src = [], "x"
    inits = []
    if scaled:  # an intermediate input: the scores die at the Softmax
        inits.append(onnx.numpy_helper.from_array(np.float32(1.5), "s"))
        nodes.append(helper.make_node("Mul", ["x", "s"], ["xs"]))
        src = "xs"
    nodes.append(helper.make_node("Softmax", [src], ["p"], axis=-1))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("p", TensorProto.FLOAT, shape)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def _inputs(shape):
    rng = np.random.default_rng(len(shape) * 100 + shape[-1])
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    rows = x.reshape(-1, shape[-1])
    n = shape[-1]
    rows[0, n // 2:] = -100.0  # a masked half: e^-100 relative, flushed to 0
    rows[1, 1::3] = np.finfo(np.float32).min  # Hugging Face's padding mask
    rows[2, min(3, n - 1)] = np.nan
    rows[3, :] = -np.inf
    rows[4, min(5, n - 1)] = np.inf
    rows[5, :] *= 30.0  # large magnitudes: most entries underflow
    return x


def _reference(x):
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
        p = e / e.sum(axis=-1, keepdims=True)
    bad = np.isnan(x64).any(-1) | np.isposinf(x64).any(-1) | np.isneginf(x64).all(-1)
    p[bad] = np.nan
    p[p < TINY] = 0.0  # NaN compares false: stays
    return p


@pytest.mark.parametrize("shape", [[6, 16], [2, 5, 40], [1, 6, 12, 1500]])
@pytest.mark.parametrize("scaled", [False, True])
def test_row_softmax_matches_numpy(tmp_path, shape, scaled):
    path = str(tmp_path / "m.onnx")
    _model(path, shape, scaled)
    x = _inputs(shape)
    np.savez(tmp_path / "in.npz", x=x)
    listing = run_kiln(["inspect", path, "--kernels"]).stdout
    assert "kiln_softmax" in listing, listing
    with np.errstate(over="ignore"):  # the float minimum times 1.5: -inf, as in float32
        want = _reference(x * np.float32(1.5) if scaled else x)
    for source in ("auto", "generated"):
        for threads in ("1", "2"):
            out_dir = tmp_path / f"{source}{threads}"
            got, _ = kiln_run_model(path, str(tmp_path / "in.npz"), str(out_dir),
                                    extra=["--kernels", source, "--threads", threads])
            p = got["p"]
            label = f"{shape} scaled={scaled} --kernels {source} --threads {threads}"
            np.testing.assert_array_equal(np.isnan(p), np.isnan(want), err_msg=label)
            assert not ((p != 0) & (np.abs(p) < TINY)).any(), f"{label}: a subnormal probability"
            # float32 x - max is rounded to half an ulp of |x - max| (up to ~87): e^d within 1e-5.
            np.testing.assert_allclose(p, want, rtol=1e-5, atol=0, err_msg=label)


@pytest.mark.parametrize("dims", [(2, 5), (1, 40), (3, 16)])
def test_symbolic_row_softmax_matches_numpy(tmp_path, dims):
    """A symbolic compile ([b, 3, s, s] scores, one model for every size): the row kernel's
    shape rule sets its rows and length per run, rows shorter than a vector included."""
    b, s = dims
    path = str(tmp_path / "m.onnx")
    g = helper.make_graph([helper.make_node("Softmax", ["x"], ["p"], axis=-1)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 3, "s", "s"])],
                          [helper.make_tensor_value_info("p", TensorProto.FLOAT, ["b", 3, "s", "s"])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    x = _inputs([b, 3, s, s])
    np.savez(tmp_path / "in.npz", x=x)
    want = _reference(x)
    got, proc = kiln_run_model(path, str(tmp_path / "in.npz"), str(tmp_path / "out"),
                               extra=["--symbolic-shapes", "--threads", "2", "--profile-summary"])
    assert "kiln_softmax" in proc.stdout, proc.stdout
    p = got["p"]
    np.testing.assert_array_equal(np.isnan(p), np.isnan(want))
    np.testing.assert_allclose(p, want, rtol=1e-5, atol=0)
