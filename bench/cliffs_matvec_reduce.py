#!/usr/bin/env python3
"""Matrix-vector products and long reductions: Kiln vs ONNX Runtime, single-op models, GB/s.

Issue 24's two memory-bound cliffs, each as a one-node ONNX model (written to --work-dir):

* GEMV: Gemm Y = A B^T + c (transB=1, a PyTorch Linear) with a constant weight, at batch 1 and
  8: a classifier head after global pooling (K=1024, N=512), ResNet-50's fc (K=2048, N=1000),
  MobileNetV2's classifier (K=1280, N=1000).
* Reductions: ReduceMax and ReduceSum over the last axis of [1, 2^20] and over axis 0 of
  [1024, 1024]; ReduceMean over all axes of [1024, 1024]; ArgMax over a row of 2^20.

Per (workload, threads), the engines alternate round by round (the order rotates), so load from
other processes on a shared machine falls on all alike:
* Kiln: one `kiln run --repeat R --threads T --executor sequential --timings-json F` process
  per round (its kernel cache warmed before timing; `kiln run` times the runs after a warm-up);
  `--kiln-kernels X` passes `--kernels X`. `--baseline-kiln PATH` adds a second Kiln build
  (e.g. main's, for before/after) as the engine `base`.
* ONNX Runtime: CPU provider, intra_op_num_threads=T, sequential, all optimizations, R runs
  of `sess.run` per round in this process (its time includes the Python call, a few us).
Medians over all timed runs. GB/s counts the bytes an ideal kernel moves: every input and the
output once (the weight dominates the GEMVs). `kiln/ort` below 1: Kiln is faster.

    /work/peers-venv/bin/python bench/cliffs_matvec_reduce.py [--threads 1,2] [--rounds 5]
        [--repeat 50] [--only gemv|reduce] [--baseline-kiln /path/to/kiln]
    python3 bench/cliffs_matvec_reduce.py --smoke   # each model once, outputs vs ORT
"""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "scripts"))

from peers import Kiln, OnnxRuntime, compare  # noqa: E402

GEMVS = [("head K1024 N512", 1024, 512), ("resnet50 fc K2048 N1000", 2048, 1000),
         ("mobilenetv2 fc K1280 N1000", 1280, 1000)]
M = 1 << 20


