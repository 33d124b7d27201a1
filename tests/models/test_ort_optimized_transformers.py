"""Transformer models as ONNX Runtime's tools write them, run by Kiln against ONNX Runtime.

BERT-base-shaped (hidden 768, 12 heads) and GPT-2-small-shaped (hidden 768, 12 heads, past state)
models with 2 layers (the benchmark, bench/ort_optimized.py, runs the full 12), exported by
PyTorch, then optimized by onnxruntime.transformers.optimizer (model_type 'bert' / 'gpt2': Attention
with mask_index, past/present and unidirectional, EmbedLayerNormalization, SkipLayerNormalization,
BiasGelu / FastGelu) and, separately, saved by ORT's graph optimizer at ORT_ENABLE_EXTENDED
(FusedMatMul, BiasGelu, LayerNormalization at opset 14). Each is run by `kiln run` and by ONNX Runtime
on the same inputs; every output (present state included) must match. Attention's past state forms
are also checked one by one on small onnx.helper models."""
import collections
import os
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from kiln_helpers import assert_matches_ort, kiln_run_model, ort_outputs

MS = "com.microsoft"
TORCH_PYTHON = "/usr/bin/python3"  # Debian's python3-torch exports the models
HERE = os.path.dirname(os.path.abspath(__file__))
HIDDEN, HEADS, LAYERS = 768, 12, 2


def torch_export(tmp_path_factory, script, name, *args):
    if subprocess.run([TORCH_PYTHON, "-c", "import torch"], capture_output=True).returncode != 0:
        pytest.skip(f"{TORCH_PYTHON} has no torch (Debian's python3-torch)")
    path = str(tmp_path_factory.mktemp(name) / f"{name}.onnx")
    subprocess.run([TORCH_PYTHON, os.path.join(HERE, script), path, *map(str, args)], check=True,
                   capture_output=True)
    return path


def transformers_optimized(plain, model_type, out):
    from onnxruntime.transformers import optimizer
    # opt_level=0: the optimizer's own fusions, as its docs advise for CPU-portable models.
    optimizer.optimize_model(plain, model_type=model_type, num_heads=HEADS, hidden_size=HIDDEN,
                             opt_level=0).save_model_to_file(out)
    return out


def ort_extended(plain, out):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = out
    ort.InferenceSession(plain, so, providers=["CPUExecutionProvider"])
    return out


def contrib_nodes(path):
    return [n for n in onnx.load(path).graph.node if n.domain == MS]


def compare(tmp_path, path, feed, label, atol=2e-4):
    npz = str(tmp_path / "inputs.npz")
    np.savez(npz, **feed)
    out_dir = tmp_path / "out"
    out_dir.mkdir(exist_ok=True)
    got, _ = kiln_run_model(path, npz, str(out_dir))
    want = ort_outputs(path, feed)
    assert set(got) == set(want), f"{label}: Kiln wrote {sorted(got)}, ORT {sorted(want)}"
    assert_matches_ort(got, want, label, rtol=1e-3, atol=atol)


# ---------------------------------------------------------------- BERT-base shaped


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return torch_export(tmp_path_factory, "tiny_bert_export.py", "bert", HIDDEN, HEADS, LAYERS)


