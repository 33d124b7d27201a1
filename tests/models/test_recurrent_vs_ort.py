"""The ONNX LSTM / GRU / RNN ops against ONNX Runtime, through the fused recurrent kernel
(runtime/rnn_kernel.h, extern kernel `kiln_rnn`) and through the op's generated (time-unrolled)
kernel (`--kernels generated`).

Each case is one small model with a single recurrent node: forward, reverse and bidirectional;
batch 1 and 3; sequence_lens with shorter entries; initial states given and absent; peepholes,
clip, input_forget, GRU's linear_before_reset 0 and 1, non-default activations; T = 1 and T = 64;
weights as constants and as graph inputs (read per call). A case must compile to kiln_rnn
(`kiln inspect` names it) and match ORT at 1 and 2 threads. layout=1: ORT's CPU kernels refuse
batch-major layouts, so its reference is the layout-0 model on transposed inputs, transposed back.

Tolerance: the kernel's GEMMs (oneDNN) use FMA and reassociate, and its Sigmoid / Tanh are
polynomials with ~1e-7 error; ORT's are rational approximations. Over 64 steps of H <= 48 the
differences stay below rtol 1e-4 / atol 1e-4.
"""
import os
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from kiln_helpers import assert_matches_ort, kiln_has_dnnl, kiln_run_model, ort_outputs, run_kiln
from test_cli_errors import assert_clean_error

RTOL, ATOL = 1e-4, 1e-4
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def recurrent_model(op, T, batch, inp, hidden, direction="forward", bias=True, lens=None, init=False,
                    peep=False, layout=0, weights_as_inputs=False, seed=0, **attrs):
    """(model, feed): one `op` node over X [T, batch, inp] (layout 1: [batch, T, inp])."""
    rng = np.random.default_rng(seed)
    D = 2 if direction == "bidirectional" else 1
    G = GATES[op]
    scale = 1 / np.sqrt(hidden)
    arr = lambda *s: (rng.uniform(-1, 1, s) * scale).astype(np.float32)  # noqa: E731
    params = {"W": arr(D, G * hidden, inp), "R": arr(D, G * hidden, hidden)}
    if bias:
        params["B"] = arr(D, 2 * G * hidden)
    feed = {"X": rng.standard_normal((batch, T, inp) if layout else (T, batch, inp)).astype(np.float32)}
    state = (batch, D, hidden) if layout else (D, batch, hidden)
    names = ["X", "W", "R", "B" if bias else ""]
    if lens is not None:
        feed["L"] = np.array(lens, np.int32)
    names.append("L" if lens is not None else "")
    if init:
        feed["h0"] = (rng.standard_normal(state) * 0.5).astype(np.float32)
    names.append("h0" if init else "")
    if op == "LSTM":
        if init:
            feed["c0"] = (rng.standard_normal(state) * 0.5).astype(np.float32)
        names.append("c0" if init else "")
        if peep:
            params["P"] = arr(D, 3 * hidden)
        names.append("P" if peep else "")
    while names[-1] == "":
        names.pop()
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, names, outs, name="rec0", hidden_size=hidden, direction=direction, **attrs)
    if layout:
        node.attribute.append(helper.make_attribute("layout", 1))
    graph_inputs = {k: v for k, v in feed.items()}
    inits = []
    if weights_as_inputs:
        feed.update(params)
        graph_inputs.update(params)
    else:
        inits = [numpy_helper.from_array(v, k) for k, v in params.items()]
    dtype = lambda v: TensorProto.INT32 if v.dtype == np.int32 else TensorProto.FLOAT  # noqa: E731
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(k, dtype(v), v.shape) for k, v in graph_inputs.items()],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), feed


def ort_reference(model, feed):
    """ORT's outputs; a layout-1 node runs as layout 0 on transposed tensors."""
    node = model.graph.node[0]
    if not any(a.name == "layout" and a.i == 1 for a in node.attribute):
        return ort_outputs(model.SerializeToString(), feed)
    m0 = onnx.ModelProto()
    m0.CopyFrom(model)
    attrs = [a for a in m0.graph.node[0].attribute if a.name != "layout"]
    del m0.graph.node[0].attribute[:]
    m0.graph.node[0].attribute.extend(attrs)
    for vi in m0.graph.input:
        vi.type.tensor_type.ClearField("shape")
    f0 = dict(feed)
    f0["X"] = feed["X"].transpose(1, 0, 2)
    for k in ("h0", "c0"):
        if k in feed:
            f0[k] = feed[k].transpose(1, 0, 2)
    out = ort_outputs(m0.SerializeToString(), f0)
    return {k: v.transpose(2, 0, 1, 3) if k == "Y" else v.transpose(1, 0, 2) for k, v in out.items()}


