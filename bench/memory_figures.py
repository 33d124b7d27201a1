#!/usr/bin/env python3
"""Memory figures of Kiln's static plan, and peak resident memory of Kiln vs ONNX Runtime.

For each model (default: resnet50, mobilenetv2, bert_base at batch 1, built by
scripts/make_models.py into --models when missing):

* `kiln inspect MODEL --memory --executor sequential|dataflow`: arena vs naive sum vs lower bound
  (bytes), the sequential plan and the concurrency-safe plan of the dataflow executor;
* peak RSS (`/usr/bin/time -v`, "Maximum resident set size") of `kiln run MODEL --repeat R`
  and of a Python ONNX Runtime runner doing the same (load, R+1 runs), interleaved
  kiln/ort/kiln/ort... `--trials` times; the median of each is reported with the ratio.

Kiln's process imports, compiles (kernels come from the on-disk cache after the first trial)
and runs; ORT's process includes the Python interpreter and numpy (measured alone as
"python+numpy" so it can be subtracted by the reader). Both use --threads threads.

    python3 bench/memory_figures.py                       # the three big models
    python3 bench/memory_figures.py --only resnet18,resnet_block --trials 3
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "scripts"))

ORT_RUNNER = r"""
import sys, numpy as np, onnxruntime as ort
path, npz, repeat, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
so = ort.SessionOptions()
so.intra_op_num_threads = threads
so.inter_op_num_threads = 1
s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
feed = dict(np.load(npz))
for _ in range(repeat + 1):
    out = s.run(None, feed)
"""
BASELINE = "import numpy"


def ensure_model(models_dir, name):
    path = os.path.join(models_dir, name + ".onnx")
    if not os.path.exists(path):
        import make_models  # scripts/make_models.py
        print(f"building {name} into {models_dir} ...", flush=True)
        make_models.write_test_model(name, models_dir, check=False)
    return path, os.path.join(models_dir, name + "_inputs.npz")


def plan_figures(kiln, model, executor):
    r = subprocess.run([kiln, "inspect", model, "--memory", "--executor", executor],
                       capture_output=True, text=True, check=True)
    figs = {}
    for key in ("arena", "naive sum", "lower bound", "in-place steps"):
        figs[key] = int(re.search(rf"^{key}: (\d+)$", r.stdout, re.M).group(1))
    return figs


def peak_rss_kb(cmd, env=None):
    r = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr).group(1))


def mib(b):
    return f"{b / 2**20:8.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="resnet50,mobilenetv2,bert_base")
    ap.add_argument("--models", default=os.path.join(REPO, "build", "models"))
    ap.add_argument("--kiln", default=os.environ.get("KILN_BIN", os.path.join(REPO, "build", "bin", "kiln")))
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--executor", default="sequential", help="executor of the `kiln run` RSS runs")
    args = ap.parse_args()
    names = [n for n in args.only.split(",") if n]

    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(ORT_RUNNER)
        runner = f.name
    base_kb = statistics.median(peak_rss_kb([sys.executable, "-c", BASELINE]) for _ in range(3))

    plan_rows, rss_rows = [], []
    for name in names:
        model, npz = ensure_model(args.models, name)
        seq = plan_figures(args.kiln, model, "sequential")
        con = plan_figures(args.kiln, model, "dataflow")
        plan_rows.append((name, seq, con))
        kiln_kb, ort_kb = [], []
        for _ in range(args.trials):  # interleaved
            kiln_kb.append(peak_rss_kb([args.kiln, "run", model, "--inputs", npz, "--repeat", str(args.repeat),
                                        "--threads", str(args.threads), "--executor", args.executor]))
            ort_kb.append(peak_rss_kb([sys.executable, runner, model, npz, str(args.repeat), str(args.threads)]))
        rss_rows.append((name, statistics.median(kiln_kb), statistics.median(ort_kb)))
        print(f"measured {name}", file=sys.stderr, flush=True)
    os.unlink(runner)

    print("static memory plan (MiB; bytes in `kiln inspect --memory`)")
    print(f"{'model':14s} {'naive sum':>9s} {'lower bnd':>9s} {'arena':>9s} {'arena/lb':>8s} {'in-place':>8s}"
          f" {'arena(df)':>9s} {'df/lb':>6s}")
    for name, s, c in plan_rows:
        print(f"{name:14s} {mib(s['naive sum']):>9s} {mib(s['lower bound']):>9s} {mib(s['arena']):>9s}"
              f" {s['arena'] / max(1, s['lower bound']):8.3f} {s['in-place steps']:8d}"
              f" {mib(c['arena']):>9s} {c['arena'] / max(1, c['lower bound']):6.3f}")
    print()
    print(f"peak RSS, median of {args.trials} (MiB; kiln run --executor {args.executor} --repeat {args.repeat}"
          f" vs python onnxruntime, {args.threads} thread(s); python+numpy alone: {base_kb / 1024:.1f} MiB)")
    print(f"{'model':14s} {'kiln':>9s} {'ort':>9s} {'kiln/ort':>8s} {'ort-py':>9s} {'kiln/(ort-py)':>13s}")
    for name, k, o in rss_rows:
        print(f"{name:14s} {k / 1024:9.1f} {o / 1024:9.1f} {k / o:8.3f} {(o - base_kb) / 1024:9.1f}"
              f" {k / max(1, o - base_kb):13.3f}")


if __name__ == "__main__":
    main()
