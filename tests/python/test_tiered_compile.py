"""kiln.tiered_compile (docs/dynamic_shapes.md, "Tiered compiles"): with a cold kernel cache a
session runs on quickly built kernels, wait_for_optimized_kernels() returns once their -O3 builds
run, and a second session finds those in the cache and compiles nothing; results against numpy
all along. With the entry at 0 the kernels are -O3 from the start."""
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln


def _layers():
    return (os.cpu_count() or 1) + 3  # more kernels than compiler processes: a cold compile tiers


def _deep(path, layers, seed=0):
    """y = Relu(...Relu(Relu(x W0) W1)...) with x: [3, 5]; every layer its own shape (kernel)."""
    rng = np.random.default_rng(seed)
    widths = [5 + i for i in range(layers + 1)]
    weights = [rng.standard_normal((widths[i], widths[i + 1])).astype(np.float32) * 0.3 for i in range(layers)]
    nodes, h = [], "x"
    for i in range(layers):
        nodes += [helper.make_node("MatMul", [h, f"W{i}"], [f"m{i}"]), helper.make_node("Relu", [f"m{i}"], [f"h{i}"])]
        h = f"h{i}"
    nodes.append(helper.make_node("Identity", [h], ["y"]))
    g = helper.make_graph(nodes, "deep", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, widths[0]])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, widths[-1]])],
                          [numpy_helper.from_array(w, f"W{i}") for i, w in enumerate(weights)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return weights


def _reference(x, weights):
    h = x.astype(np.float64)
    for w in weights:
        h = np.maximum(h @ w.astype(np.float64), 0)
    return h


def _session(path, tiered):
    so = kiln.SessionOptions()
    so.add_session_config_entry("kiln.kernels", "generated")
    so.add_session_config_entry("kiln.tiered_compile", "1" if tiered else "0")
    return kiln.InferenceSession(str(path), so)


@pytest.fixture
def cold_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KILN_TIERED_COMPILE", raising=False)
    return tmp_path


def test_quick_kernels_then_o3_and_the_cache_keeps_them(cold_cache):
    layers = _layers()
    weights = _deep(cold_cache / "deep.onnx", layers)
    x = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    want = _reference(x, weights)
    first = _session(cold_cache / "deep.onnx", tiered=True)
    assert first.stats()["quick_kernels"] >= layers
    np.testing.assert_allclose(first.run(None, {"x": x})[0], want, rtol=1e-5, atol=1e-5)
    first.wait_for_optimized_kernels()
    st = first.stats()
    assert st["optimized_kernels_running"] and st["optimize_seconds"] > 0
    np.testing.assert_allclose(first.run(None, {"x": x})[0], want, rtol=1e-5, atol=1e-5)
    second = _session(cold_cache / "deep.onnx", tiered=True)
    assert second.stats()["compiled"] == 0 and second.stats()["quick_kernels"] == 0
    np.testing.assert_allclose(second.run(None, {"x": x})[0], want, rtol=1e-5, atol=1e-5)


def test_off_builds_o3_from_the_start(cold_cache):
    _deep(cold_cache / "deep.onnx", _layers())
    s = _session(cold_cache / "deep.onnx", tiered=False)
    assert s.stats()["compiled"] > 0 and s.stats()["quick_kernels"] == 0
    s.wait_for_optimized_kernels()  # nothing to wait for
    assert s.stats()["optimized_kernels_running"]
