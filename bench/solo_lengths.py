#!/usr/bin/env python3
"""Warm calls at every batch size and sequence length, each engine alone in its own process
(as a user runs one of them): Kiln's Python package vs ONNX Runtime, alternating processes.

The in-process benchmarks (bench/symbolic_shapes.py, bench/dynamic_shapes.py) hold several
sessions in one process; on a 2-core machine their idle threads (OpenMP's spinning workers of
a session that called oneDNN, ONNX Runtime's spinning intra-op pool) took the cores from the
session being timed: MiniLM at batch 1, seq 256 measured 29.6 ms for Kiln's symbolic session
there and 15.1 ms alone. Here every round starts one process per engine; each loads the model
once (Kiln: one symbolic compile for every shape), warms each shape with 3 calls and times
--calls more; the figure is the median over rounds of each shape's median.

    python3 bench/solo_lengths.py [--model minilm|PATH] [--batches 1,8] [--lengths 8,16,32,64,128,256]
                                  [--rounds 2] [--calls 15] [--threads 2]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))


def child(engine, path, shapes, calls, threads):
    sys.path.insert(0, BENCH)
    from dynamic_shapes import feed_of
    if engine == "kiln":
        import kiln
        o = kiln.SessionOptions()
        o.intra_op_num_threads = threads
        s = kiln.InferenceSession(path, o)
    else:
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
        s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    out = []
    for b, q in shapes:
        feed = feed_of(b, q)
        for _ in range(3):
            s.run(None, feed)
        if engine == "kiln":
            s.wait_for_optimized_kernels()  # a cold cache's tiered compile: time the -O3 kernels
        ms = []
        for _ in range(calls):
            t0 = time.perf_counter()
            s.run(None, feed)
            ms.append((time.perf_counter() - t0) * 1e3)
        out.append(statistics.median(ms))
    print(" ".join(f"{m:.4f}" for m in out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="minilm", help="minilm (bench/dynamic_shapes.py's encoder) or an ONNX file "
                    "with inputs input_ids and attention_mask [batch, seq]")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--lengths", default="8,16,32,64,128,256")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--calls", type=int, default=15)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    shapes = [(b, s) for b in map(int, args.batches.split(",")) for s in map(int, args.lengths.split(","))]
    if args.child:
        return child(args.child[0], args.child[1], shapes, args.calls, args.threads)
    tmp = tempfile.mkdtemp()
    path = args.model
    if path == "minilm":
        sys.path.insert(0, BENCH)
        from dynamic_shapes import minilm_model
        path = os.path.join(tmp, "minilm.onnx")
        minilm_model(path)
    runs = {"kiln": [], "ort": []}
    for r in range(args.rounds):
        for engine in (("kiln", "ort") if r % 2 == 0 else ("ort", "kiln")):
            cmd = [sys.executable, __file__, "--child", engine, path, "--batches", args.batches, "--lengths",
                   args.lengths, "--calls", str(args.calls), "--threads", str(args.threads)]
            runs[engine].append([float(v) for v in subprocess.check_output(cmd, text=True).split()])
    print(f"{args.model}; {args.threads} threads; each engine alone in a process, {args.rounds} rounds, ms")
    print("| batch | seq | Kiln | ORT | Kiln / ORT |")
    print("|---:|---:|---:|---:|---:|")
    ratios = []
    for i, (b, s) in enumerate(shapes):
        k = statistics.median(run[i] for run in runs["kiln"])
        o = statistics.median(run[i] for run in runs["ort"])
        ratios.append(k / o)
        print(f"| {b} | {s} | {k:.2f} | {o:.2f} | {k / o:.2f} |")
    print(f"Kiln / ORT: median {statistics.median(ratios):.2f}, max {max(ratios):.2f}")


if __name__ == "__main__":
    main()
