"""Static QDQ transformers against ONNX Runtime running the same file (ORT is the reference for
QDQ semantics).

Models: a BERT encoder layer (self-attention with a Reshape/Transpose head split, scaled QK^T,
Softmax, PV, output projection, residual + LayerNorm, an erf-GELU FFN, residual + LayerNorm)
and a two-Gemm MLP (transB=1 weights, a bias, a Relu), written with onnx.helper and quantized by
ONNX Runtime's `quantize_static` (QDQ, per-channel s8 weights, u8 activations, MinMax on random
inputs), the way bench/int8.py quantizes BERT-base.

What runs: the weight MatMuls as oneDNN int8 matmuls (dnnl_qmatmul, pass/fuse_qdq.h), the
Gemms as MatMulInteger with their scale and bias epilogue (dnnl_dqmatmul), and the
QuantizeLinear/DequantizeLinear round trips between the float ops as generated vector loops
(the f32 -> u8 saturating conversion without a double round trip, 64-lane loops where bytes are
read or written, docs/int8.md).

Checks: the kernels chosen (`kiln inspect --kernels`), and the dequantized output within one step
of its scale of ORT's, on few elements (both round the same float values; a value within float
rounding of a half may round the other way and travel), at 1 and 2 threads. The reference is ORT
with its graph optimizations off, i.e. the QDQ file's own semantics: ORT's extended level
rewrites the sandwiches into its integer QLinearAdd / QLinearMul / QLinearSoftmax, whose
approximations move this BERT layer's output by up to 3 steps on 43% of the elements against
ORT's own unoptimized run (Kiln equals the unoptimized run there: 0 steps).
"""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from kiln_helpers import kiln_has_dnnl, kiln_run_model, ort_quantize_static, run_kiln

S, H, HEADS, FFN = 16, 64, 4, 128


def _bert_layer(path, rng):
    d = H // HEADS
    inits, nodes = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def linear(name, x, cin, cout):
        w = const(name + "_w", (rng.standard_normal((cin, cout)) / np.sqrt(cin)).astype(np.float32))
        b = const(name + "_b", (rng.standard_normal(cout) * 0.1).astype(np.float32))
        nodes.append(helper.make_node("MatMul", [x, w], [name + "_mm"]))
        nodes.append(helper.make_node("Add", [name + "_mm", b], [name]))
        return name

    def heads(name, x, perm):
        shape = const(name + "_shape", np.array([1, S, HEADS, d], np.int64))
        nodes.append(helper.make_node("Reshape", [x, shape], [name + "_r"]))
        nodes.append(helper.make_node("Transpose", [name + "_r"], [name], perm=perm))
        return name

    q = heads("qh", linear("q", "x", H, H), [0, 2, 1, 3])
    k = heads("kh", linear("k", "x", H, H), [0, 2, 3, 1])
    v = heads("vh", linear("v", "x", H, H), [0, 2, 1, 3])
    nodes += [helper.make_node("MatMul", [q, k], ["scores"]),
              helper.make_node("Div", ["scores", const("sqrt_d", np.array(np.sqrt(d), np.float32))], ["scaled"]),
              helper.make_node("Softmax", ["scaled"], ["probs"], axis=-1),
              helper.make_node("MatMul", ["probs", v], ["ctx"]),
              helper.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["ctx_t", const("ctx_shape", np.array([1, S, H], np.int64))], ["ctx_r"])]

    def add_norm(name, a, b):
        nodes.append(helper.make_node("Add", [a, b], [name + "_sum"]))
        g = const(name + "_g", (1 + 0.1 * rng.standard_normal(H)).astype(np.float32))
        beta = const(name + "_beta", (0.1 * rng.standard_normal(H)).astype(np.float32))
        nodes.append(helper.make_node("LayerNormalization", [name + "_sum", g, beta], [name], axis=-1, epsilon=1e-12))
        return name

    h1 = add_norm("ln1", linear("o", "ctx_r", H, H), "x")
    f = linear("f1", h1, H, FFN)
    nodes += [helper.make_node("Div", [f, const("sqrt2", np.array(np.sqrt(2), np.float32))], ["g_div"]),
              helper.make_node("Erf", ["g_div"], ["g_erf"]),
              helper.make_node("Add", ["g_erf", const("one", np.array(1, np.float32))], ["g_1"]),
              helper.make_node("Mul", [f, "g_1"], ["g_mul"]),
              helper.make_node("Mul", ["g_mul", const("half", np.array(0.5, np.float32))], ["gelu"])]
    y = add_norm("ln2", linear("f2", "gelu", FFN, H), h1)
    nodes.append(helper.make_node("Identity", [y], ["y"]))
    g = helper.make_graph(nodes, "bert_layer", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, S, H])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, S, H])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return [1, S, H]


