"""kiln.symbolic_shapes (docs/dynamic_shapes.md): a model compiled once runs at every batch size
against ONNX Runtime, with one compile in the stats; a dim two inputs disagree on is an error
naming the input, the dim and both values; a model outside the symbolic subset compiles per
shape as before and says why."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln


def _mlp(path, d_in=48, hidden=70, d_out=33, seed=0):
    """y = Relu(x W1 + b1) W2 + b2 with x: [batch, d_in] (batch symbolic)."""
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32) * 0.2, n)
             for n, s in [("W1", (d_in, hidden)), ("b1", (hidden,)), ("W2", (hidden, d_out)), ("b2", (d_out,))]]
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h0"]), helper.make_node("Add", ["h0", "b1"], ["h1"]),
             helper.make_node("Relu", ["h1"], ["h"]), helper.make_node("MatMul", ["h", "W2"], ["y0"]),
             helper.make_node("Add", ["y0", "b2"], ["y"])]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", d_in])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", d_out])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def _seq_model(path, width=32, seed=1):
    """z = Tanh((a + b) W) * 0.5 with a, b: [batch, seq, width] sharing both symbolic dims."""
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(rng.standard_normal((width, width)).astype(np.float32) * 0.2, "W"),
             numpy_helper.from_array(np.array(0.5, np.float32), "half")]
    nodes = [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("MatMul", ["s", "W"], ["m"]),
             helper.make_node("Tanh", ["m"], ["t"]), helper.make_node("Mul", ["t", "half"], ["z"])]
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", "seq", width]) for n in ("a", "b")]
    g = helper.make_graph(nodes, "seq", vi, [helper.make_tensor_value_info("z", TensorProto.FLOAT,
                                                                            ["batch", "seq", width])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def _session(path, symbolic=True):
    so = kiln.SessionOptions()
    so.intra_op_num_threads = 2
    so.add_session_config_entry("kiln.symbolic_shapes", "1" if symbolic else "0")
    return kiln.InferenceSession(path, so)


def test_mlp_one_compile_every_batch(tmp_path):
    path = str(tmp_path / "mlp.onnx")
    _mlp(path)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    sess = _session(path)
    assert sess.stats()["symbolic"], sess.stats()["symbolic_reason"]
    rng = np.random.default_rng(7)
    for batch in [1, 3, 8, 3, 64]:
        x = rng.standard_normal((batch, 48)).astype(np.float32)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], ref.run(None, {"x": x})[0], rtol=1e-4, atol=1e-4)
    st = sess.stats()
    assert st["compiles"] == 1 and st["specializations"] == 1


def test_batch_and_seq_one_compile(tmp_path):
    path = str(tmp_path / "seq.onnx")
    _seq_model(path)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    sess = _session(path)
    assert sess.stats()["symbolic"], sess.stats()["symbolic_reason"]
    rng = np.random.default_rng(3)
    for batch in [1, 3, 8]:
        for seq in [7, 64, 128]:
            feed = {n: rng.standard_normal((batch, seq, 32)).astype(np.float32) for n in ("a", "b")}
            np.testing.assert_allclose(sess.run(None, feed)[0], ref.run(None, feed)[0], rtol=1e-4, atol=1e-4)
    assert sess.stats()["compiles"] == 1


def test_disagreeing_dim_is_an_error(tmp_path):
    path = str(tmp_path / "seq.onnx")
    _seq_model(path)
    sess = _session(path)
    a = np.zeros((2, 7, 32), np.float32)
    b = np.zeros((2, 9, 32), np.float32)
    with pytest.raises(kiln.InvalidArgument) as e:
        sess.run(None, {"a": a, "b": b})
    msg = str(e.value)
    assert "'b'" in msg and "'seq'" in msg and "7" in msg and "9" in msg, msg


def test_unsupported_model_compiles_per_shape(tmp_path):
    path = str(tmp_path / "sm.onnx")
    # Tan is outside the symbolic subset.
    g = helper.make_graph([helper.make_node("Tan", ["x"], ["y"])], "tan",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    sess = _session(path)
    st = sess.stats()
    assert not st["symbolic"] and "Tan" in st["symbolic_reason"]
    for n in [2, 5]:
        x = np.random.default_rng(n).standard_normal((n, 8)).astype(np.float32)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], ref.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)
    assert sess.stats()["compiles"] == 2


def _embed_model(path, vocab=50, width=32, classes=16, seed=2):
    """ids [batch, seq] -> Gather(table) -> LayerNorm -> MatMul -> Softmax(-1) -> Transpose: out
    [batch, classes, seq]."""
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(rng.standard_normal((vocab, width)).astype(np.float32), "table"),
             numpy_helper.from_array(rng.standard_normal(width).astype(np.float32), "gamma"),
             numpy_helper.from_array(rng.standard_normal(width).astype(np.float32), "beta"),
             numpy_helper.from_array(rng.standard_normal((width, classes)).astype(np.float32) * 0.3, "W")]
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"], axis=0),
             helper.make_node("LayerNormalization", ["e", "gamma", "beta"], ["n"], axis=-1, epsilon=1e-5),
             helper.make_node("MatMul", ["n", "W"], ["l"]),
             helper.make_node("Softmax", ["l"], ["p"], axis=-1),
             helper.make_node("Transpose", ["p"], ["y"], perm=[0, 2, 1])]
    g = helper.make_graph(nodes, "embed", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", classes, "seq"])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_gather_layernorm_softmax_transpose(tmp_path):
    path = str(tmp_path / "embed.onnx")
    _embed_model(path)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    sess = _session(path)
    assert sess.stats()["symbolic"], sess.stats()["symbolic_reason"]
    rng = np.random.default_rng(5)
    for batch, seq in [(1, 7), (3, 64), (8, 128), (1, 1)]:
        feed = {"ids": rng.integers(0, 50, (batch, seq)).astype(np.int64)}
        np.testing.assert_allclose(sess.run(None, feed)[0], ref.run(None, feed)[0], rtol=1e-4, atol=1e-5)
    assert sess.stats()["compiles"] == 1


def test_minilm_style_encoder_one_compile(tmp_path):
    """bench/dynamic_shapes.py's encoder at toy size with position ids as an input: attention
    with symbolic [b, h, s, s] scores, head reshapes, masks, LayerNorm, GELU."""
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                    "bench"))
    from dynamic_shapes import feed_of, minilm_model
    path = str(tmp_path / "encoder.onnx")
    minilm_model(path, layers=2, hidden=32, heads=4, ffn=64, vocab=50, seed=3, position_ids_input=True)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    sess = _session(path)
    assert sess.stats()["symbolic"], sess.stats()["symbolic_reason"]
    for batch in [1, 3, 8]:
        for seq in [7, 64, 128]:
            feed = feed_of(batch, seq, vocab=50)
            feed["position_ids"] = np.tile(np.arange(seq, dtype=np.int64), (batch, 1))
            np.testing.assert_allclose(sess.run(None, feed)[0], ref.run(None, feed)[0], rtol=1e-4, atol=1e-4)
    assert sess.stats()["compiles"] == 1


def test_encoder_with_range_positions_one_compile(tmp_path):
    """The same encoder computing its positions as Range(0, Shape(ids)[1], 1), as exporters
    write them: the symbolic compile makes the positions from the dim (KilnDimRange) and compiles
    once."""
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                    "bench"))
    from dynamic_shapes import feed_of, minilm_model
    path = str(tmp_path / "encoder.onnx")
    minilm_model(path, layers=1, hidden=32, heads=4, ffn=64, vocab=50, seed=3)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    sess = _session(path)
    st = sess.stats()
    assert st["symbolic"], st["symbolic_reason"]
    for batch, seq in [(1, 1), (2, 9), (3, 33), (1, 64)]:
        feed = feed_of(batch, seq, vocab=50)
        np.testing.assert_allclose(sess.run(None, feed)[0], ref.run(None, feed)[0], rtol=1e-4, atol=1e-4)
    assert sess.stats()["compiles"] == 1


def _range_model(path, start, shape_start=None, k=1):
    """y = Gather(table, Range(start, Shape(ids)[k], 1)) + 0 * ids, ids: [batch, seq] int64; the
    Shape takes opset 15's start attribute when shape_start is given."""
    table = numpy_helper.from_array(np.arange(200 * 4, dtype=np.float32).reshape(200, 4), "table")
    consts = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in [("s", start), ("one", 1), ("k", k)]]
    attrs = {} if shape_start is None else {"start": shape_start}
    nodes = [helper.make_node("Shape", ["ids"], ["shape"], **attrs),
             helper.make_node("Gather", ["shape", "k"], ["n"], axis=0),
             helper.make_node("Range", ["s", "n", "one"], ["pos"]),
             helper.make_node("Gather", ["table", "pos"], ["y"], axis=0)]
    g = helper.make_graph(nodes, "range", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["seq", 4])], [table] + consts)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


