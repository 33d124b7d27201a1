"""ONNX Runtime's contrib ops (domain com.microsoft, and ORT's LayerNormalization in an opset-14
model), which Kiln's importer decomposes into standard ops (src/frontend/onnx/contrib_ops.cc):
one small model per op form, built with onnx.helper, run by `kiln run` on random inputs and
compared with ONNX Runtime on the same inputs. Forms Kiln does not implement must be a clean
error naming the node."""
import collections
import os
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from kiln_helpers import assert_matches_ort, kiln_run_model, ort_outputs, run_kiln

MS = "com.microsoft"
TORCH_PYTHON = "/usr/bin/python3"  # Debian's python3-torch exports the BERT-style model
HERE = os.path.dirname(os.path.abspath(__file__))
F32 = TensorProto.FLOAT
I32 = TensorProto.INT32


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def make_model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "contrib", inputs, outputs,
                              initializer=[numpy_helper.from_array(v, k) for k, v in inits])
    return helper.make_model(graph, ir_version=8, opset_imports=[helper.make_opsetid("", opset),
                                                                 helper.make_opsetid(MS, 1)])


def run_and_compare(tmp_path, model, feed, label, rtol=1e-4, atol=1e-5):
    path = str(tmp_path / "model.onnx")
    onnx.save(model, path)
    npz = str(tmp_path / "inputs.npz")
    np.savez(npz, **feed)
    out_dir = tmp_path / "out"
    out_dir.mkdir(exist_ok=True)
    got, _ = kiln_run_model(path, npz, str(out_dir))
    want = ort_outputs(path, feed)
    assert_matches_ort(got, want, label, rtol=rtol, atol=atol)
    return got, want