def _gemm_mlp(path, rng):
    inits = [numpy_helper.from_array((rng.standard_normal((96, 64)) / 8).astype(np.float32), "W1"),
             numpy_helper.from_array((rng.standard_normal(96) * 0.1).astype(np.float32), "b1"),
             numpy_helper.from_array((rng.standard_normal((40, 96)) / 10).astype(np.float32), "W2"),
             numpy_helper.from_array((rng.standard_normal(40) * 0.1).astype(np.float32), "b2")]
    nodes = [helper.make_node("Gemm", ["x", "W1", "b1"], ["h"], transB=1), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "W2", "b2"], ["y"], transB=1)]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [24, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [24, 40])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    return [24, 64]


def _ort_qdq_reference(q, feed):
    """ORT running the QDQ file as written (no QDQ -> integer-op fusion)."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    return ort.InferenceSession(q, so, providers=["CPUExecutionProvider"]).run(["y"], feed)[0]


def _output_scale(q):
    """The scale of the DequantizeLinear that writes the graph's output (ORT's last Q/DQ pair)."""
    m = onnx.load(q)
    out = m.graph.output[0].name
    producer = {o: n for n in m.graph.node for o in n.output}
    n = producer[out]
    while n.op_type != "DequantizeLinear":
        n = producer[n.input[0]]
    return float(next(numpy_helper.to_array(t) for t in m.graph.initializer if t.name == n.input[1]))


@pytest.mark.parametrize("model,kernel,count", [("bert_layer", "[dnnl_qmatmul]", 6), ("gemm_mlp", "[dnnl_dqmatmul]", 2)])
def test_static_qdq_transformer_matches_ort(tmp_path, model, kernel, count):
    if not kiln_has_dnnl():
        pytest.skip("kiln built without oneDNN")
    quantization = pytest.importorskip("onnxruntime.quantization")
    rng = np.random.default_rng(5)
    f32, q = str(tmp_path / "f32.onnx"), str(tmp_path / "q.onnx")
    shape = (_bert_layer if model == "bert_layer" else _gemm_mlp)(f32, rng)
    ort_quantize_static(quantization, f32, q, shape, rng)
    kernels = run_kiln(["inspect", q, "--kernels"]).stdout
    assert kernels.count(kernel) == count, f"expected {count} {kernel}:\n{kernels}"
    feed = {"x": rng.standard_normal(shape).astype(np.float32)}
    np.savez(tmp_path / "in.npz", **feed)
    ref = _ort_qdq_reference(q, feed)
    scale = _output_scale(q)
    for threads in ("1", "2"):
        outs, _ = kiln_run_model(q, str(tmp_path / "in.npz"), str(tmp_path / f"o{threads}"), extra=["--threads", threads])
        steps = np.rint(np.abs(outs["y"].astype(np.float64) - ref) / scale)
        assert steps.max() <= 1, f"{model} --threads {threads}: {steps.max()} steps off"
        assert (steps > 0).mean() <= 0.05, f"{model} --threads {threads}: {(steps > 0).mean():.2%} 1 step off"
