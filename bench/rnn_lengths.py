#!/usr/bin/env python3
"""Recurrent models at every sequence length: Kiln (one session, one symbolic compile) vs ONNX
Runtime in the same process, interleaved (issue 23).

Two models with a symbolic batch and length, built here with onnx.helper and random weights:

  speech   a 2-layer bidirectional LSTM encoder: features [batch, T, 80] -> Transpose ->
           LSTM(256, bidirectional) -> LSTM(256, bidirectional) (via Transpose/Reshape) ->
           MatMul to 40 classes
  tagger   a GRU tagger: token ids [batch, T] -> Gather (vocabulary 5000, embedding 128) ->
           GRU(256, bidirectional) -> MatMul to 20 tags

For each length, in order: Kiln's and ONNX Runtime's first call at that length (no length is
seen twice before it is timed warm), then the median of --rounds x --calls warm calls of each,
alternating. Kiln compiles once at load: a new length makes the recurrent kernels for that
shape (oneDNN's input-projection matmul) and nothing else.

    python3 bench/rnn_lengths.py [--smoke] [--lengths 16,37,64,128,256,512] [--batch 1]
                                 [--rounds 5] [--calls 3] [--threads 2]

--smoke: two lengths, outputs compared with ONNX Runtime (max abs difference <= 1e-4), no
timing judged.
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


def _w(rng, name, *shape, scale=0.08):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def _ints(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def make_speech(path, feats=80, hidden=256, classes=40):
    rng = np.random.default_rng(0)
    inits = [_w(rng, "W1", 2, 4 * hidden, feats), _w(rng, "R1", 2, 4 * hidden, hidden), _w(rng, "B1", 2, 8 * hidden),
             _w(rng, "W2", 2, 4 * hidden, 2 * hidden), _w(rng, "R2", 2, 4 * hidden, hidden), _w(rng, "B2", 2, 8 * hidden),
             _w(rng, "head", 2 * hidden, classes), _ints("shape2", [0, 0, -1])]
    nodes = [
        helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2]),  # [T, b, 80]
        helper.make_node("LSTM", ["xt", "W1", "R1", "B1"], ["y1"], hidden_size=hidden, direction="bidirectional"),
        helper.make_node("Transpose", ["y1"], ["y1t"], perm=[0, 2, 1, 3]),  # [T, b, 2, h]
        helper.make_node("Reshape", ["y1t", "shape2"], ["h1"]),  # [T, b, 2h]
        helper.make_node("LSTM", ["h1", "W2", "R2", "B2"], ["y2"], hidden_size=hidden, direction="bidirectional"),
        helper.make_node("Transpose", ["y2"], ["y2t"], perm=[2, 0, 1, 3]),  # [b, T, 2, h]
        helper.make_node("Reshape", ["y2t", "shape2"], ["h2"]),  # [b, T, 2h]
        helper.make_node("MatMul", ["h2", "head"], ["logits"]),
    ]
    graph = helper.make_graph(nodes, "speech", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "T", feats])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["b", "T", classes])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), path)


def make_tagger(path, vocab=5000, emb=128, hidden=256, tags=20):
    rng = np.random.default_rng(1)
    inits = [_w(rng, "E", vocab, emb, scale=0.5), _w(rng, "W", 2, 3 * hidden, emb), _w(rng, "R", 2, 3 * hidden, hidden),
             _w(rng, "B", 2, 6 * hidden), _w(rng, "head", 2 * hidden, tags), _ints("shape", [0, 0, -1])]
    nodes = [
        helper.make_node("Gather", ["E", "ids"], ["e"]),  # [b, T, emb]
        helper.make_node("Transpose", ["e"], ["et"], perm=[1, 0, 2]),
        helper.make_node("GRU", ["et", "W", "R", "B"], ["y"], hidden_size=hidden, direction="bidirectional",
                         linear_before_reset=1),
        helper.make_node("Transpose", ["y"], ["yt"], perm=[2, 0, 1, 3]),
        helper.make_node("Reshape", ["yt", "shape"], ["h"]),
        helper.make_node("MatMul", ["h", "head"], ["tags"]),
    ]
    graph = helper.make_graph(nodes, "tagger", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["b", "T"])],
                              [helper.make_tensor_value_info("tags", TensorProto.FLOAT, ["b", "T", tags])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), path)


def feed_for(model, batch, length, seed):
    rng = np.random.default_rng(seed)
    if model == "speech":
        return {"x": rng.standard_normal((batch, length, 80)).astype(np.float32)}
    return {"ids": rng.integers(0, 5000, size=(batch, length)).astype(np.int64)}


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, (time.perf_counter() - t0) * 1e3


def bench(model, path, args):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    ort_s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    kiln, load_ms = timed(lambda: CapiSession(path, threads=args.threads))
    rows = []
    for i, length in enumerate(args.lengths):
        feed = feed_for(model, args.batch, length, i)
        got, k_first = timed(lambda: kiln.run(feed))
        want, o_first = timed(lambda: ort_s.run(None, feed))
        diff = float(np.max(np.abs(list(got.values())[0] - want[0])))
        if diff > 1e-4:
            raise SystemExit(f"{model} T={length}: Kiln and ONNX Runtime differ by {diff}")
        if args.smoke:
            print(f"{model} batch {args.batch} T={length}: outputs match ONNX Runtime (max |diff| {diff:.1e})")
            continue
        kms, oms = [], []
        for _ in range(args.rounds):
            for _ in range(args.calls):
                kms.append(timed(lambda: kiln.run(feed))[1])
            for _ in range(args.calls):
                oms.append(timed(lambda: ort_s.run(None, feed))[1])
        rows.append((model, length, k_first, o_first, statistics.median(kms), statistics.median(oms)))
    kiln.close()
    return load_ms, rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--lengths", default="16,37,64,128,256,512")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default="speech,tagger")
    args = ap.parse_args(argv)
    args.lengths = [int(v) for v in args.lengths.split(",")]
    if args.smoke:
        args.lengths = args.lengths[:2]
    makers = {"speech": make_speech, "tagger": make_tagger}
    with tempfile.TemporaryDirectory() as tmp:
        results = []
        for model in args.only.split(","):
            path = os.path.join(tmp, model + ".onnx")
            makers[model](path)
            results.append(bench(model, path, args))
    if args.smoke:
        return
    print(f"\nthreads {args.threads}, batch {args.batch}, {args.rounds} rounds x {args.calls} calls per engine "
          "(medians); ms\n")
    print("| model | T | Kiln first call | ORT first call | Kiln warm | ORT warm | Kiln / ORT warm | Kiln first / warm |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for load_ms, rows in results:
        for model, length, kf, of, kw, ow in rows:
            print(f"| {model} | {length} | {kf:.2f} | {of:.2f} | {kw:.2f} | {ow:.2f} | {kw / ow:.2f}x | {kf / kw:.1f} |")
    for (load_ms, rows) in results:
        print(f"\n{rows[0][0]}: Kiln session load (import + the one compile) {load_ms:.0f} ms")


if __name__ == "__main__":
    main()
