#!/usr/bin/env python3
"""What control flow costs in Kiln (the VM, docs/control_flow.md) against ONNX Runtime, in one
process, interleaved.

Models (built here with onnx.helper), each run through Kiln's C API (tests/models/kiln_capi.py)
and ORT's Python API with the same intra-op threads:
  * loop_empty: a Loop of N iterations whose body only passes its carried vector (16 floats) and
    its condition through: the VM's per-iteration overhead;
  * loop_add: the same with one small Add (`y = y + 1` on 16 floats) in the body;
  * loop_muladd: `y = y * 0.5 + 1` on S floats, many small and few large iterations;
  * unrolled: that computation as a plain graph (no Loop: compiled and fused whole), for contrast;
  * lstm_loop: one LSTM layer written as a Loop (seq 128, hidden 256, batch 1: two MatMuls, the
    gates, the cell update per iteration; h and c carried, h stacked as a scan output);
  * lstm_unrolled: the same layer with its 128 steps unrolled into one plain graph (the same
    weights and inputs): issue 23's target is the Loop within 1.15x of it.
Each round times `--calls` consecutive calls of Kiln, then of ORT; the figure is the median over
all calls of all rounds; per-iteration figures divide a call by its iterations (the call's own
overhead included, spread over N iterations).

    python3 bench/control_flow.py [--threads 1] [--rounds 5] [--calls 10] [--only loop_empty,...]
    python3 bench/control_flow.py --smoke     # each model once, outputs vs ORT, no timing
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "models"))
from kiln_capi import CapiSession  # noqa: E402

OPSET = 17
# (name, iterations, vector size)
CASES = [("loop_empty", 10000, 16), ("loop_add", 10000, 16), ("loop_muladd", 1000, 16),
         ("loop_muladd", 100, 100_000), ("unrolled", 20, 100_000), ("lstm_loop", 128, 256),
         ("lstm_unrolled", 128, 256)]


def f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def scalar(name, elem, value):
    return helper.make_tensor(name, elem, [], [value])


def loop_graph(n, size, body_nodes, body_consts):
    body = helper.make_graph(
        body_nodes + [helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []), f32("y_in", [size])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), f32("y_out", [size])], body_consts)
    return helper.make_graph(
        [helper.make_node("Loop", ["M", "cond", "x"], ["y"], body=body)], "loop", [f32("x", [size])],
        [f32("y", [size])], [scalar("M", TensorProto.INT64, n), scalar("cond", TensorProto.BOOL, True)])


def simple_model(kind, n, size):
    k, one = scalar("k", TensorProto.FLOAT, 0.5), scalar("one", TensorProto.FLOAT, 1.0)
    if kind == "loop_empty":
        g = loop_graph(n, size, [helper.make_node("Identity", ["y_in"], ["y_out"])], [])
    elif kind == "loop_add":
        g = loop_graph(n, size, [helper.make_node("Add", ["y_in", "one"], ["y_out"])], [one])
    elif kind == "loop_muladd":
        g = loop_graph(n, size, [helper.make_node("Mul", ["y_in", "k"], ["y_mul"]),
                                 helper.make_node("Add", ["y_mul", "one"], ["y_out"])], [k, one])
    else:
        nodes, prev = [], "x"
        for i in range(n):
            nodes += [helper.make_node("Mul", [prev, "k"], [f"m{i}"]),
                      helper.make_node("Add", [f"m{i}", "one"], [f"a{i}"])]
            prev = f"a{i}"
        nodes.append(helper.make_node("Identity", [prev], ["y"]))
        g = helper.make_graph(nodes, "unrolled", [f32("x", [size])], [f32("y", [size])], [k, one])
    feed = {"x": np.linspace(-1, 1, size, dtype=np.float32)}
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)]), feed


def lstm_weights(hidden):
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((hidden, 4 * hidden)) / np.sqrt(hidden)).astype(np.float32)
    r = (rng.standard_normal((hidden, 4 * hidden)) / np.sqrt(hidden)).astype(np.float32)
    b = (rng.standard_normal((1, 4 * hidden)) * 0.1).astype(np.float32)
    return rng, [numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R"), numpy_helper.from_array(b, "B")]


def lstm_step(x, h, c, h_out, c_out, p=""):
    """The nodes of one LSTM step (names prefixed by p): x W + h R + B, the gates, c' and h'."""
    node = helper.make_node
    return [node("MatMul", [x, "W"], [p + "xw"]), node("MatMul", [h, "R"], [p + "hr"]),
            node("Add", [p + "xw", p + "hr"], [p + "s"]), node("Add", [p + "s", "B"], [p + "gates"]),
            node("Split", [p + "gates"], [p + g for g in ("gi", "go", "gf", "gc")], axis=1),
            node("Sigmoid", [p + "gi"], [p + "it"]), node("Sigmoid", [p + "go"], [p + "ot"]),
            node("Sigmoid", [p + "gf"], [p + "ft"]), node("Tanh", [p + "gc"], [p + "ct_"]),
            node("Mul", [p + "ft", c], [p + "fc"]), node("Mul", [p + "it", p + "ct_"], [p + "ic"]),
            node("Add", [p + "fc", p + "ic"], [c_out]), node("Tanh", [c_out], [p + "tc"]),
            node("Mul", [p + "ot", p + "tc"], [h_out])]


def lstm_feed(rng, seq, hidden):
    return {"X": rng.standard_normal((seq, 1, hidden)).astype(np.float32),
            "h0": np.zeros((1, hidden), np.float32), "c0": np.zeros((1, hidden), np.float32)}


def lstm_unrolled_model(seq, hidden):
    """lstm_model's layer with its steps unrolled: x_t = X[t], the same step nodes per t, hs the
    Concat of the h_t."""
    rng, weights = lstm_weights(hidden)
    node = helper.make_node
    nodes, hs, h, c = [], [], "h0", "c0"
    for t in range(seq):
        p = f"t{t}_"
        nodes.append(node("Gather", ["X", p + "i"], [p + "x"], axis=0))
        weights.append(numpy_helper.from_array(np.array(t, np.int64), p + "i"))
        nodes += lstm_step(p + "x", h, c, p + "h", p + "c", p)
        nodes.append(node("Unsqueeze", [p + "h", "zero"], [p + "hs"]))
        hs.append(p + "hs")
        h, c = p + "h", p + "c"
    nodes += [node("Identity", [h], ["h_n"]), node("Identity", [c], ["c_n"]), node("Concat", hs, ["hs"], axis=0)]
    weights.append(numpy_helper.from_array(np.array([0], np.int64), "zero"))
    graph = helper.make_graph(
        nodes, "lstm_unrolled", [f32("X", [seq, 1, hidden]), f32("h0", [1, hidden]), f32("c0", [1, hidden])],
        [f32("h_n", [1, hidden]), f32("c_n", [1, hidden]), f32("hs", [seq, 1, hidden])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), lstm_feed(rng, seq, hidden)


def lstm_model(seq, hidden):
    """One LSTM layer as a Loop over X[seq, 1, hidden]: gates = x W + h R + b (i, o, f, c order
    as ONNX's LSTM), c' = f*c + i*tanh(g), h' = o*tanh(c')."""
    rng, weights = lstm_weights(hidden)
    node = helper.make_node
    body = helper.make_graph(
        [node("Gather", ["X", "i"], ["x"], axis=0)] + lstm_step("x", "h", "c", "h_out", "c_out") +
        [node("Identity", ["h_out"], ["h_scan"]), node("Identity", ["cond_in"], ["cond_out"])],
        "lstm_body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         f32("h", [1, hidden]), f32("c", [1, hidden])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), f32("h_out", [1, hidden]),
         f32("c_out", [1, hidden]), f32("h_scan", [1, hidden])])
    graph = helper.make_graph(
        [node("Loop", ["M", "cond", "h0", "c0"], ["h_n", "c_n", "hs"], body=body)], "lstm_loop",
        [f32("X", [seq, 1, hidden]), f32("h0", [1, hidden]), f32("c0", [1, hidden])],
        [f32("h_n", [1, hidden]), f32("c_n", [1, hidden]), f32("hs", [seq, 1, hidden])],
        [scalar("M", TensorProto.INT64, seq), scalar("cond", TensorProto.BOOL, True)] + weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), lstm_feed(rng, seq, hidden)


def timed_calls(fn, calls):
    out = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def bench_case(kind, n, size, tmp, args):
    import onnxruntime as ort
    builders = {"lstm_loop": lstm_model, "lstm_unrolled": lstm_unrolled_model}
    model, feed = builders[kind](n, size) if kind in builders else simple_model(kind, n, size)
    path = os.path.join(tmp, f"{kind}_{n}_{size}.onnx")
    onnx.save(model, path)
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.log_severity_level = 3
    o = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    k = CapiSession(path, threads=args.threads)
    got, want = k.run(feed), dict(zip([x.name for x in o.get_outputs()], o.run(None, feed)))
    for name, ref in want.items():
        np.testing.assert_allclose(got[name], ref, rtol=1e-3, atol=1e-4, err_msg=f"{kind} output {name}")
    if args.smoke:
        print(f"{kind} n={n} size={size}: outputs match ONNX Runtime")
        return None
    for _ in range(args.warmup):
        k.run(feed)
        o.run(None, feed)
    kms, oms = [], []
    for _ in range(args.rounds):
        kms += timed_calls(lambda: k.run(feed), args.calls)
        oms += timed_calls(lambda: o.run(None, feed), args.calls)
    km, om = statistics.median(kms), statistics.median(oms)
    print(f"{kind} n={n} size={size}: kiln {km:.3f} ms, ort {om:.3f} ms", file=sys.stderr)
    return kind, n, size, km, om


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--only", default=",".join(sorted({c[0] for c in CASES})))
    ap.add_argument("--smoke", action="store_true", help="each model once vs ORT; no timing")
    args = ap.parse_args(argv)
    only = set(args.only.split(","))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind, n, size in CASES:
            if kind in only:
                rows.append(bench_case(kind, n, size, tmp, args))
    if args.smoke:
        return 0
    print(f"\nthreads {args.threads}, {args.rounds} rounds x {args.calls} calls per engine, interleaved "
          f"(medians over all calls); Kiln via the C API, ORT via its Python API\n")
    print("| model | iterations | size | Kiln ms | ORT ms | Kiln us/iter | ORT us/iter | Kiln / ORT |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for kind, n, size, km, om in rows:
        print(f"| {kind} | {n} | {size} | {km:.3f} | {om:.3f} | {km * 1e3 / n:.3f} | {om * 1e3 / n:.3f} | "
              f"{km / om:.3f}x |")
    kiln_ms = {kind: km for kind, _, _, km, _ in rows}
    if "lstm_loop" in kiln_ms and "lstm_unrolled" in kiln_ms:
        print(f"\nKiln's LSTM as a Loop / the same LSTM unrolled: {kiln_ms['lstm_loop'] / kiln_ms['lstm_unrolled']:.2f}x "
              f"(issue 23's target: at most 1.15x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
