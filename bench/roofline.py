#!/usr/bin/env python3
"""Each kernel of a model against its roofline: which kernels hold the model back, and how far
they are from what the machine allows.

`kiln run --profile` records every step's time, FLOPs (2 x MACs, from the op's cost) and bytes
(the sizes of its argument buffers: a lower bound of its memory traffic). A kernel's roofline time
is max(FLOPs / peak, bytes / bandwidth), with the FP32 FMA peak of bench/fma_peak.c for the
thread count and the memory bandwidth measured here (a large numpy copy, read + write); its
efficiency is roofline time / measured time. Kernels below --flag (default 10%) of their roofline
that take at least --min-share of the run are flagged: these are the cliffs.

    python3 bench/roofline.py MODEL.onnx --inputs INPUTS.npz --threads 2 [--kiln build/bin/kiln]
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

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)


def measure_bandwidth_gbs(mib=256, tries=3):
    """Main-memory bandwidth (GB/s) of one thread copying a buffer far larger than the caches."""
    a = np.ones(mib * (1 << 20) // 8)
    b = np.empty_like(a)
    best = float("inf")
    for _ in range(tries):
        t0 = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t0)
    return 2 * a.nbytes / best / 1e9


def profile_steps(kiln, model, inputs, threads, repeat, cache_dir=None):
    """{step: {name, node, flops, bytes, us (median over the timed runs)}} of one kiln run."""
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace.json")
        cmd = [kiln, "run", model, "--repeat", str(repeat), "--threads", str(threads),
               "--executor", "sequential", "--profile", trace]
        if inputs:
            cmd += ["--inputs", inputs]
        env = dict(os.environ, **({"KILN_CACHE_DIR": cache_dir} if cache_dir else {}))
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr.strip()}")
        with open(trace) as f:
            events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    runs = sorted({e["args"]["run"] for e in events})
    timed = set(runs[1:]) or set(runs)  # run 0 warms caches
    steps = {}
    for e in events:
        if e["args"]["run"] not in timed:
            continue
        s = steps.setdefault(e["args"]["step"], {"name": e["name"], "node": e["args"]["node"],
                                                 "flops": e["args"]["flops"], "bytes": e["args"]["bytes"],
                                                 "durs": []})
        s["durs"].append(e["dur"])
    for s in steps.values():
        s["us"] = float(np.median(s.pop("durs")))
    return steps


def rate(steps, peak_gflops, bw_gbs):
    """Adds roofline_us, efficiency and share to every step; returns the steps sorted by time."""
    total = sum(s["us"] for s in steps.values()) or 1.0
    for s in steps.values():
        # flop / (GFLOP/s) = ns; byte / (GB/s) = ns
        s["roofline_us"] = max(s["flops"] / peak_gflops, s["bytes"] / bw_gbs) / 1e3
        s["efficiency"] = s["roofline_us"] / s["us"] if s["us"] > 0 else 1.0
        s["gflops"] = s["flops"] / (s["us"] * 1e3) if s["us"] > 0 else 0.0
        s["share"] = s["us"] / total
    return sorted(steps.values(), key=lambda s: -s["us"])


def flagged(rated, flag=0.10, min_share=0.01):
    return [s for s in rated if s["efficiency"] < flag and s["share"] >= min_share]


def describe(s):
    what = f"{s['gflops']:.1f} GFLOP/s" if s["flops"] else f"{s['bytes'] / (s['us'] * 1e3):.1f} GB/s"
    return (f"{s['name']} ({s['node']}): {s['us'] / 1e3:.2f} ms, {100 * s['share']:.0f}% of the run, "
            f"{what}, {100 * s['efficiency']:.1f}% of its roofline")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--inputs", default=None)
    ap.add_argument("--kiln", default=os.environ.get("KILN_BIN", os.path.join(REPO, "build", "bin", "kiln")))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--flag", type=float, default=0.10)
    ap.add_argument("--min-share", type=float, default=0.01)
    ap.add_argument("--top", type=int, default=10)
    args = ap.parse_args(argv)
    import fma_peak
    peak = fma_peak.measure_peak([args.threads], tries=2)[args.threads][0]
    bw = measure_bandwidth_gbs()
    print(f"peak {peak:.1f} GFLOP/s at {args.threads} threads, bandwidth {bw:.1f} GB/s")
    rated = rate(profile_steps(args.kiln, args.model, args.inputs, args.threads, args.repeat), peak, bw)
    bad = flagged(rated, args.flag, args.min_share)
    for s in rated[:args.top]:
        print(("FLAG " if s in bad else "     ") + describe(s))
    print(f"{len(bad)} kernel(s) below {100 * args.flag:.0f}% of their roofline "
          f"(taking >= {100 * args.min_share:.0f}% of the run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
