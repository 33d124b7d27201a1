"""Dim arithmetic on the symbolic path (issue 23, docs/dynamic_shapes.md): models whose
Reshape / Expand / Slice operands are computed from Shape(x), as PyTorch exports them, compile
once for every shape and match ONNX Runtime. The synthetic model needs no download; the real
all-MiniLM-L6-v2 runs when scripts/export_minilm.py has exported it (else the test skips)."""
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln

H = 16


class _Graph:
    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def const(self, value, dtype=np.int64):
        self.n += 1
        name = f"c{self.n}"
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def op(self, op_type, inputs, **attrs):
        self.n += 1
        out = f"{op_type.lower()}{self.n}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def size(self, x, k):
        """x.size(k) as a [1] tensor: Unsqueeze(Gather(Shape(x), k))."""
        return self.op("Unsqueeze", [self.op("Gather", [self.op("Shape", [x]), self.const(k)], axis=0), self.const([0])])

    def expand_as(self, x, like):
        """x.expand(like.size()) with PyTorch's -1 convention: where(shape == -1, 1, shape)."""
        shape = self.op("Concat", [self.size(like, k) for k in range(3)], axis=0)
        ones = self.op("ConstantOfShape", [self.op("Shape", [shape])],
                       value=numpy_helper.from_array(np.array([1], np.int64)))
        minus = self.op("Mul", [ones, self.const(-1)])
        return self.op("Expand", [x, self.op("Where", [self.op("Equal", [shape, minus]), ones, shape])])