def _save(path, node, inputs, outputs, inits, opset=18):
    g = helper.make_graph([node], os.path.basename(path), inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def _vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def gemv(path, m, k, n):
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
    c = rng.standard_normal(n).astype(np.float32)
    _save(path, helper.make_node("Gemm", ["a", "w", "c"], ["y"], transB=1), [_vi("a", [m, k])],
          [_vi("y", [m, n])], [numpy_helper.from_array(w, "w"), numpy_helper.from_array(c, "c")])
    return {"a": [m, k]}, 4 * (n * k + m * k + n + m * n)


def reduce(path, op, shape, axes, keepdims=1):
    """axes None: every axis (no axes input)."""
    red = range(len(shape)) if axes is None else axes
    out = [1 if i in red else d for i, d in enumerate(shape)] if keepdims else \
        [d for i, d in enumerate(shape) if i not in red]
    inits = []
    ins = ["x"]
    if axes is not None:
        inits.append(numpy_helper.from_array(np.array(axes, np.int64), "axes"))
        ins.append("axes")
    _save(path, helper.make_node(op, ins, ["y"], keepdims=keepdims), [_vi("x", shape)],
          [_vi("y", out)], inits)
    return {"x": shape}, 4 * (int(np.prod(shape)) + int(np.prod(out)))


def argmax(path, shape):
    _save(path, helper.make_node("ArgMax", ["x"], ["y"], axis=len(shape) - 1, keepdims=1),
          [_vi("x", shape)], [_vi("y", shape[:-1] + [1], TensorProto.INT64)], [])
    return {"x": shape}, 4 * int(np.prod(shape)) + 8


def workloads(only, out_dir):
    """[(label, model path, inputs .npz path, bytes)]"""
    os.makedirs(out_dir, exist_ok=True)
    specs = []
    if only in (None, "gemv"):
        for m in (1, 8):
            for label, k, n in GEMVS:
                specs.append((f"gemv M{m} {label}", f"gemv_m{m}_k{k}_n{n}",
                              lambda p, m=m, k=k, n=n: gemv(p, m, k, n)))
    if only in (None, "reduce"):
        for op in ("ReduceMax", "ReduceSum"):
            specs.append((f"{op} last axis [1,2^20]", f"{op}_last",
                          lambda p, op=op: reduce(p, op, [1, M], [1])))
            specs.append((f"{op} axis 0 [1024,1024]", f"{op}_axis0",
                          lambda p, op=op: reduce(p, op, [1024, 1024], [0])))
        specs.append(("ReduceMean all axes [1024,1024]", "ReduceMean_all",
                      lambda p: reduce(p, "ReduceMean", [1024, 1024], None, keepdims=0)))
        specs.append(("ArgMax last axis [1,2^20]", "ArgMax_last", lambda p: argmax(p, [1, M])))
    out = []
    rng = np.random.default_rng(1)
    for label, stem, make in specs:
        path = os.path.join(out_dir, stem + ".onnx")
        shapes, nbytes = make(path)
        feed = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
        npz = os.path.join(out_dir, stem + ".npz")
        np.savez(npz, **feed)
        out.append((label, path, npz, nbytes, feed))
    return out


def measure(args, label, path, npz, feed, threads, cache):
    engines = [Kiln(args.kiln, path, npz, threads, args.kiln_kernels, cache),
               OnnxRuntime(path, feed, threads)]
    if args.baseline_kiln:
        base = Kiln(args.baseline_kiln, path, npz, threads, args.kiln_kernels, cache + "_base")
        base.name = "base"
        engines.append(base)
    ort = engines[1]
    for e in engines:
        if e.name != "ort":
            e.timed_runs(1, ort.names)  # warms the kernel cache, keeps the outputs
    times = {e.name: [] for e in engines}
    for r in range(args.rounds):
        k = r % len(engines)
        for e in engines[k:] + engines[:k]:
            times[e.name] += e.timed_runs(args.repeat)
    check = {e.name: compare(e.outputs, ort.outputs) for e in engines if e.name != "ort"}
    return {n: float(np.median(ms)) for n, ms in times.items()}, check


def smoke(args, log):
    failed = []
    cache = tempfile.mkdtemp(prefix="kiln_cliffs_")
    try:
        for label, path, npz, _, feed in workloads(args.only, args.work_dir):
            k = Kiln(args.kiln, path, npz, 1, args.kiln_kernels, cache)
            ort = OnnxRuntime(path, feed, 1)
            k.timed_runs(1, ort.names)
            bad = compare(k.outputs, ort.outputs)
            log(f"  {label}: {'outputs match ORT' if not bad else 'MISMATCH ' + bad}")
            if bad:
                failed.append(label)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    if failed:
        log(f"cliffs smoke: Kiln differs from ONNX Runtime on {', '.join(failed)}")
        return 1
    log("cliffs smoke: ok")
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kiln", default=os.environ.get("KILN_BIN",
                                                     os.path.join(REPO, "build", "bin", "kiln")))
    ap.add_argument("--baseline-kiln", default=None, help="a second Kiln build timed as `base`")
    ap.add_argument("--kiln-kernels", default=None, help="pass `--kernels X` to kiln run")
    ap.add_argument("--work-dir", default=os.path.join(REPO, "build", "bench", "cliffs"))
    ap.add_argument("--only", choices=["gemv", "reduce"])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--smoke", action="store_true", help="each model once, outputs vs ORT")
    args = ap.parse_args(argv)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    if args.smoke:
        return smoke(args, log)
    cache = tempfile.mkdtemp(prefix="kiln_cliffs_")
    head = "| workload | threads | Kiln ms | GB/s | ORT ms | GB/s | kiln/ort |"
    rule = "|---|---:|---:|---:|---:|---:|---:|"
    if args.baseline_kiln:
        head += " base ms | base/kiln |"
        rule += "---:|---:|"
    lines = [head, rule]
    mismatches = []
    try:
        for label, path, npz, nbytes, feed in workloads(args.only, args.work_dir):
            for t in (int(x) for x in args.threads.split(",")):
                ms, check = measure(args, label, path, npz, feed, t, cache)
                gbs = {n: nbytes / (v * 1e6) for n, v in ms.items()}
                line = (f"| {label} | {t} | {ms['kiln']:.4f} | {gbs['kiln']:.1f} | "
                        f"{ms['ort']:.4f} | {gbs['ort']:.1f} | {ms['kiln'] / ms['ort']:.2f} |")
                if args.baseline_kiln:
                    line += f" {ms['base']:.4f} | {ms['base'] / ms['kiln']:.2f} |"
                for n, bad in check.items():
                    if bad:
                        line += f" {n} MISMATCH {bad}"
                        mismatches.append(f"{label} T={t} {n}")
                lines.append(line)
                log(line)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(cache + "_base", ignore_errors=True)
    print("\n".join(["python3 bench/cliffs_matvec_reduce.py " + shlex.join(argv), ""] + lines))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
