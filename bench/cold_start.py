#!/usr/bin/env python3
"""Load + first call with a cold kernel cache (issue 23: at most 1 s), PP-OCR's three models.

Per round, per model, per Kiln binary (alternating, so two builds see the same machine): a fresh
KILN_CACHE_DIR, then `kiln run MODEL --symbolic-shapes --input x=X.npy --repeat 1
--timings-json T` in its own process; the figure is load_ms + first_run_ms from T, and the CPU
seconds of that process and its compilers (user + sys, from the children's rusage). ONNX
Runtime's session creation + first call, in a process of its own, beside it when importable.
Medians over rounds, or minima (--stat min: on a loaded machine, the round least disturbed).

    python3 bench/cold_start.py [--kiln build/bin/kiln[,OTHER/kiln]] [--rounds 2] [--threads 2] [--stat median|min]
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "scripts"))
import fetch_pypi_models  # noqa: E402

MODELS = [("cls", "ch_ppocr_mobile_v2.0_cls_infer.onnx", (1, 3, 48, 192)),
          ("det", "ch_PP-OCRv4_det_infer.onnx", (1, 3, 320, 320)),
          ("rec", "ch_PP-OCRv4_rec_infer.onnx", (1, 3, 48, 320))]

ORT_CHILD = """
import sys, time, numpy as np, onnxruntime as ort
t0 = time.perf_counter()
o = ort.SessionOptions(); o.intra_op_num_threads = int(sys.argv[3])
s = ort.InferenceSession(sys.argv[1], o, providers=["CPUExecutionProvider"])
s.run(None, {"x": np.load(sys.argv[2])})
print((time.perf_counter() - t0) * 1e3)
"""


def kiln_cold(kiln, model, x, threads, tmp):
    cache = tempfile.mkdtemp(dir=tmp)
    timings = os.path.join(tmp, "t.json")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([kiln, "run", model, "--symbolic-shapes", "--input", f"x={x}", "--repeat", "1", "--threads",
                    str(threads), "--timings-json", timings], check=True, capture_output=True,
                   env=dict(os.environ, KILN_CACHE_DIR=cache))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    shutil.rmtree(cache, ignore_errors=True)
    with open(timings) as f:
        t = json.load(f)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return t["load_ms"] + t["first_run_ms"], cpu


def ort_cold(model, x, threads):
    try:
        out = subprocess.run([sys.executable, "-c", ORT_CHILD, model, x, str(threads)], check=True,
                             capture_output=True, text=True)
        return float(out.stdout.strip())
    except (subprocess.CalledProcessError, ValueError):
        return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", default=os.path.join(REPO, "build", "bin", "kiln"), help="comma-separated binaries")
    ap.add_argument("--models-dir", default=os.path.join(REPO, "build", "pypi_models"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--stat", choices=["median", "min"], default="median", help="over the rounds")
    args = ap.parse_args(argv)
    stat = statistics.median if args.stat == "median" else min
    kilns = args.kiln.split(",")
    fetch_pypi_models.fetch(args.models_dir)
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for key, name, shape in MODELS:
            model = os.path.join(args.models_dir, name)
            x = os.path.join(tmp, f"{key}.npy")
            np.save(x, np.random.default_rng(0).uniform(0, 1, shape).astype(np.float32))
            for _ in range(args.rounds):
                for k in kilns:
                    rows.setdefault((key, k), []).append(kiln_cold(k, model, x, args.threads, tmp))
                ms = ort_cold(model, x, args.threads)
                if ms is not None:
                    rows.setdefault((key, "ort"), []).append((ms, 0.0))
    print(f"\n{args.stat} of {args.rounds} rounds, {args.threads} threads")
    head = " | ".join(f"{k}: wall s / CPU s" for k in kilns)
    print(f"\n| model | {head} | ORT: session + first call s |")
    print("|---|" + "---:|" * (len(kilns) + 1))
    for key, _, shape in MODELS:
        cells = []
        for k in kilns:
            wall = stat([r[0] for r in rows[(key, k)]]) / 1e3
            cpu = stat([r[1] for r in rows[(key, k)]])
            cells.append(f"{wall:.2f} / {cpu:.1f}")
        ort = rows.get((key, "ort"))
        cells.append(f"{stat([r[0] for r in ort]) / 1e3:.2f}" if ort else "-")
        print(f"| {key} {'x'.join(map(str, shape))} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