CASES = {
    "lstm_fwd_b1": dict(op="LSTM", T=5, batch=1, inp=4, hidden=8),
    "lstm_bidir_b3_lens_init": dict(op="LSTM", T=6, batch=3, inp=5, hidden=8, direction="bidirectional",
                                    lens=[6, 2, 4], init=True),
    "lstm_rev_peep_clip_nobias": dict(op="LSTM", T=4, batch=3, inp=3, hidden=6, direction="reverse", bias=False,
                                      peep=True, init=True, clip=0.7),
    "lstm_layout1_forget_lens": dict(op="LSTM", T=5, batch=3, inp=4, hidden=8, layout=1, input_forget=1,
                                     lens=[3, 5, 1], direction="bidirectional"),
    "lstm_acts": dict(op="LSTM", T=4, batch=2, inp=3, hidden=5, activations=["HardSigmoid", "Softsign", "Elu"],
                      activation_alpha=[0.3, 0.8], activation_beta=[0.4]),
    "lstm_T1": dict(op="LSTM", T=1, batch=3, inp=4, hidden=8, direction="bidirectional", init=True),
    "lstm_T64": dict(op="LSTM", T=64, batch=3, inp=16, hidden=32, direction="bidirectional", lens=[64, 40, 17]),
    "lstm_runtime_weights": dict(op="LSTM", T=6, batch=2, inp=4, hidden=8, weights_as_inputs=True, init=True,
                                 peep=True),
    # hidden 256 at batch 1: split into parts across threads (two at --threads 2)
    "lstm_split_lens": dict(op="LSTM", T=4, batch=2, inp=8, hidden=256, lens=[4, 2], init=True),
    "gru_fwd_b1": dict(op="GRU", T=5, batch=1, inp=4, hidden=8),
    "gru_lbr_rev_lens_init": dict(op="GRU", T=6, batch=3, inp=4, hidden=8, direction="reverse", lens=[6, 3, 1],
                                  init=True, linear_before_reset=1),
    "gru_bidir_init_clip": dict(op="GRU", T=5, batch=3, inp=4, hidden=8, direction="bidirectional", init=True,
                                clip=0.9),
    "gru_lbr_bidir_layout1": dict(op="GRU", T=4, batch=3, inp=4, hidden=8, direction="bidirectional", layout=1,
                                  linear_before_reset=1, lens=[4, 1, 3]),
    "gru_acts_nobias": dict(op="GRU", T=4, batch=2, inp=3, hidden=5, bias=False,
                            activations=["HardSigmoid", "Softsign"], activation_alpha=[0.25],
                            activation_beta=[0.45]),
    "gru_T64": dict(op="GRU", T=64, batch=1, inp=16, hidden=48, direction="bidirectional"),
    "gru_T64_lbr": dict(op="GRU", T=64, batch=3, inp=8, hidden=24, linear_before_reset=1, lens=[64, 20, 33]),
    "gru_split_two_phase": dict(op="GRU", T=3, batch=1, inp=8, hidden=256, init=True),
    "gru_runtime_weights": dict(op="GRU", T=5, batch=2, inp=4, hidden=8, weights_as_inputs=True, direction="bidirectional"),
    "rnn_fwd_b1": dict(op="RNN", T=5, batch=1, inp=4, hidden=8),
    "rnn_bidir_lens_init_relu": dict(op="RNN", T=6, batch=3, inp=4, hidden=8, direction="bidirectional",
                                     lens=[2, 6, 5], init=True, activations=["Relu", "Tanh"]),
    "rnn_rev_clip_layout1": dict(op="RNN", T=4, batch=3, inp=4, hidden=8, direction="reverse", clip=0.5, layout=1),
    "rnn_T64": dict(op="RNN", T=64, batch=3, inp=8, hidden=16, init=True),
}

# Batch 1: the packed GEMV (runtime/rnn_gemv.h); split in two parts at --threads 2, the last
# part's last block of 8 units partial (hidden 100: units 48 + 52; 116: 64 + 52; 203: 96 + 107).
# Apart from CASES, whose seeds are their index there.
GEMV_CASES = {
    "lstm_b1_ragged_split_lens_peep": dict(op="LSTM", T=7, batch=1, inp=5, hidden=100, lens=[5], init=True,
                                           peep=True),
    "gru_b1_ragged_split_lbr_rev": dict(op="GRU", T=6, batch=1, inp=4, hidden=116, direction="reverse",
                                        linear_before_reset=1, init=True),
    "rnn_b1_ragged_split_lens": dict(op="RNN", T=5, batch=1, inp=3, hidden=203, lens=[3]),
}