def _exporter_patterns_model(path, seed=0):
    """An embedder in the shape-arithmetic style of PyTorch exports: position ids sliced from a
    buffer by Shape(ids)[1], token types expanded from a buffer and from ConstantOfShape, heads split by x.size()[:-1] + (4, 4) and merged by
    x.size()[:2] + (16,), rows flattened to [batch*seq, 16] by Mul(size(0), size(1)), masked mean
    pooling through an Expand to a computed shape, the rows viewed back as [batch, seq, 16]
    (GPT-2's Conv1D: KilnReshape), ReduceSum along seq, Clip, ReduceL2, Max and a
    normalizing Div; also ReduceMean along seq, a written-out LayerNorm, the first token (Gather along seq), Concat
    along seq (a [batch, 2*seq+1, 32] output) and x[:, 1:, :8] ([batch, seq-1, 8])."""
    rng = np.random.default_rng(seed)
    g = _Graph()
    f32 = lambda *s: g.const(rng.standard_normal(s) * 0.5, np.float32)  # noqa: E731
    emb = g.op("Gather", [f32(50, H), "ids"])
    pos_ids = g.op("Slice", [g.const(np.arange(64)[None, :]), g.const([0]), g.size("ids", 1), g.const([1]),
                             g.const([1])])
    h = g.op("Add", [emb, g.op("Gather", [f32(64, H), pos_ids])])
    # Token types without an input, as newer and older BertModels write them:
    # buffer[:, :seq].expand(batch, seq) and torch.zeros(ids.size()) (ConstantOfShape).
    types = g.op("Slice", [g.const(np.ones((1, 64))), g.const([0]), g.size("ids", 1), g.const([1])])
    types = g.op("Expand", [types, g.op("Concat", [g.size("ids", 0), g.size("ids", 1)], axis=0)])
    zeros = g.op("ConstantOfShape", [g.op("Shape", ["ids"])], value=numpy_helper.from_array(np.array([0], np.int64)))
    h = g.op("Add", [h, g.op("Gather", [f32(2, H), types])])
    h = g.op("Add", [h, g.op("Gather", [f32(2, H), zeros])])
    split = g.op("Reshape", [h, g.op("Concat", [g.size(h, 0), g.size(h, 1), g.const([4, 4])], axis=0)])
    t = g.op("Transpose", [g.op("Tanh", [g.op("Transpose", [split], perm=[0, 2, 1, 3])])], perm=[0, 2, 1, 3])
    prefix = g.op("Slice", [g.op("Shape", [t]), g.const([0]), g.const([-2]), g.const([0])])
    merged = g.op("Reshape", [t, g.op("Concat", [prefix, g.const([H])], axis=0)])
    rows = g.op("Mul", [g.size(merged, 0), g.size(merged, 1)])
    flat = g.op("Reshape", [merged, g.op("Concat", [rows, g.const([H])], axis=0)])
    g.nodes.append(helper.make_node("Relu", [g.op("Add", [g.op("MatMul", [flat, f32(H, H)]), f32(H)])], ["rows"]))
    # GPT-2's Conv1D: x.view(-1, x.size(-1)) @ W, then .view(x.size()[:-1] + (nf,)) and a residual.
    size_out = g.op("Concat", [g.op("Slice", [g.op("Shape", [merged]), g.const([0]), g.const([-1])]), g.const([H])], axis=0)
    g.nodes.append(helper.make_node("Add", [g.op("Reshape", ["rows", size_out]), merged], ["unflat"]))
    mask = g.op("Cast", [g.op("Unsqueeze", ["mask", g.const([-1])])], to=TensorProto.FLOAT)
    mask = g.expand_as(mask, merged)
    summed = g.op("ReduceSum", [g.op("Mul", [merged, mask]), g.const([1])], keepdims=0)
    counts = g.op("Clip", [g.op("ReduceSum", [mask, g.const([1])], keepdims=0), g.const(1e-9, np.float32)])
    pooled = g.op("Div", [summed, counts])
    norm = g.op("Max", [g.op("ReduceL2", [pooled], axes=[1], keepdims=1), g.const(1e-12, np.float32)])
    g.nodes.append(helper.make_node("Div", [pooled, g.op("Expand", [norm, g.op("Shape", [pooled])])], ["embedding"]))
    g.nodes.append(helper.make_node("ReduceMean", [merged], ["mean_seq"], axes=[1], keepdims=1))
    # nn.LayerNorm at opset 14 (written out: one LayerNormalization on the symbolic path).
    mean = g.op("ReduceMean", [merged], axes=[-1])
    d = g.op("Sub", [merged, mean])
    var = g.op("ReduceMean", [g.op("Pow", [d, g.const(2.0, np.float32)])], axes=[-1])
    norm_d = g.op("Div", [d, g.op("Sqrt", [g.op("Add", [var, g.const(1e-5, np.float32)])])])
    g.nodes.append(helper.make_node("Add", [g.op("Mul", [norm_d, f32(H)]), f32(H)], ["ln"]))
    # The first token (a classifier's pooling) and a Concat along seq ([batch, 2*seq + 1, 32]).
    g.nodes.append(helper.make_node("Gather", [merged, g.const(0)], ["first"], axis=1))
    wide = g.op("Concat", [merged, g.op("Tanh", [merged])], axis=2)
    first = g.op("Unsqueeze", ["first", g.const([1])])
    cat = g.op("Concat", [wide, g.op("Concat", [first, first], axis=2), wide], axis=1)
    g.nodes.append(helper.make_node("ReduceMax", [cat], ["cat_max"], axes=[1], keepdims=0))
    g.nodes.append(helper.make_node("Mul", [cat, g.const(2.0, np.float32)], ["cat"]))
    # x[:, 1:, :8] (every token but the first: [batch, seq-1, 8]), summed along seq.
    tail = g.op("Slice", [merged, g.const([1, 0]), g.const([2**63 - 1, 8]), g.const([1, 2])])
    g.nodes.append(helper.make_node("ReduceSum", [tail, g.const([1])], ["tail_sum"], keepdims=0))
    ints = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"]) for n in ("ids", "mask")]
    outs = [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", H]),
            helper.make_tensor_value_info("rows", TensorProto.FLOAT, [None, H]),
            helper.make_tensor_value_info("mean_seq", TensorProto.FLOAT, ["batch", 1, H]),
            helper.make_tensor_value_info("first", TensorProto.FLOAT, ["batch", H]),
            helper.make_tensor_value_info("ln", TensorProto.FLOAT, ["batch", "seq", H]),
            helper.make_tensor_value_info("unflat", TensorProto.FLOAT, ["batch", "seq", H]),
            helper.make_tensor_value_info("cat_max", TensorProto.FLOAT, ["batch", 2 * H]),
            helper.make_tensor_value_info("cat", TensorProto.FLOAT, ["batch", None, 2 * H]),
            helper.make_tensor_value_info("tail_sum", TensorProto.FLOAT, ["batch", 8])]
    graph = helper.make_graph(g.nodes, "exporter_patterns", ints, outs, g.inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), path)


