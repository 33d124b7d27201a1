#!/usr/bin/env python3
"""Start-up of a compiled artifact vs the ONNX model vs ONNX Runtime, and the artifact's size.

One run measures, for one model (default: ResNet-50 of scripts/make_models.py):

* `kiln compile MODEL.onnx -o MODEL.kiln`: wall time of the first compile on the current kernel
  cache and of a second one (every kernel object and the linked library cached), the artifact's
  size against the ONNX file's.
* Load time, interleaved rep by rep (medians over --reps), all with the files in the page cache:
  - `kiln-run-artifact MODEL.kiln` (links only libkiln_runtime): its printed load_ms;
  - `kiln run MODEL.kiln`: load_ms of --timings-json (Session::load of the artifact);
  - `kiln run MODEL.onnx` on a warm kernel cache: load_ms of --timings-json (import, passes,
    lowering, kernel cache look-ups, dlopen of each kernel, plan);
  - ONNX Runtime: InferenceSession creation in this process (CPU provider, all graph
    optimizations, intra-op threads = --threads).
  Each load is timed inside its process (process start-up is not counted for any of them).

    python3 bench/load_time.py                       # ResNet-50, 7 reps
    python3 bench/load_time.py --model build/models/mlp.onnx --reps 3
    python3 bench/load_time.py --kernels generated   # no oneDNN primitives to build at load
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "scripts"))


def run(args, timeout=1800):
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def kiln_run_load_ms(kiln, model, threads, tmp, extra=()):
    timings = os.path.join(tmp, "timings.json")
    run([kiln, "run", model, "--repeat", "1", "--threads", threads, "--timings-json", timings, *extra])
    with open(timings) as f:
        return json.load(f)["load_ms"]


def runtime_only_load_ms(tool, artifact, threads):
    out = run([tool, artifact, "--repeat", "1", "--threads", threads])
    m = re.search(r"load_ms=([0-9.]+)", out)
    if not m:
        raise SystemExit(f"no load_ms=... in the output of {tool}:\n{out}")
    return float(m.group(1))


def ort_create_ms(model, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    t0 = time.perf_counter()
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    ms = (time.perf_counter() - t0) * 1e3
    del sess
    return ms


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.path.join(REPO, "build", "models", "resnet50.onnx"),
                    help="ONNX model (resnet50 is generated with scripts/make_models.py when missing)")
    ap.add_argument("--kiln", default=os.environ.get("KILN_BIN", os.path.join(REPO, "build", "bin", "kiln")))
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--kernels", default="auto", choices=["auto", "generated", "dnnl"],
                    help="kiln's --kernels for the compile and the ONNX runs")
    ap.add_argument("--json", help="also write the figures to this file")
    a = ap.parse_args()

    if not os.path.exists(a.model):
        import make_models
        name = os.path.basename(a.model)[:-5]
        print(f"generating {name} into {os.path.dirname(a.model)}", flush=True)
        make_models.write_test_model(name, os.path.dirname(a.model), check=False)
    tool = os.path.join(os.path.dirname(a.kiln), "kiln-run-artifact")
    threads = str(a.threads)
    with tempfile.TemporaryDirectory() as tmp:
        artifact = os.path.join(tmp, os.path.basename(a.model)[:-5] + ".kiln")
        t0 = time.perf_counter()
        kernels = ["--kernels", a.kernels]
        first = run([a.kiln, "compile", a.model, "-o", artifact, "--threads", threads, *kernels])
        compile_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        run([a.kiln, "compile", a.model, "-o", artifact, "--threads", threads, *kernels])
        recompile_s = time.perf_counter() - t0
        # Warm the kernel cache of the ONNX path and the page cache of every file.
        kiln_run_load_ms(a.kiln, a.model, threads, tmp, kernels)
        runtime_only_load_ms(tool, artifact, threads)
        ort_create_ms(a.model, a.threads)

        figures = {"artifact (kiln-run-artifact)": [], "artifact (kiln run)": [],
                   "ONNX, warm kernel cache (kiln run)": [], "ONNX Runtime session creation": []}
        for _ in range(a.reps):
            figures["artifact (kiln-run-artifact)"].append(runtime_only_load_ms(tool, artifact, threads))
            figures["artifact (kiln run)"].append(kiln_run_load_ms(a.kiln, artifact, threads, tmp))
            figures["ONNX, warm kernel cache (kiln run)"].append(kiln_run_load_ms(a.kiln, a.model, threads, tmp, kernels))
            figures["ONNX Runtime session creation"].append(ort_create_ms(a.model, a.threads))
        onnx_bytes = os.path.getsize(a.model)
        kiln_bytes = os.path.getsize(artifact)

    print(f"model {os.path.basename(a.model)}, --kernels {a.kernels}, {a.threads} thread(s), {a.reps} reps "
          f"(median, min, max ms)")
    print(f"kiln compile: {compile_s:.2f} s first, {recompile_s:.2f} s again (all cached)")
    print(f"size: ONNX {onnx_bytes / 1e6:.2f} MB, artifact {kiln_bytes / 1e6:.2f} MB "
          f"({kiln_bytes / onnx_bytes:.3f}x)")
    print(f"first compile said: {first.strip().splitlines()[1] if len(first.splitlines()) > 1 else first.strip()}")
    for name, ms in figures.items():
        print(f"  {name:38s} {statistics.median(ms):9.2f} {min(ms):9.2f} {max(ms):9.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": a.model, "threads": a.threads, "compile_s": compile_s, "recompile_s": recompile_s,
                       "onnx_bytes": onnx_bytes, "artifact_bytes": kiln_bytes,
                       "load_ms": {k: statistics.median(v) for k, v in figures.items()}}, f, indent=1)


if __name__ == "__main__":
    main()