def _save(tmp_path, model, feed):
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    np.savez(tmp_path / "in.npz", **feed)
    return path, str(tmp_path / "in.npz")


def _check_kiln_rnn(tmp_path, name, spec, seed):
    if not kiln_has_dnnl():
        pytest.skip("kiln built without oneDNN: the recurrent ops run as generated kernels")
    spec = dict(spec)
    model, feed = recurrent_model(spec.pop("op"), seed=seed, **spec)
    path, inputs = _save(tmp_path, model, feed)
    kernels = run_kiln(["inspect", path])
    assert kernels.returncode == 0, kernels.stderr
    assert "extern kernel kiln_rnn" in kernels.stdout, f"{name}: kiln_rnn not chosen:\n{kernels.stdout[-3000:]}"
    ref = ort_reference(model, feed)
    for threads in ("1", "2"):
        outs, _ = kiln_run_model(path, inputs, str(tmp_path / f"t{threads}"), extra=["--threads", threads])
        assert_matches_ort(outs, ref, f"{name} --threads {threads}", RTOL, ATOL)


@pytest.mark.parametrize("name", sorted(CASES))
def test_recurrent_matches_ort(tmp_path, name):
    _check_kiln_rnn(tmp_path, name, CASES[name], sorted(CASES).index(name))


@pytest.mark.parametrize("name", sorted(GEMV_CASES))
def test_batch1_gemv_matches_ort(tmp_path, name):
    _check_kiln_rnn(tmp_path, name, GEMV_CASES[name], 100 + sorted(GEMV_CASES).index(name))


# The generated (time-unrolled) kernels stay the reference path: short sequences, every cell.
GENERATED = ["lstm_bidir_b3_lens_init", "lstm_rev_peep_clip_nobias", "gru_lbr_rev_lens_init",
             "gru_bidir_init_clip", "rnn_bidir_lens_init_relu"]


@pytest.mark.parametrize("name", GENERATED)
def test_generated_kernels_match_ort(tmp_path, name):
    spec = dict(CASES[name])
    model, feed = recurrent_model(spec.pop("op"), seed=sorted(CASES).index(name), **spec)
    path, inputs = _save(tmp_path, model, feed)
    outs, _ = kiln_run_model(path, inputs, str(tmp_path / "gen"), extra=["--kernels", "generated"])
    assert_matches_ort(outs, ort_reference(model, feed), f"{name} --kernels generated", RTOL, ATOL)


@pytest.mark.parametrize("kernels", ["auto", "generated"])
def test_lstm_clip_leaves_the_cell_state_unclipped(tmp_path, kernels):
    """clip bounds the gates' activation inputs; h(c) reads the cell state as it is (ONNX Runtime):
    with clip 0.3 and cell states beyond it, a clipped h(c) is off by up to 0.05."""
    model, feed = recurrent_model("LSTM", T=6, batch=2, inp=3, hidden=6, direction="reverse", peep=True, init=True,
                                  clip=0.3, seed=17)
    ref = ort_reference(model, feed)
    assert np.abs(ref["Y_c"]).max() > 0.3, "the case must drive the cell state past clip"
    path, inputs = _save(tmp_path, model, feed)
    outs, _ = kiln_run_model(path, inputs, str(tmp_path / kernels), extra=["--kernels", kernels])
    assert_matches_ort(outs, ref, f"lstm clip 0.3 --kernels {kernels}", RTOL, ATOL)


def test_bad_w_shape_names_the_node(tmp_path):
    model, feed = recurrent_model("LSTM", T=3, batch=1, inp=4, hidden=8)
    w = model.graph.initializer[0]
    assert w.name == "W"
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.zeros((1, 31, 4), np.float32), "W"))
    path, inputs = _save(tmp_path, model, feed)
    proc = run_kiln(["run", path, "--inputs", inputs, "--output-dir", str(tmp_path / "o")])
    assert_clean_error(proc, must_contain=("rec0", "W", "[1,32,4]", "[1,31,4]"))


def _require_dnnl():
    if not kiln_has_dnnl():
        pytest.skip("kiln built without oneDNN: the recurrent ops run as generated kernels")


