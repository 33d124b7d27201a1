#!/usr/bin/env python3
"""Kiln vs ONNX Runtime latency on the generated models, measured in the same run.

For each model, Kiln (`kiln run --repeat N`, whose `median X.XX ms` line is parsed) and ONNX
Runtime (CPU provider, same thread count in intra_op_num_threads, sequential execution, all graph
optimizations, median of N runs after warm-up) are timed alternately, `--rounds` times; the
reported number of each is the median over rounds. The table gives model | kiln ms | ort ms |
ratio (kiln/ort; < 1 means Kiln is faster).

It also reports Kiln's start-up cost: the wall time of one `kiln run` process with an empty
KILN_CACHE_DIR (the kernels are generated and compiled) and of a second one with that now warm
cache.

    python3 bench/bench_models.py [--threads 1] [--repeat 20] [--rounds 3]
        [--models mlp,small_cnn,resnet_block,resnet18,two_input_mix,digits] [--ort-only]
    python3 bench/bench_models.py --models resnet50,mobilenetv2,bert_base --threads 2

Any model of scripts/make_models.py may be named, including the benchmark-size ones that the
default test set leaves out (resnet50, mobilenetv2, bert_base: generated on first use).

Test models are read from --models-dir (default build/models) and generated there first when
missing (scripts/make_models.py).
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "scripts"))

import make_models  # noqa: E402

DEFAULT_MODELS = "mlp,small_cnn,resnet_block,resnet18,two_input_mix,digits"
MEDIAN_RE = re.compile(r"median\s+([0-9.]+)\s*ms")


def model_files(name, models_dir):
    """(model path, inputs path, {dim: value}) of a benchmark model."""
    if name == "digits":
        d = os.path.join(REPO, "models", "digits")
        return os.path.join(d, "digits_cnn.onnx"), os.path.join(d, "test_images.npz"), {"N": 360}
    model = os.path.join(models_dir, name + ".onnx")
    inputs = os.path.join(models_dir, name + "_inputs.npz")
    if not (os.path.exists(model) and os.path.exists(inputs)):
        make_models.write_test_model(name, models_dir)
    return model, inputs, {}


def kiln_cmd(kiln, model, inputs, dims, out_dir, threads, repeat):
    cmd = [kiln, "run", model, "--inputs", inputs, "--output-dir", out_dir,
           "--threads", str(threads)]
    for k, v in dims.items():
        cmd += ["--dim", f"{k}={v}"]
    return cmd + ["--repeat", str(repeat)]


def run_checked(cmd, env):
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr.strip()}")
    return proc, wall


def kiln_median_ms(kiln, files, threads, repeat, env):
    model, inputs, dims = files
    with tempfile.TemporaryDirectory() as out:
        proc, _ = run_checked(kiln_cmd(kiln, model, inputs, dims, out, threads, repeat), env)
    m = MEDIAN_RE.search(proc.stdout + proc.stderr)
    if not m:
        raise RuntimeError(f"no 'median X ms' in the output of kiln --repeat:\n{proc.stdout}")
    return float(m.group(1))


class OrtModel:
    def __init__(self, files, threads):
        import onnxruntime as ort
        model, inputs, _ = files
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        with np.load(inputs) as z:
            self.feed = {i.name: z[i.name] for i in self.sess.get_inputs()}

    def median_ms(self, repeat, warmup=3):
        for _ in range(warmup):
            self.sess.run(None, self.feed)
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            self.sess.run(None, self.feed)
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)


def startup_times(kiln, files, threads, cache_dir):
    """Wall time of `kiln run` with an empty cache (compile) and then with the warm cache."""
    model, inputs, dims = files
    shutil.rmtree(cache_dir, ignore_errors=True)
    os.makedirs(cache_dir)
    env = dict(os.environ, KILN_CACHE_DIR=cache_dir)
    with tempfile.TemporaryDirectory() as out:
        cmd = kiln_cmd(kiln, model, inputs, dims, out, threads, 1)
        _, cold = run_checked(cmd, env)
        _, warm = run_checked(cmd, env)
    return cold, warm


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kiln", default=os.environ.get("KILN_BIN",
                                                     os.path.join(REPO, "build", "bin", "kiln")))
    ap.add_argument("--models-dir", default=os.path.join(REPO, "build", "models"))
    ap.add_argument("--models", default=DEFAULT_MODELS)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=20, help="timed runs per measurement")
    ap.add_argument("--rounds", type=int, default=3, help="alternating Kiln/ORT rounds")
    ap.add_argument("--ort-only", action="store_true", help="time ONNX Runtime only")
    ap.add_argument("--no-startup", action="store_true", help="skip the compile/cache timing")
    args = ap.parse_args(argv)

    names = [n for n in args.models.split(",") if n]
    for n in names:
        if n != "digits" and n not in make_models.ALL_MODELS:
            ap.error(f"unknown model {n}; known: digits, {', '.join(make_models.ALL_MODELS)}")
    use_kiln = not args.ort_only
    if use_kiln and not os.access(args.kiln, os.X_OK):
        print(f"error: Kiln CLI not found at {args.kiln} (build it, set KILN_BIN or --kiln, or "
              f"pass --ort-only)", file=sys.stderr)
        return 1
    files = {n: model_files(n, args.models_dir) for n in names}

    cache_root = tempfile.mkdtemp(prefix="kiln_bench_cache_")
    try:
        startup = {}
        if use_kiln and not args.no_startup:
            print(f"start-up (wall time of one `kiln run` process, threads={args.threads}):")
            print(f"| {'model':14s} | {'cold cache s':>12s} | {'warm cache s':>12s} | "
                  f"{'speedup':>7s} |")
            print(f"|{'-' * 16}|{'-' * 14}|{'-' * 14}|{'-' * 9}|")
            for n in names:
                cold, warm = startup_times(args.kiln, files[n], args.threads,
                                           os.path.join(cache_root, n))
                startup[n] = (cold, warm)
                print(f"| {n:14s} | {cold:12.3f} | {warm:12.3f} | {cold / warm:6.1f}x |",
                      flush=True)
            print()

        print(f"latency (median of {args.repeat} runs, median over {args.rounds} alternating "
              f"rounds, threads={args.threads}):")
        print(f"| {'model':14s} | {'kiln ms':>9s} | {'ort ms':>9s} | {'ratio':>6s} |")
        print(f"|{'-' * 16}|{'-' * 11}|{'-' * 11}|{'-' * 8}|")
        for n in names:
            ort_model = OrtModel(files[n], args.threads)
            # Reuse the cache the start-up timing warmed so compile time is not measured here.
            env = dict(os.environ)
            if n in startup:
                env["KILN_CACHE_DIR"] = os.path.join(cache_root, n)
            kiln_ms, ort_ms = [], []
            for _ in range(args.rounds):
                if use_kiln:
                    kiln_ms.append(kiln_median_ms(args.kiln, files[n], args.threads,
                                                  args.repeat, env))
                ort_ms.append(ort_model.median_ms(args.repeat))
            o = statistics.median(ort_ms)
            if use_kiln:
                k = statistics.median(kiln_ms)
                print(f"| {n:14s} | {k:9.3f} | {o:9.3f} | {k / o:6.2f} |", flush=True)
            else:
                print(f"| {n:14s} | {'-':>9s} | {o:9.3f} | {'-':>6s} |", flush=True)
    finally:
        shutil.rmtree(cache_root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
