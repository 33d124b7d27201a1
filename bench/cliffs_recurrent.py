#!/usr/bin/env python3
"""Recurrent models, Kiln vs ONNX Runtime: latency, GFLOP/s and Kiln's compile time.

Models (built here with onnx.helper, random weights, float32):
* lstm_tagger: X [T, B, 128] -> LSTM(256) -> LSTM(256) -> MatMul to 17 tags; T = 128.
* bigru: X [T, B, 64] -> bidirectional GRU(128) -> both directions concatenated -> MatMul to 10
  classes; T = 64.
each at batch 1 and 8 (--batches).

Per (model, batch), one round runs `kiln run --repeat R --threads N --timings-json` (a process on
a warm kernel cache: only runs after its warm-up are timed) and ORT in this process (CPU provider,
intra_op_num_threads=N, one warm-up then R timed runs), the order alternating per round, so load
from other processes falls on both alike. Medians over all timed runs; kiln/ort is the ratio of
medians (below 1: Kiln is faster). GFLOP/s counts 2 x MACs of the recurrent GEMMs (T * B * D * G*H
* (I + H) per layer) and the head. Compile: Kiln's load + first run on an empty kernel cache
(--kiln-timeout caps it: the time-unrolled kernels of older builds take minutes; `--seq` measures
a shorter sequence). Kiln's outputs are compared with ORT's (rtol 1e-3, atol 1e-4).

    /work/peers-venv/bin/python bench/cliffs_recurrent.py --kiln build/bin/kiln
    python3 bench/cliffs_recurrent.py --smoke      # each model once through both, outputs compared
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _w(rng, *shape):
    return (rng.uniform(-1, 1, shape) / np.sqrt(shape[-1])).astype(np.float32)


def lstm_tagger(T, B, seed=0):
    rng = np.random.default_rng(seed)
    E, H, TAGS = 128, 256, 17
    inits, nodes, flops = [], [], 0
    cur, inp = "X", E
    for layer in range(2):
        for n, a in (("W", _w(rng, 1, 4 * H, inp)), ("R", _w(rng, 1, 4 * H, H)), ("B", _w(rng, 1, 8 * H))):
            inits.append(numpy_helper.from_array(a, f"{n}{layer}"))
        nodes.append(helper.make_node("LSTM", [cur, f"W{layer}", f"R{layer}", f"B{layer}"], [f"Y{layer}"],
                                      name=f"lstm{layer}", hidden_size=H))
        nodes.append(helper.make_node("Squeeze", [f"Y{layer}", "axis1"], [f"S{layer}"]))
        flops += 2 * T * B * 4 * H * (inp + H)
        cur, inp = f"S{layer}", H
    inits += [numpy_helper.from_array(np.array([1], np.int64), "axis1"),
              numpy_helper.from_array(_w(rng, H, TAGS), "head")]
    nodes.append(helper.make_node("MatMul", [cur, "head"], ["tags"]))
    flops += 2 * T * B * H * TAGS
    x = rng.standard_normal((T, B, E)).astype(np.float32)
    return _model(nodes, inits, {"X": x}, "tags"), {"X": x}, flops


def bigru(T, B, seed=1):
    rng = np.random.default_rng(seed)
    I, H, CLASSES = 64, 128, 10
    inits = [numpy_helper.from_array(_w(rng, 2, 3 * H, I), "W"), numpy_helper.from_array(_w(rng, 2, 3 * H, H), "R"),
             numpy_helper.from_array(_w(rng, 2, 6 * H), "B"),
             numpy_helper.from_array(np.array([T, B, 2 * H], np.int64), "shape"),
             numpy_helper.from_array(_w(rng, 2 * H, CLASSES), "head")]
    nodes = [helper.make_node("GRU", ["X", "W", "R", "B"], ["Y"], name="gru", hidden_size=H,
                              direction="bidirectional", linear_before_reset=1),
             helper.make_node("Transpose", ["Y"], ["Yt"], perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["Yt", "shape"], ["F"]),
             helper.make_node("MatMul", ["F", "head"], ["logits"])]
    flops = 2 * T * B * 2 * 3 * H * (I + H) + 2 * T * B * 2 * H * CLASSES
    x = rng.standard_normal((T, B, I)).astype(np.float32)
    return _model(nodes, inits, {"X": x}, "logits"), {"X": x}, flops


def _model(nodes, inits, feed, out):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape) for k, v in feed.items()],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])


MODELS = {"lstm_tagger": (lstm_tagger, 128), "bigru": (bigru, 64)}


class Kiln:
    def __init__(self, exe, path, inputs, threads, cache):
        self.exe, self.path, self.inputs, self.threads, self.cache = exe, path, inputs, threads, cache

    def run(self, repeat, out_dir=None, timeout=None):
        with tempfile.TemporaryDirectory() as tmp:
            tj = os.path.join(tmp, "t.json")
            cmd = [self.exe, "run", self.path, "--inputs", self.inputs, "--repeat", str(repeat), "--threads",
                   str(self.threads), "--executor", "sequential", "--timings-json", tj]
            if out_dir:
                cmd += ["--output-dir", out_dir]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                  env=dict(os.environ, KILN_CACHE_DIR=self.cache))
            if proc.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr}")
            with open(tj) as f:
                return json.load(f)


def ort_session(model, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def measure(args, name, batch, tmp, log):
    builder, default_t = MODELS[name]
    T = args.seq or default_t
    model, feed, flops = builder(T, batch)
    path, inputs = os.path.join(tmp, f"{name}_b{batch}.onnx"), os.path.join(tmp, f"{name}_b{batch}.npz")
    onnx.save(model, path)
    np.savez(inputs, **feed)
    cache = os.path.join(tmp, f"cache_{name}_{batch}")
    kiln = Kiln(args.kiln, path, inputs, args.threads, cache)
    sess = ort_session(model, args.threads)
    # Compile on an empty cache (load + first run), and the outputs against ORT.
    out_dir = os.path.join(tmp, f"out_{name}_{batch}")
    os.makedirs(out_dir, exist_ok=True)
    try:
        t = kiln.run(1, out_dir, timeout=args.kiln_timeout)
        compile_s = (t["load_ms"] + t["first_run_ms"]) / 1e3
    except subprocess.TimeoutExpired:
        log(f"{name} b{batch}: kiln did not finish compiling within {args.kiln_timeout} s")
        return dict(model=name, batch=batch, T=T, compile_s=None)
    except RuntimeError as e:
        log(f"{name} b{batch}: {e}")
        return dict(model=name, batch=batch, T=T, compile_s=None, match=False)
    got = np.load(os.path.join(out_dir, os.listdir(out_dir)[0]))
    ref = sess.run(None, feed)[0]
    ok = np.allclose(got, ref, rtol=1e-3, atol=1e-4)
    err = float(np.max(np.abs(got - ref)))
    row = dict(model=name, batch=batch, T=T, compile_s=compile_s, match=ok, max_err=err, gflop=flops / 1e9)
    if args.smoke:
        return row
    kiln_ms, ort_ms = [], []
    for r in range(args.rounds):
        def run_ort():
            sess.run(None, feed)
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                sess.run(None, feed)
                ort_ms.append((time.perf_counter() - t0) * 1e3)
        first, second = (lambda: kiln_ms.extend(kiln.run(args.repeat)["runs_ms"]), run_ort)[::1 if r % 2 == 0 else -1]
        first()
        second()
    row.update(kiln_ms=float(np.median(kiln_ms)), ort_ms=float(np.median(ort_ms)))
    row["ratio"] = row["kiln_ms"] / row["ort_ms"]
    row["kiln_gflops"] = flops / row["kiln_ms"] / 1e6
    row["ort_gflops"] = flops / row["ort_ms"] / 1e6
    return row


def table(rows, args):
    lines = [f"threads {args.threads}, rounds {args.rounds} x {args.repeat} runs, kiln {args.kiln}", "",
             "| model | batch | T | kiln ms | ORT ms | kiln/ORT | kiln GFLOP/s | ORT GFLOP/s | kiln compile s | max err |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    f = lambda v, p=2: "-" if v is None else f"{v:.{p}f}"  # noqa: E731
    for r in rows:
        lines.append(f"| {r['model']} | {r['batch']} | {r['T']} | {f(r.get('kiln_ms'))} | {f(r.get('ort_ms'))} | "
                     f"{f(r.get('ratio'))} | {f(r.get('kiln_gflops'), 1)} | {f(r.get('ort_gflops'), 1)} | "
                     f"{f(r.get('compile_s'))} | {f(r.get('max_err'), 6)}{'' if r.get('match', True) else ' MISMATCH'} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", default=os.path.join(REPO, "build", "bin", "kiln"))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--seq", type=int, default=0, help="sequence length (default: each model's own)")
    ap.add_argument("--kiln-timeout", type=float, default=900, help="cap on Kiln's first (compiling) run, s")
    ap.add_argument("--smoke", action="store_true", help="each model once through both, outputs compared")
    args = ap.parse_args(argv)
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            for b in (int(x) for x in args.batches.split(",")):
                rows.append(measure(args, name, b, tmp, log))
                log(json.dumps(rows[-1]))
    print(table(rows, args))
    bad = [r for r in rows if not r.get("match", True)]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