def test_stacked_lstm_through_a_view(tmp_path):
    """Two LSTMs joined by a Squeeze (a view: the second node's X is the first's Y buffer)."""
    _require_dnnl()
    model, feed = recurrent_model("LSTM", T=7, batch=2, inp=6, hidden=16, seed=11)
    g = model.graph
    rng = np.random.default_rng(12)
    g.node[0].output[1] = ""
    g.node[0].output[2] = ""
    g.initializer.extend([numpy_helper.from_array(np.array([1], np.int64), "axis1"),
                          numpy_helper.from_array((rng.uniform(-1, 1, (1, 32, 16)) / 4).astype(np.float32), "W2"),
                          numpy_helper.from_array((rng.uniform(-1, 1, (1, 32, 8)) / 4).astype(np.float32), "R2")])
    g.node.extend([helper.make_node("Squeeze", ["Y", "axis1"], ["S"]),
                   helper.make_node("LSTM", ["S", "W2", "R2"], ["Y2"], name="rec1", hidden_size=8)])
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("Y2", TensorProto.FLOAT, None))
    path, inputs = _save(tmp_path, model, feed)
    outs, _ = kiln_run_model(path, inputs, str(tmp_path / "o"), extra=["--threads", "2"])
    assert_matches_ort(outs, ort_outputs(model.SerializeToString(), feed), "stacked", RTOL, ATOL)


def test_artifact_runs_with_the_runtime_only(tmp_path):
    """`kiln compile` writes the kiln_rnn step into the artifact; kiln-run-artifact runs it."""
    _require_dnnl()
    from test_compile_artifact import compile_model, run_with_runtime_only
    model, feed = recurrent_model("GRU", T=9, batch=3, inp=5, hidden=16, direction="bidirectional", lens=[9, 4, 6],
                                  init=True, seed=21)
    path, _ = _save(tmp_path, model, feed)
    art = str(tmp_path / "m.kiln")
    compile_model(path, art)
    outs, _ = run_with_runtime_only(art, feed, tmp_path / "art")
    assert_matches_ort(outs, ort_outputs(model.SerializeToString(), feed), "artifact", RTOL, ATOL)


def test_graph_interpreter_runs_the_fused_kernel(tmp_path):
    """A model with control flow runs in the graph interpreter, which compiles its (large) LSTM
    node alone: that unit must be kiln_rnn, not the time-unrolled kernel (no generated source
    in the fresh kernel cache holds the unrolled stages `rnn_..._s<step>`)."""
    _require_dnnl()
    model, feed = recurrent_model("LSTM", T=24, batch=1, inp=128, hidden=128, init=True, seed=31)
    g = model.graph
    one = numpy_helper.from_array(np.array(1, np.float32), "one")
    two = numpy_helper.from_array(np.array(2, np.float32), "two")
    then_g = helper.make_graph([helper.make_node("Add", ["Y_h", "one"], ["o1"])], "then", [],
                               [helper.make_tensor_value_info("o1", TensorProto.FLOAT, None)])
    else_g = helper.make_graph([helper.make_node("Mul", ["Y_h", "two"], ["o2"])], "else", [],
                               [helper.make_tensor_value_info("o2", TensorProto.FLOAT, None)])
    g.initializer.extend([one, two])
    g.input.append(helper.make_tensor_value_info("cond", TensorProto.BOOL, []))
    g.node.append(helper.make_node("If", ["cond"], ["out"], then_branch=then_g, else_branch=else_g))
    g.output.append(helper.make_tensor_value_info("out", TensorProto.FLOAT, None))
    feed["cond"] = np.array(False)
    path, inputs = _save(tmp_path, model, feed)
    cache = tmp_path / "cache"
    args = ["run", path, "--inputs", inputs, "--output-dir", str(tmp_path / "o")]
    proc = run_kiln(args, env={"KILN_CACHE_DIR": str(cache)})
    assert proc.returncode == 0, proc.stderr
    outs = {f[:-4]: np.load(tmp_path / "o" / f) for f in os.listdir(tmp_path / "o") if f.endswith(".npy")}
    assert_matches_ort(outs, ort_outputs(model.SerializeToString(), feed), "interpreter", RTOL, ATOL)
    sources = [p for p in cache.rglob("*.c")]
    unrolled = [str(p) for p in sources if re.search(r"rnn_\w+_s\d", p.read_text())]
    assert not unrolled, f"the LSTM ran as the unrolled generated kernel: {unrolled}"
