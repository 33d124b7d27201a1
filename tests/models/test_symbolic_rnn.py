"""RNN, GRU and LSTM on symbolic shapes (issue 23, docs/dynamic_shapes.md, "Recurrent layers on
symbolic shapes"): a model whose sequence length and batch are dims of the run compiles once
(one `.kiln` artifact, `kiln run --symbolic-shapes`) and matches ONNX Runtime at several
lengths and batches, with per-row sequence_lens, initial states, both layouts, two stacked
layers joined by a Squeeze (a view: the second layer reads the first's buffer), and a length of
1. Each size used to start the compiler."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from kiln_helpers import assert_matches_ort, kiln_has_dnnl, kiln_run_model, ort_outputs, run_kiln

pytestmark = pytest.mark.skipif(not kiln_has_dnnl(), reason="symbolic recurrent layers run on the oneDNN build's kernel")

IN, HID = 8, 16


def _w(rng, *shape):
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32))


def _save(nodes, inputs, outputs, inits, path, opset=14):
    graph = helper.make_graph(nodes, "symbolic_rnn", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def make_bilstm(path):
    """Bidirectional LSTM, layout 0: X [t, b, 8], sequence_lens [b], initial h and c [2, b, 16];
    outputs Y [t, 2, b, 16], Y_h, Y_c."""
    rng = np.random.default_rng(0)
    w, r, b = _w(rng, 2, 4 * HID, IN), _w(rng, 2, 4 * HID, HID), _w(rng, 2, 8 * HID)
    w.name, r.name, b.name = "W", "R", "B"
    node = helper.make_node("LSTM", ["x", "W", "R", "B", "lens", "h0", "c0"], ["y", "yh", "yc"],
                            hidden_size=HID, direction="bidirectional")
    f = TensorProto.FLOAT
    _save([node],
          [helper.make_tensor_value_info("x", f, ["t", "b", IN]),
           helper.make_tensor_value_info("lens", TensorProto.INT32, ["b"]),
           helper.make_tensor_value_info("h0", f, [2, "b", HID]), helper.make_tensor_value_info("c0", f, [2, "b", HID])],
          [helper.make_tensor_value_info("y", f, ["t", 2, "b", HID]), helper.make_tensor_value_info("yh", f, [2, "b", HID]),
           helper.make_tensor_value_info("yc", f, [2, "b", HID])],
          [w, r, b], path)


def make_gru(path, layout=1):
    """GRU without linear_before_reset, X the only input: layout 1 X [b, t, 8] -> Y [b, t, 1, 16]
    (ONNX Runtime's CPU GRU refuses layout 1: its reference is the layout-0 model, transposed)."""
    rng = np.random.default_rng(1)
    w, r, b = _w(rng, 1, 3 * HID, IN), _w(rng, 1, 3 * HID, HID), _w(rng, 1, 6 * HID)
    w.name, r.name, b.name = "W", "R", "B"
    node = helper.make_node("GRU", ["x", "W", "R", "B"], ["y"], hidden_size=HID, layout=layout)
    f = TensorProto.FLOAT
    xs, ys = (["b", "t", IN], ["b", "t", 1, HID]) if layout else (["t", "b", IN], ["t", 1, "b", HID])
    _save([node], [helper.make_tensor_value_info("x", f, xs)], [helper.make_tensor_value_info("y", f, ys)],
          [w, r, b], path)


def gru_layout1_reference(path, feed):
    ref = path.replace(".onnx", "_layout0.onnx")
    make_gru(ref, layout=0)
    y = ort_outputs(ref, {"x": np.ascontiguousarray(feed["x"].transpose(1, 0, 2))})["y"]
    return {"y": np.ascontiguousarray(y.transpose(2, 0, 1, 3))}  # [t, 1, b, h] -> [b, t, 1, h]


def make_gru_layout1(path):
    make_gru(path, layout=1)


def make_stacked(path):
    """A tagger's two stacked layers at batch 1: RNN (tanh) over X [t, 1, 8], Squeeze of its
    direction axis (a view), LSTM, Squeeze, MatMul to 5 tags."""
    rng = np.random.default_rng(2)
    inits = [_w(rng, 1, HID, IN), _w(rng, 1, HID, HID), _w(rng, 1, 4 * HID, HID), _w(rng, 1, 4 * HID, HID),
             _w(rng, HID, 5), numpy_helper.from_array(np.array([1], np.int64))]
    for t, name in zip(inits, ["W1", "R1", "W2", "R2", "head", "axis1"]):
        t.name = name
    nodes = [helper.make_node("RNN", ["x", "W1", "R1"], ["y1"], hidden_size=HID),
             helper.make_node("Squeeze", ["y1", "axis1"], ["s1"]),
             helper.make_node("LSTM", ["s1", "W2", "R2"], ["y2"], hidden_size=HID),
             helper.make_node("Squeeze", ["y2", "axis1"], ["s2"]),
             helper.make_node("MatMul", ["s2", "head"], ["tags"])]
    f = TensorProto.FLOAT
    _save(nodes, [helper.make_tensor_value_info("x", f, ["t", 1, IN])],
          [helper.make_tensor_value_info("tags", f, ["t", 1, 5])], inits, path)


def _bilstm_feed(t, b, seed):
    rng = np.random.default_rng(seed)
    lens = rng.integers(1, t + 1, size=b).astype(np.int32)
    lens[0] = t  # at least one full-length row
    return {"x": rng.standard_normal((t, b, IN)).astype(np.float32), "lens": lens,
            "h0": rng.standard_normal((2, b, HID)).astype(np.float32),
            "c0": rng.standard_normal((2, b, HID)).astype(np.float32)}


def _x_feed(shape, seed):
    return {"x": np.random.default_rng(seed).standard_normal(shape).astype(np.float32)}


CASES = {
    "bilstm": (make_bilstm, [((1, 1), _bilstm_feed), ((5, 3), _bilstm_feed), ((17, 2), _bilstm_feed)]),
    "gru_layout1": (make_gru_layout1, [((1, 1, IN), _x_feed), ((3, 9, IN), _x_feed), ((2, 30, IN), _x_feed)]),
    "stacked": (make_stacked, [((1, 1, IN), _x_feed), ((12, 1, IN), _x_feed), ((40, 1, IN), _x_feed)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_artifact_serves_every_length(tmp_path, name):
    """`kiln compile` once (no --dim: symbolic), then the artifact at three sizes vs ORT."""
    make, sizes = CASES[name]
    path = str(tmp_path / f"{name}.onnx")
    make(path)
    art = str(tmp_path / f"{name}.kiln")
    proc = run_kiln(["compile", path, "-o", art])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for i, (size, feed_of) in enumerate(sizes):
        feed = feed_of(*size, seed=i) if feed_of is _bilstm_feed else feed_of(size, i)
        np.savez(tmp_path / "in.npz", **feed)
        got, _ = kiln_run_model(art, str(tmp_path / "in.npz"), str(tmp_path / f"out{i}"), extra=["--repeat", "1"])
        want = gru_layout1_reference(path, feed) if name == "gru_layout1" else ort_outputs(path, feed)
        assert_matches_ort(got, want, f"{name} {size}", rtol=1e-4, atol=1e-5)


def test_symbolic_session_says_one_compile(tmp_path):
    path = str(tmp_path / "stacked.onnx")
    make_stacked(path)
    feed = _x_feed((7, 1, IN), 3)
    np.savez(tmp_path / "in.npz", **feed)
    got, proc = kiln_run_model(path, str(tmp_path / "in.npz"), str(tmp_path / "out"),
                               extra=["--symbolic-shapes", "--repeat", "1"])
    assert "symbolic shapes: one compile serves every shape" in proc.stdout, proc.stdout
    assert_matches_ort(got, ort_outputs(path, feed), "stacked 7", rtol=1e-4, atol=1e-5)


def test_wrong_feature_count_is_a_clear_error(tmp_path):
    path = str(tmp_path / "gru.onnx")
    make_gru_layout1(path)
    art = str(tmp_path / "gru.kiln")
    assert run_kiln(["compile", path, "-o", art]).returncode == 0
    np.savez(tmp_path / "bad.npz", x=np.zeros((2, 4, IN + 1), np.float32))
    proc = run_kiln(["run", art, "--inputs", str(tmp_path / "bad.npz"), "--repeat", "1"])
    assert proc.returncode != 0
    err = proc.stdout + proc.stderr
    assert "input 'x'" in err and str(IN) in err, err