def _session(path):
    so = kiln.SessionOptions()
    so.intra_op_num_threads = 2
    return kiln.InferenceSession(path, so)


def _check_shapes(sess, ref, feed_of, shapes, atol):
    for batch, seq in shapes:
        feed = feed_of(batch, seq)
        got, want = sess.run(None, feed), ref.run(None, feed)
        for g, w in zip(got, want):
            assert g.shape == w.shape, (batch, seq)
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=atol, err_msg=f"batch {batch} seq {seq}")
    st = sess.stats()
    assert st["symbolic"], st["symbolic_reason"]
    assert st["compiles"] == 1


def test_exporter_shape_patterns_compile_once(tmp_path):
    path = str(tmp_path / "patterns.onnx")
    _exporter_patterns_model(path)
    sess = _session(path)
    assert sess.stats()["symbolic"], sess.stats()["symbolic_reason"]
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(3)

    def feed_of(batch, seq):
        mask = np.ones((batch, seq), np.int64)
        mask[0, (seq + 1) // 2:] = 0  # a padded sentence
        return {"ids": rng.integers(0, 50, (batch, seq)).astype(np.int64), "mask": mask}

    _check_shapes(sess, ref, feed_of, [(1, 7), (3, 64), (8, 1), (2, 33), (1, 7)], atol=1e-5)


def test_sequence_longer_than_the_position_table_is_an_error(tmp_path):
    """Position ids sliced from a 64-row buffer: at seq 65 ONNX Runtime fails (the Slice stops at
    64 rows and the Add's shapes disagree); Kiln's symbolic kernels would read the last row again,
    so the dim's bound is checked when the run binds it: an error naming the dim and the bound."""
    path = str(tmp_path / "patterns.onnx")
    _exporter_patterns_model(path)
    sess = _session(path)
    assert sess.stats()["symbolic"], sess.stats()["symbolic_reason"]
    feed = {"ids": np.ones((1, 65), np.int64), "mask": np.ones((1, 65), np.int64)}
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    with pytest.raises(Exception):
        ref.run(None, feed)
    with pytest.raises(kiln.InvalidArgument, match=r"dimension 'seq' is 65 .* at most 64"):
        sess.run(None, feed)
    ok = {"ids": np.ones((1, 64), np.int64), "mask": np.ones((1, 64), np.int64)}
    for g, w in zip(sess.run(None, ok), ref.run(None, ok)):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def _minilm_dir():
    base = os.environ.get("KILN_MINILM_REAL_DIR")
    if base:
        return base
    cache = os.environ.get("KILN_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "kiln")
    for root in (cache, os.path.join(os.path.expanduser("~"), ".cache", "kiln")):
        if os.path.exists(os.path.join(root, "models", "minilm-real", "model.onnx")):
            return os.path.join(root, "models", "minilm-real")
    return None


def test_real_minilm_compiles_once_for_every_shape():
    """The exported all-MiniLM-L6-v2 (scripts/export_minilm.py) at batch 1, 3, 8 x seq 7, 64, 128
    in one session against ONNX Runtime, and the tokenized sentences against PyTorch."""
    d = _minilm_dir()
    if d is None:
        pytest.skip("no exported all-MiniLM-L6-v2 (run /usr/bin/python3 scripts/export_minilm.py)")
    path = os.path.join(d, "model.onnx")
    sess = _session(path)
    assert sess.stats()["symbolic"], sess.stats()["symbolic_reason"]
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(5)

    def feed_of(batch, seq):
        ids = rng.integers(1000, 30000, (batch, seq)).astype(np.int64)
        mask = np.ones((batch, seq), np.int64)
        mask[-1, seq // 2 + 1:] = 0
        return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}

    _check_shapes(sess, ref, feed_of, [(b, s) for b in (1, 3, 8) for s in (7, 64, 128)], atol=2e-5)
    r = np.load(os.path.join(d, "reference.npz"))
    got = sess.run(None, {k: r[k] for k in ("input_ids", "attention_mask", "token_type_ids")})[0]
    np.testing.assert_allclose(got, r["torch_f64"], rtol=0, atol=1e-5)
    assert sess.stats()["compiles"] == 1