@pytest.mark.parametrize("shape_start,k", [(None, 1), (None, -1), (1, 0)])
def test_range_of_a_symbolic_dim(tmp_path, shape_start, k):
    path = str(tmp_path / "range.onnx")
    _range_model(path, 0, shape_start, k)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    sess = _session(path)
    assert sess.stats()["symbolic"], sess.stats()["symbolic_reason"]
    for batch, seq in [(1, 1), (2, 17), (1, 130)]:
        feed = {"ids": np.zeros((batch, seq), np.int64)}
        np.testing.assert_array_equal(sess.run(None, feed)[0], ref.run(None, feed)[0])
    assert sess.stats()["compiles"] == 1


def test_range_not_from_zero_compiles_per_shape(tmp_path):
    """Range(2, seq, 1) has seq - 2 elements: no symbol of the inputs, so per shape, saying why."""
    path = str(tmp_path / "range2.onnx")
    _range_model(path, 2)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    sess = _session(path)
    st = sess.stats()
    assert not st["symbolic"] and st["symbolic_reason"], st
    feed = {"ids": np.zeros((1, 9), np.int64)}
    np.testing.assert_array_equal(sess.run(None, feed)[0], ref.run(None, feed)[0])


def test_convolution_and_pad_compile_once_a_reflect_pad_is_refused(tmp_path):
    """A Conv on a symbolic batch and image size compiles once (oneDNN per run-time shape:
    docs/dynamic_shapes.md), with a constant Pad before it too; a reflect Pad along the symbolic
    height is refused (its index would be a run-time modulus; the reason names the node), then
    runs per shape. All against ONNX Runtime."""
    rng = np.random.default_rng(5)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    pads = numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads")
    for mode in (None, "constant", "reflect"):
        nodes = [helper.make_node("Conv", ["xp" if mode else "x", "w"], ["y"], name="conv0",
                                  pads=[0, 0, 0, 0] if mode else [1, 1, 1, 1])]
        if mode:
            nodes.insert(0, helper.make_node("Pad", ["x", "pads"], ["xp"], name="pad0", mode=mode))
        g = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, "h", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, "h", 8])],
                              [w] + ([pads] if mode else []))
        path = str(tmp_path / f"conv_{mode}.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
        sess = _session(path)
        st = sess.stats()
        if mode == "reflect":
            assert not st["symbolic"] and "pad0" in st["symbolic_reason"] and "reflect" in st["symbolic_reason"], st
        else:
            assert st["symbolic"], st["symbolic_reason"]
        ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        for batch, h in [(1, 8), (2, 5)]:
            feed = {"x": rng.standard_normal((batch, 3, h, 8)).astype(np.float32)}
            np.testing.assert_allclose(sess.run(None, feed)[0], ref.run(None, feed)[0], rtol=1e-4, atol=1e-4)
        assert sess.stats()["compiles"] == (2 if mode == "reflect" else 1)


def test_masks_with_comparisons_and_where(tmp_path):
    """An attention-mask style graph on [batch, seq]: Equal, Greater, Not, And, Or and Where, the
    mask unsqueezed against [batch, seq, 8] (a static 1 broadcast), one compile."""
    zero = numpy_helper.from_array(np.array(0, np.int64), "zero")
    fzero = numpy_helper.from_array(np.array(0.0, np.float32), "fzero")
    big = numpy_helper.from_array(np.array(-1e4, np.float32), "big")
    axes = numpy_helper.from_array(np.array([2], np.int64), "axes")
    nodes = [helper.make_node("Equal", ["m", "zero"], ["pad"]),
             helper.make_node("Unsqueeze", ["pad", "axes"], ["pad3"]),
             helper.make_node("Greater", ["x", "fzero"], ["pos"]),
             helper.make_node("Not", ["pad3"], ["keep"]),
             helper.make_node("And", ["pos", "keep"], ["both"]),
             helper.make_node("Or", ["both", "pad3"], ["either"]),
             helper.make_node("Where", ["pad3", "big", "x"], ["masked"]),
             helper.make_node("Where", ["either", "masked", "fzero"], ["y"])]
    g = helper.make_graph(nodes, "masks", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8]),
                                           helper.make_tensor_value_info("m", TensorProto.INT64, ["batch", "seq"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 8])],
                          [zero, fzero, big, axes])
    path = str(tmp_path / "masks.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    sess = _session(path)
    assert sess.stats()["symbolic"], sess.stats()["symbolic_reason"]
    rng = np.random.default_rng(9)
    for batch, seq in [(1, 1), (2, 7), (3, 40)]:
        feed = {"x": rng.standard_normal((batch, seq, 8)).astype(np.float32),
                "m": rng.integers(0, 2, (batch, seq)).astype(np.int64)}
        np.testing.assert_array_equal(sess.run(None, feed)[0], ref.run(None, feed)[0])
    assert sess.stats()["compiles"] == 1
