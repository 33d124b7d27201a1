#!/usr/bin/env python3
"""Kernel micro-benchmark: single-op models (sgemm shapes, every distinct ResNet-50 conv) through
Kiln's kernel choices and ONNX Runtime, 1 thread, in GFLOP/s and % of the measured FP32 peak.

Workloads:
* sgemm: MatMul of an activation [M, K] by a constant weight [K, N] for M=N=K=1024 and the
  BERT-base shapes [128,768]x[768,768], [128,768]x[768,3072], [128,3072]x[3072,768], ViT-B/16's
  MLP at batch 8 [1576,768]x[768,3072]; the
  attention batch MatMul [12,128,64]x[12,64,128] (both operands activations).
* conv: each distinct (C, M, H, W, KH, KW, stride, pad) of the resnet50 model of
  scripts/make_models.py (batch 1, constant weights, no bias; `xN` = how often it occurs).

Each workload is written as a one-node ONNX model (build/bench/kernels/) and run by
`kiln run --threads 1 --executor sequential --repeat R --profile TRACE --timings-json F`,
once per Kiln kernel choice: `--kernels generated` and `--kernels dnnl` when `kiln run --help`
lists `--kernels`, else Kiln's default. `op ms` is the per-run time of the op's own kernel(s)
from the trace (the layout reorders Kiln puts at a one-node graph's boundary are left out);
`e2e ms` is the median of the whole timed run. ONNX Runtime (1 intra-op thread, sequential, all
optimizations) is timed end to end in this process. GFLOP/s counts 2 x MACs (bench/flops.py)
over the op time (Kiln) or the run time (ORT); % of peak is against bench/fma_peak.c at 1
thread. Engines alternate per round; figures are medians over rounds.

    python3 bench/kernels.py [--only sgemm|conv] [--repeat 10] [--rounds 2] [--no-ort]
        [--no-docs]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "scripts"))

import flops  # noqa: E402
import fma_peak  # noqa: E402
import make_models  # noqa: E402
from peers import cpu_name, write_docs  # noqa: E402

BEGIN, END = "<!-- kernels:begin -->", "<!-- kernels:end -->"
SGEMMS = [("sgemm 1024^3", [1024, 1024], [1024, 1024], True),
          ("bert qkv/out [128,768]x[768,768]", [128, 768], [768, 768], True),
          ("bert ffn1 [128,768]x[768,3072]", [128, 768], [768, 3072], True),
          ("bert ffn2 [128,3072]x[3072,768]", [128, 3072], [3072, 768], True),
          ("vit-b/16 mlp, batch 8 [1576,768]x[768,3072]", [1576, 768], [768, 3072], True),
          ("attention [12,128,64]x[12,64,128]", [12, 128, 64], [12, 64, 128], False)]


def _save(nodes, inputs, outputs, inits, path):
    g = helper.make_graph(nodes, os.path.basename(path), inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def matmul_model(path, a, b, const_b):
    rng = np.random.default_rng(0)
    out = a[:-1] + [b[-1]]
    if const_b:
        w = numpy_helper.from_array((rng.standard_normal(b) / np.sqrt(b[-2])).astype(np.float32),
                                    "b")
        _save([helper.make_node("MatMul", ["a", "b"], ["y"])], [f32("a", a)], [f32("y", out)],
              [w], path)
    else:
        _save([helper.make_node("MatMul", ["a", "b"], ["y"])], [f32("a", a), f32("b", b)],
              [f32("y", out)], [], path)


def conv_model(path, wl):
    rng = np.random.default_rng(0)
    oh = (wl.h + 2 * wl.pad - wl.kh) // wl.stride + 1
    ow = (wl.w + 2 * wl.pad - wl.kw) // wl.stride + 1
    w = rng.standard_normal((wl.m, wl.c // wl.group, wl.kh, wl.kw)) / np.sqrt(wl.c * wl.kh * wl.kw)
    node = helper.make_node("Conv", ["x", "w"], ["y"], strides=[wl.stride] * 2,
                            pads=[wl.pad] * 4, group=wl.group)
    _save([node], [f32("x", [wl.n, wl.c, wl.h, wl.w])], [f32("y", [wl.n, wl.m, oh, ow])],
          [numpy_helper.from_array(w.astype(np.float32), "w")], path)


def workloads(only, out_dir, models_dir):
    """[(label, model path, FLOPs)]"""
    os.makedirs(out_dir, exist_ok=True)
    out = []
    if only in (None, "sgemm"):
        for i, (label, a, b, const_b) in enumerate(SGEMMS):
            path = os.path.join(out_dir, f"sgemm_{i}.onnx")
            matmul_model(path, a, b, const_b)
            out.append((label, path))
    if only in (None, "conv"):
        r50 = os.path.join(models_dir, "resnet50.onnx")
        if not os.path.exists(r50):
            make_models.write_test_model("resnet50", models_dir)
        for wl, count in flops.conv_workloads(r50).items():
            label = (f"conv C{wl.c} M{wl.m} {wl.h}x{wl.w} k{wl.kh}x{wl.kw} s{wl.stride} "
                     f"p{wl.pad} x{count}")
            path = os.path.join(out_dir, f"conv_{wl.c}_{wl.m}_{wl.h}_{wl.kh}_{wl.stride}.onnx")
            conv_model(path, wl)
            out.append((label, path))
    return [(label, path, flops.model_flops(path)) for label, path in out]


def kiln_kernel_choices(kiln):
    helptext = subprocess.run([kiln, "run", "--help"], capture_output=True, text=True).stdout
    return ["generated", "dnnl"] if "--kernels" in helptext else [None]


def kiln_once(kiln, model, kernels, repeat, env):
    """(op ms, e2e ms) of one `kiln run` process: medians over its timed runs (the warm-up run,
    run 0 of the trace, is left out)."""
    with tempfile.TemporaryDirectory() as tmp:
        tj, trace = os.path.join(tmp, "t.json"), os.path.join(tmp, "trace.json")
        cmd = [kiln, "run", model, "--threads", "1", "--executor", "sequential", "--repeat",
               str(repeat), "--profile", trace, "--timings-json", tj]
        if kernels:
            cmd += ["--kernels", kernels]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"{shlex.join(cmd)} exited {proc.returncode}:\n{proc.stderr}")
        with open(tj) as f:
            e2e = statistics.median(json.load(f)["runs_ms"])
        with open(trace) as f:
            events = json.load(f)
    events = events["traceEvents"] if isinstance(events, dict) else events
    per_run = {}
    for e in events:
        if e.get("cat") == "kernel" and "Layout" not in e["name"] and e["args"]["run"] > 0:
            per_run[e["args"]["run"]] = per_run.get(e["args"]["run"], 0.0) + e["dur"] / 1e3
    return (statistics.median(per_run.values()) if per_run else e2e), e2e


class Ort:
    def __init__(self, model):
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self.sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(1)
        self.feed = {i.name: rng.standard_normal(i.shape).astype(np.float32)
                     for i in self.sess.get_inputs()}

    def median_ms(self, repeat):
        self.sess.run(None, self.feed)
        ms = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            self.sess.run(None, self.feed)
            ms.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(ms)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kiln", default=os.environ.get("KILN_BIN",
                                                     os.path.join(REPO, "build", "bin", "kiln")))
    ap.add_argument("--models-dir", default=os.path.join(REPO, "build", "models"))
    ap.add_argument("--work-dir", default=os.path.join(REPO, "build", "bench", "kernels"))
    ap.add_argument("--only", choices=["sgemm", "conv"])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-ort", action="store_true")
    ap.add_argument("--no-docs", action="store_true")
    ap.add_argument("--docs", default=os.path.join(REPO, "docs", "benchmarks.md"))
    args = ap.parse_args(argv)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    peak, isa = fma_peak.measure_peak([1], tries=3)[1]
    log(f"peak 1 thread: {peak:.1f} GFLOP/s ({isa})")
    choices = kiln_kernel_choices(args.kiln)
    cache = tempfile.mkdtemp(prefix="kiln_kernels_cache_")
    env = dict(os.environ, KILN_CACHE_DIR=cache)
    rows = []
    for label, path, fl in workloads(args.only, args.work_dir, args.models_dir):
        ort = None if args.no_ort else Ort(path)
        res = {c: [] for c in choices}
        ort_ms = []
        for _ in range(args.rounds):
            for c in choices:
                if res[c] is None:
                    continue  # failed in an earlier round
                try:
                    res[c].append(kiln_once(args.kiln, path, c, args.repeat, env))
                except RuntimeError as e:
                    log(f"{label}: kiln[{c or 'default'}] failed: {e}")
                    res[c] = None
            if ort:
                ort_ms.append(ort.median_ms(args.repeat))
        row = {"label": label, "flops": fl}
        for c in choices:
            row[c] = res[c] and (statistics.median(r[0] for r in res[c]),
                                 statistics.median(r[1] for r in res[c]))
        row["ort"] = statistics.median(ort_ms) if ort_ms else None
        rows.append(row)
        log(f"{label}: " + ", ".join(f"kiln[{c or 'default'}] {row[c][0]:.3f} ms"
                                     for c in choices if row[c])
            + (f", ort {row['ort']:.3f} ms" if row["ort"] else ""))

    def gf(ms):
        g = row["flops"] / (ms * 1e6)
        return f"{g:.1f} | {100 * g / peak:.1f}"

    head = "| workload | MFLOP |"
    rule = "|---|---:|"
    for c in choices:
        name = f"Kiln {c}" if c else "Kiln"
        head += f" {name} op / e2e ms | GFLOP/s | % peak |"
        rule += "---:|---:|---:|"
    if not args.no_ort:
        head += " ORT ms | GFLOP/s | % peak |"
        rule += "---:|---:|---:|"
    lines = [head, rule]
    for row in rows:
        line = f"| {row['label']} | {row['flops'] / 1e6:.1f} |"
        for c in choices:
            line += (f" {row[c][0]:.3f} / {row[c][1]:.3f} | {gf(row[c][0])} |" if row[c]
                     else " failed | - | - |")
        if row["ort"]:
            line += f" {row['ort']:.3f} | {gf(row['ort'])} |"
        lines.append(line)
    text = "\n".join([
        f"Measured {datetime.date.today().isoformat()} on {cpu_name()}, 1 thread; measured FP32 "
        f"peak {peak:.1f} GFLOP/s ({isa}). Median over {args.rounds} rounds of the median of "
        f"{args.repeat} runs.", "", "```", "python3 bench/kernels.py " + shlex.join(argv), "```",
        ""] + lines)
    print(text)
    if not args.no_docs:
        write_docs(args.docs, text, BEGIN, END, "Kernels: single-op GFLOP/s (`bench/kernels.py`)")
        log(f"wrote {args.docs}")
    shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
