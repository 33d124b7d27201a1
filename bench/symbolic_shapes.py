#!/usr/bin/env python3
"""One compile for every shape (kiln.symbolic_shapes) vs one compile per shape (Kiln's
specializations) vs ONNX Runtime, in one process, interleaved.

Models (--model), batch and seq symbolic, random weights:
  minilm  bench/dynamic_shapes.py's MiniLM-style encoder (all-MiniLM-L6-v2's shape: 6 layers,
          hidden 384, 12 heads, FFN 1536), its position ids Range(0, Shape(ids)[1], 1) as
          exporters write them (--position-ids-input: as a third input instead)
  ffn     a stack of transformer feed-forward blocks, y = x + (Relu(x W1 + b1) W2 + b2), x:
          [batch, seq, 384], FFN 1536, 2 blocks
  minilm-real  the real all-MiniLM-L6-v2 sentence embedder exported by scripts/export_minilm.py
          (HF BertModel + mean pooling + normalize, the exporter's Shape/Gather/Concat/Reshape,
          Expand and Slice patterns; trained weights); --minilm-dir, else the export's default
          directory, else it runs the export (/usr/bin/python3 with PyTorch, downloads the wheel)
For each shape, in order, never seen before by any session:

  first   the first call at that shape: the symbolic session compiled at load and compiles
          nothing; the specialization session compiles this shape (with the kernel cache as it
          stands: --cold-cache starts a fresh one); ORT's first call beside them
  warm    the median of --rounds calls at that shape, the three alternating

Reported: milliseconds (medians) and the ratios symbolic/specialized and symbolic/ORT for warm
calls, and symbolic first / symbolic warm (the issue's target: <= 1.2).

    python3 bench/symbolic_shapes.py [--smoke] [--model minilm|ffn] [--batches 1,8] [--lengths 8,16,32,64,128,256]
                                     [--rounds 9] [--threads 2] [--cold-cache]

--pairs N: then, per shape, N alternating pairs of warm calls of the two Kiln sessions only
(no ORT between them: the steadiest ratio on a loaded machine); reported: median and 10th
percentile of each, and their ratios (docs/dynamic_shapes.md's "Measured" table).

--smoke: two shapes, one round; outputs of both Kiln sessions are compared with ORT's (max abs
difference <= 1e-3) and the symbolic session must have compiled once; no timing is judged.
Needs the kiln Python package (pip install, or PYTHONPATH at a directory holding kiln/ with its
_kiln extension).
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


def ffn_model(path, hidden=384, ffn=1536, blocks=2, seed=0):
    rng = np.random.default_rng(seed)
    inits, nodes = [], []
    x = "x"
    for i in range(blocks):
        p = f"b{i}"
        for n, s in [(p + ".w1", (hidden, ffn)), (p + ".b1", (ffn,)), (p + ".w2", (ffn, hidden)), (p + ".b2", (hidden,))]:
            inits.append(numpy_helper.from_array((rng.standard_normal(s) / np.sqrt(s[0])).astype(np.float32), n))
        nodes += [helper.make_node("MatMul", [x, p + ".w1"], [p + ".h0"]),
                  helper.make_node("Add", [p + ".h0", p + ".b1"], [p + ".h1"]),
                  helper.make_node("Relu", [p + ".h1"], [p + ".h"]),
                  helper.make_node("MatMul", [p + ".h", p + ".w2"], [p + ".y0"]),
                  helper.make_node("Add", [p + ".y0", p + ".b2"], [p + ".y1"]),
                  helper.make_node("Add", [p + ".y1", x], [p + ".out"])]
        x = p + ".out"
    nodes.append(helper.make_node("Identity", [x], ["y"]))
    g = helper.make_graph(nodes, "ffn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", hidden])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", hidden])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def real_minilm(directory):
    """model.onnx of scripts/export_minilm.py, exported now if it is not there."""
    here = os.path.dirname(os.path.abspath(__file__))
    if directory is None:
        base = os.environ.get("KILN_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "kiln")
        directory = os.path.join(base, "models", "minilm-real")
        if not os.path.exists(os.path.join(directory, "model.onnx")):
            directory = os.path.join(os.path.expanduser("~"), ".cache", "kiln", "models", "minilm-real")
    path = os.path.join(directory, "model.onnx")
    if not os.path.exists(path):
        import subprocess
        subprocess.run(["/usr/bin/python3", os.path.join(here, "..", "scripts", "export_minilm.py"), "--out", directory],
                       check=True)
    return path


# Every timed call starts after this pause: ONNX Runtime's intra-op threads spin after a run
# (session.intra_op.allow_spinning, on by default) and take the cores from a Kiln call that
# follows at once (2x on a small CNN, bench/real_models.py), which no process running one engine
# sees. Every engine's calls get the same pause.
SETTLE_S = 0.05


def timed(fn):
    time.sleep(SETTLE_S)
    t0 = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t0) * 1e3, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--model", choices=["minilm", "ffn", "minilm-real"], default="minilm")
    ap.add_argument("--minilm-dir", help="minilm-real: the directory holding the exported model.onnx")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--lengths", default="8,16,32,64,128,256")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--ffn", type=int, default=1536)
    ap.add_argument("--blocks", type=int, default=2)
    ap.add_argument("--cold-cache", action="store_true")
    ap.add_argument("--position-ids-input", action="store_true", help="minilm: position ids as an input")
    ap.add_argument("--pairs", type=int, default=0, help="then N alternating symbolic/specialized pairs per shape")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="kiln_symbolic_bench_")
    if args.cold_cache:
        os.environ["KILN_CACHE_DIR"] = os.path.join(tmp, "kernel_cache")
    import kiln
    import onnxruntime as ort
    path = os.path.join(tmp, args.model + ".onnx")
    if args.model == "ffn":
        ffn_model(path, args.hidden, args.ffn, args.blocks)
    elif args.model == "minilm-real":
        path = real_minilm(args.minilm_dir)
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from dynamic_shapes import minilm_model
        minilm_model(path, position_ids_input=args.position_ids_input)

    def feed_at(b, s):
        if args.model == "minilm-real":
            ids = np.random.default_rng(b * 1000 + s).integers(1000, 30000, (b, s)).astype(np.int64)
            return {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        if args.model == "ffn":
            return {"x": np.random.default_rng(b * 1000 + s).standard_normal((b, s, args.hidden)).astype(np.float32)}
        from dynamic_shapes import feed_of
        feed = feed_of(b, s)
        if args.position_ids_input:
            feed["position_ids"] = np.tile(np.arange(s, dtype=np.int64), (b, 1))
        return feed
    shapes = [(b, s) for b in map(int, args.batches.split(",")) for s in map(int, args.lengths.split(","))]
    rounds = args.rounds
    if args.smoke:
        shapes, rounds = [(1, 7), (3, 20)], 1

    def kiln_session(symbolic):
        o = kiln.SessionOptions()
        o.intra_op_num_threads = args.threads
        o.add_session_config_entry("kiln.symbolic_shapes", "1" if symbolic else "0")
        o.add_session_config_entry("kiln.max_specializations", str(max(16, len(shapes))))
        o.add_session_config_entry("kiln.tiered_compile", "0")  # warm speeds: -O3 kernels from the first call
        return kiln.InferenceSession(path, o)

    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    t_sym_load, sym = timed(lambda: kiln_session(True))
    st = sym.stats()
    if not st["symbolic"]:
        raise SystemExit("the symbolic session did not compile symbolically: " + st["symbolic_reason"])
    spec = kiln_session(False)
    ref = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    what = (f"{args.blocks} FFN blocks, hidden {args.hidden}, FFN {args.ffn}" if args.model == "ffn"
            else "the real all-MiniLM-L6-v2 (exported, " + path + ")" if args.model == "minilm-real"
            else "MiniLM-style encoder (6 layers, hidden 384), position ids " +
            ("as an input" if args.position_ids_input else "Range(0, Shape(ids)[1])"))
    print(f"model: {what}; {args.threads} threads; symbolic load (one compile) {t_sym_load:.0f} ms")
    rows = []
    for b, s in shapes:
        feed = feed_at(b, s)
        t_sym_first, y_sym = timed(lambda: sym.run(None, feed)[0])
        t_spec_first, y_spec = timed(lambda: spec.run(None, feed)[0])
        t_ort_first, y_ort = timed(lambda: ref.run(None, feed)[0])
        diff = max(float(np.max(np.abs(y_sym - y_ort))), float(np.max(np.abs(y_spec - y_ort))))
        if diff > 1e-3:
            raise SystemExit(f"batch {b} seq {s}: Kiln differs from ORT by {diff}")
        w_sym, w_spec, w_ort = [], [], []
        for r in range(rounds):
            order = [(sym, w_sym), (spec, w_spec), (ref, w_ort)]
            for sess, acc in (order if r % 2 == 0 else order[::-1]):
                acc.append(timed(lambda: sess.run(None, feed))[0])
        rows.append((b, s, t_sym_first, t_spec_first, t_ort_first, statistics.median(w_sym),
                     statistics.median(w_spec), statistics.median(w_ort), diff))
    st = sym.stats()
    if st["compiles"] != 1:
        raise SystemExit(f"the symbolic session compiled {st['compiles']} times")
    print(f"symbolic session: {st['compiles']} compile for {len(shapes)} shapes; specialized session: "
          f"{spec.stats()['compiles']} compiles")
    if args.smoke:
        print("smoke: outputs match ONNX Runtime (max abs diff %.2g)" % max(r[-1] for r in rows))
        return
    print("| batch | seq | first sym | first spec | first ORT | warm sym | warm spec | warm ORT | "
          "sym first/warm | warm sym/spec | warm sym/ORT |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for b, s, fs, fp, fo, ws, wp, wo, _ in rows:
        print(f"| {b} | {s} | {fs:.2f} | {fp:.1f} | {fo:.2f} | {ws:.2f} | {wp:.2f} | {wo:.2f} | "
              f"{fs / ws:.2f} | {ws / wp:.2f} | {ws / wo:.2f} |")
    med = lambda xs: statistics.median(xs)  # noqa: E731
    print(f"medians over shapes: symbolic first/warm {med([r[2] / r[5] for r in rows]):.2f}, "
          f"warm symbolic/specialized {med([r[5] / r[6] for r in rows]):.2f}, "
          f"warm symbolic/ORT {med([r[5] / r[7] for r in rows]):.2f}, "
          f"first specialized/symbolic {med([r[3] / r[2] for r in rows]):.0f}x")
    if args.pairs > 0:
        pairs(sym, spec, shapes, feed_at, args.pairs)


def pairs(sym, spec, shapes, feed_at, n):
    """n alternating pairs of warm calls per shape, symbolic and specialized only."""
    print("| batch | seq | pairs | sym median | spec median | sym/spec | sym p10 | spec p10 | p10 ratio |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for b, s in shapes:
        feed = feed_at(b, s)
        ts, tp = [], []
        for r in range(n):
            order = [(sym, ts), (spec, tp)]
            for sess, acc in (order if r % 2 == 0 else order[::-1]):
                acc.append(timed(lambda: sess.run(None, feed))[0])
        ms, mp = statistics.median(ts), statistics.median(tp)
        ps, pp = float(np.percentile(ts, 10)), float(np.percentile(tp, 10))
        print(f"| {b} | {s} | {n} | {ms:.2f} | {mp:.2f} | {ms / mp:.3f} | {ps:.2f} | {pp:.2f} | {ps / pp:.3f} |")


if __name__ == "__main__":
    sys.exit(main())
