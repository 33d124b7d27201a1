"""KilnMatMulPackedB (pack_matmul_weights at -O3) and the register-tiled MatMul/Gemm schedules
against numpy in float64: constant B in both Gemm orientations, alpha/beta/C broadcasts,
batched A with a [K, N] weight, shapes whose M and N leave tails in the micro-kernel's tile,
a MatMul of two activations (unpacked, same micro-kernel), and few-row products (GEMVs and
batch-8 heads: padded packed B, transA/transB, C broadcasts, 3-D and 1-D A) under generated and
auto kernels. Also checks that the -O3 graph really holds the packed op (kiln inspect)."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from kiln_helpers import kiln_run_model, run_kiln

RTOL, ATOL = 2e-4, 2e-4


def _save(path, nodes, inputs, output_shape, inits):
    g = helper.make_graph(nodes, "g", inputs,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, output_shape)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))


def _run(tmp_path, model, feed, extra=()):
    np.savez(tmp_path / "in.npz", **feed)
    (tmp_path / "out").mkdir()
    outs, _ = kiln_run_model(str(model), str(tmp_path / "in.npz"), str(tmp_path / "out"),
                             extra=["--repeat", "1", *extra])
    return outs["y"]


def _inspect(model):
    proc = run_kiln(["inspect", str(model)])
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


CASES = [  # (M, K, N, transB, alpha, beta, C shape or None)
    (7, 33, 70, 1, 1.0, 1.0, (70,)),
    (128, 64, 96, 1, 0.5, 2.0, (128, 96)),
    (1, 256, 1000, 1, 1.0, 1.0, (1, 1000)),
    (30, 20, 52, 0, 1.0, 0.0, (52,)),
    (13, 17, 16, 0, 2.0, 1.0, None),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:3])) + f"_tb{c[3]}")
def test_gemm_with_constant_b(tmp_path, case):
    m, k, n, tb, alpha, beta, cshape = case
    rng = np.random.default_rng(m * 1000 + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    inits = [numpy_helper.from_array(b, "B")]
    ins = ["a", "B"]
    ref = alpha * (a.astype(np.float64) @ (b.T if tb else b).astype(np.float64))
    if cshape is not None:
        c = rng.standard_normal(cshape).astype(np.float32)
        inits.append(numpy_helper.from_array(c, "C"))
        ins.append("C")
        ref = ref + beta * c.astype(np.float64)
    model = tmp_path / "gemm.onnx"
    _save(model, [helper.make_node("Gemm", ins, ["y"], transB=tb, alpha=alpha, beta=beta)],
          [helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k])], [m, n], inits)
    assert "KilnMatMulPackedB" in _inspect(model)
    np.testing.assert_allclose(_run(tmp_path, model, {"a": a}), ref, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("shape", [(1, 128, 64, 48), (2, 3, 9, 40, 24)], ids=["bert_like", "batched"])
def test_matmul_batched_a_constant_b_plus_bias(tmp_path, shape):
    *batch, m, k, n = shape
    rng = np.random.default_rng(len(shape))
    a = rng.standard_normal((*batch, m, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal((n,)).astype(np.float32)
    model = tmp_path / "mm.onnx"
    _save(model, [helper.make_node("MatMul", ["a", "W"], ["t"]), helper.make_node("Add", ["t", "bias"], ["y"])],
          [helper.make_tensor_value_info("a", TensorProto.FLOAT, list(a.shape))], [*batch, m, n],
          [numpy_helper.from_array(w, "W"), numpy_helper.from_array(bias, "bias")])
    assert "KilnMatMulPackedB" in _inspect(model)
    ref = a.astype(np.float64) @ w.astype(np.float64) + bias
    np.testing.assert_allclose(_run(tmp_path, model, {"a": a}), ref, rtol=RTOL, atol=ATOL)


# Few rows (classifier heads at batch 1..8): N that the GEMV tile's 64 columns do not divide (the
# packed B is zero-padded), transA (not packed), every C broadcast, alpha/beta; under both the
# generated kernels and auto (which picks the packed micro-kernel for a constant B).
SMALL_M_CASES = [  # (M, K, N, transA, transB, alpha, beta, C shape or None)
    (1, 1024, 1000, 0, 1, 1.0, 1.0, (1000,)),
    (1, 300, 100, 0, 0, 1.0, 1.0, (1, 100)),
    (1, 77, 37, 1, 1, 1.0, 1.0, ()),
    (2, 129, 515, 0, 1, 0.5, 2.0, (2, 1)),
    (3, 64, 200, 1, 0, 1.0, 1.0, (200,)),
    (5, 96, 130, 0, 0, 1.5, 0.0, (130,)),
    (8, 512, 1000, 0, 1, 1.0, -1.0, (8, 1000)),
]


@pytest.mark.parametrize("kernels", ["generated", "auto"])
@pytest.mark.parametrize("case", SMALL_M_CASES,
                         ids=lambda c: "x".join(map(str, c[:3])) + f"_ta{c[3]}_tb{c[4]}")
def test_gemm_few_rows(tmp_path, case, kernels):
    m, k, n, ta, tb, alpha, beta, cshape = case
    rng = np.random.default_rng(m * 7919 + n)
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    inits = [numpy_helper.from_array(b, "B")]
    ins = ["a", "B"]
    ref = alpha * ((a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64))
    if cshape is not None:
        c = rng.standard_normal(cshape).astype(np.float32)
        inits.append(numpy_helper.from_array(c, "C"))
        ins.append("C")
        ref = ref + beta * c.astype(np.float64)
    model = tmp_path / "gemm.onnx"
    _save(model, [helper.make_node("Gemm", ins, ["y"], transA=ta, transB=tb, alpha=alpha, beta=beta)],
          [helper.make_tensor_value_info("a", TensorProto.FLOAT, list(a.shape))], [m, n], inits)
    if not ta:
        assert "KilnMatMulPackedB" in _inspect(model)
    got = _run(tmp_path, model, {"a": a}, ["--kernels", kernels])
    np.testing.assert_allclose(got, ref, rtol=RTOL, atol=ATOL * np.sqrt(k))


@pytest.mark.parametrize("kernels", ["generated", "auto"])
@pytest.mark.parametrize("shape", [(1, 1, 2048, 1000), (1, 4, 640, 77), (640, 77)],
                         ids=["batch1_row1", "batch1_rows4", "vector_a"])
def test_matmul_few_rows_3d_and_1d(tmp_path, shape, kernels):
    *lead, k, n = shape
    rng = np.random.default_rng(k + n)
    a = rng.standard_normal((*lead, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    ref = a.astype(np.float64) @ w.astype(np.float64)
    model = tmp_path / "mm.onnx"
    _save(model, [helper.make_node("MatMul", ["a", "W"], ["y"])],
          [helper.make_tensor_value_info("a", TensorProto.FLOAT, list(a.shape))], list(ref.shape),
          [numpy_helper.from_array(w, "W")])
    got = _run(tmp_path, model, {"a": a}, ["--kernels", kernels])
    np.testing.assert_allclose(got, ref, rtol=RTOL, atol=ATOL * np.sqrt(k))


def test_batched_matmul_of_two_activations_broadcasts(tmp_path):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((2, 3, 11, 19)).astype(np.float32)
    b = rng.standard_normal((3, 19, 37)).astype(np.float32)
    model = tmp_path / "bmm.onnx"
    _save(model, [helper.make_node("MatMul", ["a", "b"], ["y"])],
          [helper.make_tensor_value_info("a", TensorProto.FLOAT, list(a.shape)),
           helper.make_tensor_value_info("b", TensorProto.FLOAT, list(b.shape))], [2, 3, 11, 37], [])
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(_run(tmp_path, model, {"a": a, "b": b}), ref, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("m,prefetches", [(128, True), (33, True), (2, False)])
def test_packed_matmul_prefetches_the_next_panel(tmp_path, m, prefetches):
    """op/defs/matmul.cc's prefetch_next_panel: with at least as many row tiles as cache lines in
    a panel row (4 for 64 columns), every k step hints one line of the next column tile's panel
    (__builtin_prefetch in the kernel's C); a GEMV-sized product has too few row tiles and gets
    none. Against numpy in both cases, at 1 and 2 threads (the panels split across threads)."""
    rng = np.random.default_rng(m)
    k, n = 96, 320
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    model = tmp_path / "mm.onnx"
    _save(model, [helper.make_node("MatMul", ["a", "B"], ["y"])],
          [helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k])], [m, n], [numpy_helper.from_array(b, "B")])
    src = _inspect(model)
    assert "KilnMatMulPackedB" in src
    assert ("__builtin_prefetch(&" in src) == prefetches, src[-3000:]
    ref = a.astype(np.float64) @ b.astype(np.float64)
    for threads in ("1", "2"):
        run_dir = tmp_path / f"t{threads}"
        run_dir.mkdir()
        out = _run(run_dir, model, {"a": a}, extra=["--threads", threads])
        np.testing.assert_allclose(out, ref, rtol=RTOL, atol=ATOL, err_msg=f"M={m} --threads {threads}")