def randn(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


@pytest.mark.parametrize("alpha,ta,tb,ashape,bshape", [
    (1.0, 0, 0, (2, 4, 5), (5, 6)),
    (0.5, 1, 0, (2, 5, 4), (5, 6)),
    (2.0, 0, 1, (3, 2, 4, 5), (3, 2, 6, 5)),
    (-1.5, 1, 1, (2, 5, 4), (2, 6, 5)),
])
def test_fused_matmul(tmp_path, alpha, ta, tb, ashape, bshape):
    rng = np.random.default_rng(1)
    node = helper.make_node("FusedMatMul", ["A", "B"], ["Y"], domain=MS, alpha=alpha, transA=ta, transB=tb)
    model = make_model([node], [vi("A", F32, ashape), vi("B", F32, bshape)], [vi("Y", F32, None)])
    run_and_compare(tmp_path, model, {"A": randn(rng, *ashape), "B": randn(rng, *bshape)}, "FusedMatMul")


@pytest.mark.parametrize("op,bias", [("FastGelu", True), ("FastGelu", False), ("BiasGelu", True), ("Gelu", False)])
def test_gelu_family(tmp_path, op, bias):
    rng = np.random.default_rng(2)
    ins = ["X", "bias"] if bias else ["X"]
    node = helper.make_node(op, ins, ["Y"], domain=MS)
    inputs = [vi("X", F32, (2, 3, 16))] + ([vi("bias", F32, (16,))] if bias else [])
    feed = {"X": randn(rng, 2, 3, 16, scale=3.0)}
    if bias:
        feed["bias"] = randn(rng, 16)
    run_and_compare(tmp_path, make_model([node], inputs, [vi("Y", F32, None)]), feed, op)


@pytest.mark.parametrize("alpha", [None, 1.0])
def test_quick_gelu(tmp_path, alpha):
    rng = np.random.default_rng(3)
    attrs = {} if alpha is None else {"alpha": alpha}
    node = helper.make_node("QuickGelu", ["X"], ["Y"], domain=MS, **attrs)
    model = make_model([node], [vi("X", F32, (4, 10))], [vi("Y", F32, None)])
    run_and_compare(tmp_path, model, {"X": randn(rng, 4, 10, scale=3.0)}, "QuickGelu")


def test_bias_add(tmp_path):
    """ORT has no CPU kernel for BiasAdd (CUDA only): numpy is the reference, X + bias + skip."""
    rng = np.random.default_rng(4)
    node = helper.make_node("BiasAdd", ["X", "bias", "skip"], ["Y"], domain=MS)
    model = make_model([node], [vi("X", F32, (2, 3, 8)), vi("bias", F32, (8,)), vi("skip", F32, (2, 3, 8))],
                       [vi("Y", F32, None)])
    feed = {"X": randn(rng, 2, 3, 8), "bias": randn(rng, 8), "skip": randn(rng, 2, 3, 8)}
    path = str(tmp_path / "model.onnx")
    onnx.save(model, path)
    np.savez(str(tmp_path / "in.npz"), **feed)
    got, _ = kiln_run_model(path, str(tmp_path / "in.npz"), str(tmp_path))
    np.testing.assert_allclose(got["Y"], feed["X"] + feed["bias"] + feed["skip"], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("with_bias,with_beta,sum_out", [(True, True, True), (False, True, False), (True, False, True)])
def test_skip_layer_norm(tmp_path, with_bias, with_beta, sum_out):
    rng = np.random.default_rng(5)
    h = 32
    ins = ["x", "skip", "gamma", "beta" if with_beta else "", "bias" if with_bias else ""]
    while ins[-1] == "":
        ins.pop()
    outs = ["y", "", "", "sum"] if sum_out else ["y"]
    node = helper.make_node("SkipLayerNormalization", ins, outs, domain=MS, epsilon=1e-5)
    inits = [("gamma", randn(rng, h)), ("beta", randn(rng, h)), ("bias", randn(rng, h))]
    inits = [(k, v) for k, v in inits if k in ins]
    model = make_model([node], [vi("x", F32, (2, 7, h)), vi("skip", F32, (2, 7, h))],
                       [vi(o, F32, None) for o in outs if o], inits)
    feed = {"x": randn(rng, 2, 7, h, scale=2.0), "skip": randn(rng, 2, 7, h)}
    run_and_compare(tmp_path, model, feed, "SkipLayerNormalization", atol=1e-4)


def test_layer_norm_in_opset14_model(tmp_path):
    """ORT writes its own LayerNormalization (ai.onnx domain) into opset-14 models."""
    rng = np.random.default_rng(6)
    node = helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1, epsilon=1e-6)
    model = make_model([node], [vi("x", F32, (3, 5, 24))], [vi("y", F32, None)],
                       [("g", randn(rng, 24)), ("b", randn(rng, 24))], opset=14)
    run_and_compare(tmp_path, model, {"x": randn(rng, 3, 5, 24, scale=4.0)}, "LayerNormalization-14", atol=1e-4)


def embed_model(rng, b, s, h, with_mask, with_segment):
    vocab, maxpos = 30, 16
    ins = ["ids", "seg" if with_segment else "", "word", "pos", "segemb" if with_segment else "", "gamma", "beta",
           "mask" if with_mask else ""]
    while ins[-1] == "":
        ins.pop()
    node = helper.make_node("EmbedLayerNormalization", ins, ["y", "mask_index", "emb_sum"], domain=MS, epsilon=1e-12)
    inits = [("word", randn(rng, vocab, h)), ("pos", randn(rng, maxpos, h)), ("segemb", randn(rng, 2, h)),
             ("gamma", randn(rng, h)), ("beta", randn(rng, h))]
    inputs = [vi(k, I32, (b, s)) for k in ["ids", "seg", "mask"] if k in ins]
    model = make_model([node], inputs, [vi("y", F32, None), vi("mask_index", I32, None), vi("emb_sum", F32, None)],
                       [(k, v) for k, v in inits if k in ins])
    feed = {"ids": rng.integers(0, vocab, (b, s)).astype(np.int32)}
    if with_segment:
        feed["seg"] = rng.integers(0, 2, (b, s)).astype(np.int32)
    if with_mask:
        mask = np.ones((b, s), np.int32)
        mask[0, s - 2:] = 0
        feed["mask"] = mask
    return model, feed


@pytest.mark.parametrize("with_mask,with_segment", [(True, True), (False, True), (True, False)])
def test_embed_layer_norm(tmp_path, with_mask, with_segment):
    rng = np.random.default_rng(7)
    model, feed = embed_model(rng, 2, 6, 16, with_mask, with_segment)
    run_and_compare(tmp_path, model, feed, "EmbedLayerNormalization", atol=1e-4)


def attention_model(rng, b, s, hidden, heads, mask_shape, mask_dtype=I32, **attrs):
    ins = ["x", "w", "bias"] + (["mask"] if mask_shape else [])
    node = helper.make_node("Attention", ins, ["y"], domain=MS, num_heads=heads, **attrs)
    inputs = [vi("x", F32, (b, s, hidden))] + ([vi("mask", mask_dtype, mask_shape)] if mask_shape else [])
    inits = [("w", randn(rng, hidden, 3 * hidden, scale=0.3)), ("bias", randn(rng, 3 * hidden, scale=0.1))]
    return make_model([node], inputs, [vi("y", F32, None)], inits)


@pytest.mark.parametrize("mask,attrs", [
    (None, {}),
    ("raw2d", {}),
    ("lengths", {}),
    ("raw3d", {}),
    (None, {"unidirectional": 1}),
    ("raw2d", {"scale": 0.2, "mask_filter_value": -1e4}),
])
def test_attention(tmp_path, mask, attrs):
    rng = np.random.default_rng(8)
    b, s, hidden, heads = 2, 5, 16, 2
    feed = {"x": randn(rng, b, s, hidden)}
    shape = None
    if mask == "raw2d":
        m = np.ones((b, s), np.int32)
        m[1, 3:] = 0
        feed["mask"], shape = m, (b, s)
    elif mask == "lengths":
        feed["mask"], shape = np.array([s, 3], np.int32), (b,)
    elif mask == "raw3d":
        m = (rng.random((b, s, s)) > 0.3).astype(np.int32)
        m[:, :, 0] = 1
        feed["mask"], shape = m, (b, s, s)
    model = attention_model(rng, b, s, hidden, heads, shape, **attrs)
    run_and_compare(tmp_path, model, feed, f"Attention/{mask}", atol=1e-4)


@pytest.mark.parametrize("with_bias,with_mask", [(False, False), (True, True)])
def test_multi_head_attention(tmp_path, with_bias, with_mask):
    rng = np.random.default_rng(9)
    b, s, l, d, heads = 2, 4, 6, 16, 4
    ins = ["q", "k", "v", "bias" if with_bias else "", "mask" if with_mask else ""]
    while ins[-1] == "":
        ins.pop()
    node = helper.make_node("MultiHeadAttention", ins, ["y"], domain=MS, num_heads=heads)
    inputs = [vi("q", F32, (b, s, d)), vi("k", F32, (b, l, d)), vi("v", F32, (b, l, d))]
    feed = {"q": randn(rng, b, s, d), "k": randn(rng, b, l, d), "v": randn(rng, b, l, d)}
    if with_mask:
        inputs.append(vi("mask", I32, (b, l)))
        m = np.ones((b, l), np.int32)
        m[0, 4:] = 0
        feed["mask"] = m
    inits = [("bias", randn(rng, 3 * d, scale=0.1))] if with_bias else []
    model = make_model([node], inputs, [vi("y", F32, None)], inits)
    run_and_compare(tmp_path, model, feed, "MultiHeadAttention", atol=1e-4)


def kiln_error(tmp_path, model, feed):
    path = str(tmp_path / "model.onnx")
    onnx.save(model, path)
    npz = str(tmp_path / "inputs.npz")
    np.savez(npz, **feed)
    proc = run_kiln(["run", path, "--inputs", npz, "--output-dir", str(tmp_path)])
    assert proc.returncode != 0
    return proc.stderr


def test_unknown_contrib_op_is_a_clean_error(tmp_path):
    node = helper.make_node("QOrderedMatMul", ["x", "x"], ["y"], domain=MS, name="q4")
    model = make_model([node], [vi("x", F32, (2, 2))], [vi("y", F32, None)])
    err = kiln_error(tmp_path, model, {"x": np.zeros((2, 2), np.float32)})
    assert "unsupported op 'QOrderedMatMul'" in err and "q4" in err and "com.microsoft" in err, err


def test_unsupported_attention_form_is_a_clean_error(tmp_path):
    rng = np.random.default_rng(10)
    model = attention_model(rng, 1, 3, 8, 2, None, do_rotary=1)
    model.graph.node[0].name = "attn0"
    err = kiln_error(tmp_path, model, {"x": randn(rng, 1, 3, 8)})
    assert "attn0" in err and "do_rotary" in err, err


def test_unknown_attribute_is_a_clean_error(tmp_path):
    node = helper.make_node("FastGelu", ["x"], ["y"], domain=MS, name="fg", frobnicate=1)
    model = make_model([node], [vi("x", F32, (2, 2))], [vi("y", F32, None)])
    err = kiln_error(tmp_path, model, {"x": np.zeros((2, 2), np.float32)})
    assert "fg" in err and "'frobnicate'" in err, err


# ---------------------------------------------------------------- a BERT-style model optimized by ORT


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    """tiny_bert_export.py's 2-layer BERT encoder, exported by PyTorch (opset 14)."""
    return torch_export(tmp_path_factory, "tiny_bert_export.py", "tiny_bert")


def torch_export(tmp_path_factory, script, name):
    if subprocess.run([TORCH_PYTHON, "-c", "import torch"], capture_output=True).returncode != 0:
        pytest.skip(f"{TORCH_PYTHON} has no torch (Debian's python3-torch)")
    path = str(tmp_path_factory.mktemp(name) / f"{name}.onnx")
    subprocess.run([TORCH_PYTHON, os.path.join(HERE, script), path], check=True, capture_output=True)
    return path


def bert_feed(rng, b=2, s=8):
    mask = np.ones((b, s), np.int64)
    mask[1, 5:] = 0  # right padding, as tokenizers write it
    return {"input_ids": rng.integers(0, 50, (b, s)).astype(np.int64), "attention_mask": mask,
            "token_type_ids": (np.arange(s)[None, :] >= s // 2).repeat(b, 0).astype(np.int64)}


def contrib_ops_of(path):
    return collections.Counter(n.op_type for n in onnx.load(path).graph.node if n.domain == MS)


def test_bert_optimized_by_transformers_optimizer(tmp_path, tiny_bert):
    from onnxruntime.transformers import optimizer
    # opt_level=0: the optimizer's own fusions (its onnxruntime pass would import torch).
    opt = optimizer.optimize_model(tiny_bert, model_type="bert", num_heads=2, hidden_size=32, opt_level=0)
    path = str(tmp_path / "bert_opt.onnx")
    opt.save_model_to_file(path)
    ops = contrib_ops_of(path)
    for op in ["EmbedLayerNormalization", "Attention", "SkipLayerNormalization", "BiasGelu"]:
        assert ops[op] > 0, f"the optimizer wrote no {op}: {ops}"
    run_and_compare(tmp_path, onnx.load(path), bert_feed(np.random.default_rng(11)), "bert/optimizer", atol=1e-4)


def test_bert_saved_at_ort_enable_extended(tmp_path, tiny_bert):
    path = str(tmp_path / "bert_ext.onnx")
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = path
    ort.InferenceSession(tiny_bert, so, providers=["CPUExecutionProvider"])
    ops = contrib_ops_of(path)
    assert ops["FusedMatMul"] > 0 and ops["BiasGelu"] > 0, f"ORT wrote no FusedMatMul/BiasGelu: {ops}"
    assert any(n.op_type == "LayerNormalization" for n in onnx.load(path).graph.node)
    run_and_compare(tmp_path, onnx.load(path), bert_feed(np.random.default_rng(12)), "bert/extended", atol=1e-4)


@pytest.mark.parametrize("with_bias,sum_out,eps", [(True, True, 1e-6), (False, False, None)])
def test_skip_simplified_layer_norm(tmp_path, with_bias, sum_out, eps):
    rng = np.random.default_rng(13)
    h = 24
    ins = ["x", "skip", "gamma"] + (["bias"] if with_bias else [])
    outs = ["y", "", "", "sum"] if sum_out else ["y"]
    attrs = {} if eps is None else {"epsilon": eps}  # None: the schema's default epsilon
    node = helper.make_node("SkipSimplifiedLayerNormalization", ins, outs, domain=MS, **attrs)
    inits = [("gamma", randn(rng, h))] + ([("bias", randn(rng, h))] if with_bias else [])
    model = make_model([node], [vi("x", F32, (2, 5, h)), vi("skip", F32, (2, 5, h))],
                       [vi(o, F32, None) for o in outs if o], inits)
    scale = 1e-4 if eps is None else 1.0  # tiny rows make the default epsilon matter
    feed = {"x": randn(rng, 2, 5, h, scale=2 * scale), "skip": randn(rng, 2, 5, h, scale=scale)}
    run_and_compare(tmp_path, model, feed, "SkipSimplifiedLayerNormalization", atol=1e-4)


def test_skip_layer_norm_default_epsilon(tmp_path):
    rng = np.random.default_rng(14)
    node = helper.make_node("SkipLayerNormalization", ["x", "skip", "gamma", "beta"], ["y"], domain=MS)
    model = make_model([node], [vi("x", F32, (1, 3, 16)), vi("skip", F32, (1, 3, 16))], [vi("y", F32, None)],
                       [("gamma", randn(rng, 16)), ("beta", randn(rng, 16))])
    # tiny rows make epsilon matter
    feed = {"x": randn(rng, 1, 3, 16, scale=1e-4), "skip": randn(rng, 1, 3, 16, scale=1e-4)}
    run_and_compare(tmp_path, model, feed, "SkipLayerNormalization/default-eps", atol=1e-4)


@pytest.mark.parametrize("opset", [14, 17])
def test_simplified_layer_norm(tmp_path, opset):
    """ORT's RMS norm, which it writes in the ai.onnx domain."""
    rng = np.random.default_rng(15)
    node = helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y"], axis=-1, epsilon=1e-6)
    model = make_model([node], [vi("x", F32, (2, 4, 20))], [vi("y", F32, None)], [("g", randn(rng, 20))], opset=opset)
    run_and_compare(tmp_path, model, {"x": randn(rng, 2, 4, 20, scale=3.0)}, "SimplifiedLayerNormalization", atol=1e-4)


def test_gpt2_style_optimized_by_transformers_optimizer(tmp_path, tmp_path_factory):
    """Pre-norm blocks: SkipLayerNormalization with its input_skip_bias_sum output, FastGelu."""
    from onnxruntime.transformers import optimizer
    plain = torch_export(tmp_path_factory, "tiny_gpt_export.py", "tiny_gpt")
    opt = optimizer.optimize_model(plain, model_type="gpt2", num_heads=2, hidden_size=32, opt_level=0)
    path = str(tmp_path / "gpt_opt.onnx")
    opt.save_model_to_file(path)
    ops = contrib_ops_of(path)
    assert ops["FastGelu"] > 0 and ops["SkipLayerNormalization"] > 0, f"the optimizer wrote {ops}"
    assert any(n.op_type == "SkipLayerNormalization" and len(n.output) == 4 and n.output[3]
               for n in onnx.load(path).graph.node), "no SkipLayerNormalization with its sum output"
    rng = np.random.default_rng(16)
    mask = np.ones((2, 8), np.int64)
    mask[1, 6:] = 0
    feed = {"input_ids": rng.integers(0, 100, (2, 8)).astype(np.int64), "attention_mask": mask}
    run_and_compare(tmp_path, onnx.load(path), feed, "gpt2/optimizer", atol=1e-4)


def test_attention_with_attention_bias(tmp_path):
    rng = np.random.default_rng(17)
    b, s, hidden, heads = 2, 4, 8, 2
    node = helper.make_node("Attention", ["x", "w", "bias", "mask", "", "abias"], ["y"], domain=MS, num_heads=heads)
    model = make_model([node], [vi("x", F32, (b, s, hidden)), vi("mask", I32, (b, s)), vi("abias", F32, (1, heads, s, s))],
                       [vi("y", F32, None)],
                       [("w", randn(rng, hidden, 3 * hidden, scale=0.3)), ("bias", randn(rng, 3 * hidden, scale=0.1))])
    mask = np.ones((b, s), np.int32)
    mask[0, 3:] = 0
    feed = {"x": randn(rng, b, s, hidden), "mask": mask, "abias": randn(rng, 1, heads, s, s)}
    run_and_compare(tmp_path, model, feed, "Attention/attention_bias", atol=1e-4)


def test_multi_head_attention_key_lengths(tmp_path):
    rng = np.random.default_rng(18)
    b, s, l, d, heads = 2, 3, 5, 8, 2
    node = helper.make_node("MultiHeadAttention", ["q", "k", "v", "", "mask"], ["y"], domain=MS, num_heads=heads)
    model = make_model([node], [vi("q", F32, (b, s, d)), vi("k", F32, (b, l, d)), vi("v", F32, (b, l, d)),
                                vi("mask", I32, (b,))], [vi("y", F32, None)])
    feed = {"q": randn(rng, b, s, d), "k": randn(rng, b, l, d), "v": randn(rng, b, l, d),
            "mask": np.array([5, 2], np.int32)}
    run_and_compare(tmp_path, model, feed, "MultiHeadAttention/key-lengths", atol=1e-4)


@pytest.mark.parametrize("interleaved,offset,num_heads,rot_dim", [(0, False, 2, None), (1, False, 2, None),
                                                                  (0, True, 2, None), (0, False, None, None),
                                                                  (0, False, 2, 4)])
def test_rotary_embedding(tmp_path, interleaved, offset, num_heads, rot_dim):
    rng = np.random.default_rng(19)
    b, s, heads, head, maxpos = 2, 5, 2, 8, 16
    rd = rot_dim or head
    attrs = {"interleaved": interleaved}
    if num_heads:
        attrs["num_heads"] = num_heads
    if rot_dim:
        attrs["rotary_embedding_dim"] = rot_dim
    node = helper.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], domain=MS, **attrs)
    angles = np.arange(maxpos)[:, None] * (1.0 / 10000 ** (np.arange(0, rd, 2) / rd))[None, :]
    pos = np.array([3], np.int64) if offset else rng.integers(0, maxpos, (b, s)).astype(np.int64)
    model = make_model([node], [vi("x", F32, (b, s, heads * head)), vi("pos", TensorProto.INT64, pos.shape)],
                       [vi("y", F32, None)],
                       [("cos", np.cos(angles).astype(np.float32)), ("sin", np.sin(angles).astype(np.float32))])
    run_and_compare(tmp_path, model, {"x": randn(rng, b, s, heads * head), "pos": pos}, "RotaryEmbedding", atol=1e-5)


def test_embed_layer_norm_position_ids(tmp_path):
    rng = np.random.default_rng(20)
    b, s, h = 2, 5, 8
    ins = ["ids", "seg", "word", "pos", "segemb", "gamma", "beta", "", "pids"]
    node = helper.make_node("EmbedLayerNormalization", ins, ["y", "mask_index"], domain=MS)
    inits = [("word", randn(rng, 20, h)), ("pos", randn(rng, 16, h)), ("segemb", randn(rng, 2, h)),
             ("gamma", randn(rng, h)), ("beta", randn(rng, h))]
    model = make_model([node], [vi("ids", I32, (b, s)), vi("seg", I32, (b, s)), vi("pids", I32, (b, s))],
                       [vi("y", F32, None), vi("mask_index", I32, None)], inits)
    feed = {"ids": rng.integers(0, 20, (b, s)).astype(np.int32), "seg": rng.integers(0, 2, (b, s)).astype(np.int32),
            "pids": rng.integers(0, 16, (b, s)).astype(np.int32)}
    run_and_compare(tmp_path, model, feed, "EmbedLayerNormalization/position_ids", atol=1e-4)


def test_attention_qkv_hidden_sizes(tmp_path):
    """Q/K hidden 8, V hidden 12: the output is (B, S, 12)."""
    rng = np.random.default_rng(21)
    b, s, hin, heads = 2, 4, 6, 2
    node = helper.make_node("Attention", ["x", "w", "bias"], ["y"], domain=MS, num_heads=heads,
                            qkv_hidden_sizes=[8, 8, 12])
    model = make_model([node], [vi("x", F32, (b, s, hin))], [vi("y", F32, None)],
                       [("w", randn(rng, hin, 28, scale=0.3)), ("bias", randn(rng, 28, scale=0.1))])
    run_and_compare(tmp_path, model, {"x": randn(rng, b, s, hin)}, "Attention/qkv_hidden_sizes", atol=1e-4)