def bert_feed(seed, b=2, s=16):
    rng = np.random.default_rng(seed)
    mask = np.ones((b, s), np.int64)
    mask[1, 11:] = 0  # right padding, as tokenizers write it
    return {"input_ids": rng.integers(0, 600, (b, s)).astype(np.int64), "attention_mask": mask,
            "token_type_ids": (np.arange(s)[None, :] >= s // 2).repeat(b, 0).astype(np.int64)}


def test_bert_base_transformers_optimizer(tmp_path, bert):
    path = transformers_optimized(bert, "bert", str(tmp_path / "bert_opt.onnx"))
    ops = collections.Counter(n.op_type for n in contrib_nodes(path))
    assert ops["Attention"] == LAYERS and ops["EmbedLayerNormalization"] == 1, ops
    assert ops["SkipLayerNormalization"] == 2 * LAYERS and ops["BiasGelu"] + ops["FastGelu"] == LAYERS, ops
    compare(tmp_path, path, bert_feed(1), "bert-base/optimizer")


def test_bert_base_ort_enable_extended(tmp_path, bert):
    path = ort_extended(bert, str(tmp_path / "bert_ext.onnx"))
    ops = collections.Counter(n.op_type for n in contrib_nodes(path))
    assert ops["FusedMatMul"] > 0 and ops["BiasGelu"] > 0, ops
    compare(tmp_path, path, bert_feed(2), "bert-base/extended")


# ---------------------------------------------------------------- GPT-2 small shaped, with past state


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    return torch_export(tmp_path_factory, "gpt2_past_export.py", "gpt2", HIDDEN, HEADS, LAYERS)


def gpt2_feed(seed, b=2, s=4, past=6):
    rng = np.random.default_rng(seed)
    mask = np.ones((b, past + s), np.int64)
    mask[b - 1, :2] = 0  # left padding (of the last row), as batched generation writes it
    feed = {"input_ids": rng.integers(0, 2000, (b, s)).astype(np.int64),
            "position_ids": np.arange(past, past + s)[None, :].repeat(b, 0).astype(np.int64),
            "attention_mask": mask}
    for i in range(LAYERS):
        feed[f"past_{i}"] = rng.standard_normal((2, b, HEADS, past, HIDDEN // HEADS)).astype(np.float32)
    return feed


def test_gpt2_small_transformers_optimizer(tmp_path, gpt2):
    path = transformers_optimized(gpt2, "gpt2", str(tmp_path / "gpt2_opt.onnx"))
    nodes = contrib_nodes(path)
    attn = [n for n in nodes if n.op_type == "Attention"]
    assert len(attn) == LAYERS, collections.Counter(n.op_type for n in nodes)
    for n in attn:  # the GPT-2 form: past in, present out, causal
        assert len(n.input) >= 5 and n.input[4] and len(n.output) == 2 and n.output[1], n
        assert helper.get_attribute_value(next(a for a in n.attribute if a.name == "unidirectional")) == 1
    assert any(n.op_type == "FastGelu" for n in nodes)
    compare(tmp_path, path, gpt2_feed(3), "gpt2-small/optimizer")
    compare(tmp_path, path, gpt2_feed(4, b=1, s=1, past=9), "gpt2-small/optimizer, one new token")
    compare(tmp_path, path, gpt2_feed(7, b=1, s=5, past=0), "gpt2-small/optimizer, empty past")


def test_gpt2_small_ort_enable_extended(tmp_path, gpt2):
    path = ort_extended(gpt2, str(tmp_path / "gpt2_ext.onnx"))
    assert contrib_nodes(path), "ORT wrote no com.microsoft op"
    compare(tmp_path, path, gpt2_feed(5), "gpt2-small/extended")
    # The prompt: no cached tokens yet (past of length 0; an empty tensor crashed a schedule).
    compare(tmp_path, path, gpt2_feed(6, b=1, s=5, past=0), "gpt2-small/extended, empty past")


# ---------------------------------------------------------------- Attention's past state, op by op


@pytest.mark.parametrize("mask_form,unidirectional,p", [
    (None, 1, 4), ("raw2d", 1, 4), ("raw2d", 0, 4), ("lengths", 1, 4), ("raw3d", 0, 4),
    ("raw2d", 1, 0)])  # a left-padded prompt: its first queries see only padding
def test_attention_with_past(tmp_path, mask_form, unidirectional, p):
    rng = np.random.default_rng(6)
    b, s, hidden, heads = 2, 3, 16, 2
    t = p + s
    feed = {"x": rng.standard_normal((b, s, hidden)).astype(np.float32),
            "past": rng.standard_normal((2, b, heads, p, hidden // heads)).astype(np.float32)}
    mask_name = ""
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, (b, s, hidden)),
              helper.make_tensor_value_info("past", TensorProto.FLOAT, (2, b, heads, p, hidden // heads))]
    if mask_form:
        mask = {"raw2d": np.array([[1] * t, [0, 0] + [1] * (t - 2)]),
                "lengths": np.array([t, t - 2]),
                "raw3d": (rng.random((b, s, t)) > 0.3) | (np.arange(t) == t - 1)}[mask_form].astype(np.int32)
        feed["mask"] = mask
        mask_name = "mask"
        inputs.append(helper.make_tensor_value_info("mask", TensorProto.INT32, mask.shape))
    node = helper.make_node("Attention", ["x", "w", "bias", mask_name, "past"], ["y", "present"], domain=MS,
                            num_heads=heads, unidirectional=unidirectional)
    inits = [numpy_helper.from_array((rng.standard_normal((hidden, 3 * hidden)) * 0.3).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(3 * hidden).astype(np.float32), "bias")]
    graph = helper.make_graph([node], "attn_past", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                                                            helper.make_tensor_value_info("present", TensorProto.FLOAT, None)],
                              initializer=inits)
    model = helper.make_model(graph, ir_version=8, opset_imports=[helper.make_opsetid("", 17),
                                                                  helper.make_opsetid(MS, 1)])
    path = str(tmp_path / "attn.onnx")
    onnx.save(model, path)
    compare(tmp_path, path, feed, f"Attention past mask={mask_form} unidirectional={unidirectional}", atol=1e-4)
