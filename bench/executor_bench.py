#!/usr/bin/env python3
"""Executor figures: sequential vs dataflow latency, per-node overhead vs ONNX Runtime, and the
thread pools' wake-up latency, all measured in one run with the variants interleaved.

1. Models with parallel branches (default inception, two_tower, resnet50, resnet18): `kiln run`
   with `--executor sequential --threads 2` and `--executor dataflow --inter-op-threads 2` (with
   --threads 2 and --threads 1), alternated --rounds times; each cell is the median over rounds
   of `kiln run`'s own median over --repeat runs.
2. Overhead per node: a graph of 1,000 tiny nodes built here with onnx.helper (Add and Relu on
   f32[1,16]: one chain, and 8 independent chains of 125) run by Kiln's two executors (1
   intra-op thread; dataflow with 2 inter-op threads) and ONNX Runtime in sequential and
   parallel execution mode (intra 1, inter 2); µs per node = median run time / 1000.
3. --wakeup: builds bench/executor_wakeup.cc against the runtime library of --build and prints
   the pools' wake-up latency.

    python3 bench/executor_bench.py [--build build] [--models inception,two_tower,resnet50]
        [--repeat 10] [--rounds 3] [--skip-models] [--skip-overhead] [--wakeup]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "scripts"))

import make_models  # noqa: E402

MEDIAN_RE = re.compile(r"median\s+([0-9.]+)\s*ms")


def kiln_ms(kiln, model, inputs, extra, repeat):
    with tempfile.TemporaryDirectory() as out:
        cmd = [kiln, "run", model, "--repeat", str(repeat), "--output-dir", out] + extra
        if inputs:
            cmd += ["--inputs", inputs]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()[-400:]}")
    return float(MEDIAN_RE.search(proc.stdout).group(1))


def model_files(name, models_dir):
    model = os.path.join(models_dir, name + ".onnx")
    inputs = os.path.join(models_dir, name + "_inputs.npz")
    if not (os.path.exists(model) and os.path.exists(inputs)):
        os.makedirs(models_dir, exist_ok=True)
        make_models.write_test_model(name, models_dir, check=False)
    return model, inputs


def bench_models(kiln, names, models_dir, repeat, rounds):
    variants = [("sequential, 2 intra", ["--executor", "sequential", "--threads", "2"]),
                ("dataflow, 2 inter x 2 intra", ["--executor", "dataflow", "--threads", "2",
                                                 "--inter-op-threads", "2"]),
                ("dataflow, 2 inter x 1 intra", ["--executor", "dataflow", "--threads", "1",
                                                 "--inter-op-threads", "2"])]
    print("| model | " + " | ".join(v[0] + " ms" for v in variants) + " | best dataflow / sequential |")
    print("|---|" + "---|" * (len(variants) + 1))
    for name in names:
        try:
            model, inputs = model_files(name, models_dir)
            kiln_ms(kiln, model, inputs, variants[0][1], 1)  # compile / warm the kernel cache
            samples = {v[0]: [] for v in variants}
            for _ in range(rounds):
                for label, extra in variants:
                    samples[label].append(kiln_ms(kiln, model, inputs, extra, repeat))
        except Exception as e:  # a model Kiln cannot run yet: say so, keep going
            print(f"| {name} | error: {str(e).splitlines()[-1][:150]} |")
            continue
        med = [statistics.median(samples[v[0]]) for v in variants]
        print(f"| {name} | " + " | ".join(f"{m:.2f}" for m in med) +
              f" | {min(med[1:]) / med[0]:.2f} |", flush=True)


def tiny_graph(path, chains, length):
    """`chains` independent chains of `length` alternating Add(x, c)/Relu nodes on f32[1,16]."""
    import onnx
    from onnx import TensorProto, helper
    nodes, outputs = [], []
    c = helper.make_tensor("c", TensorProto.FLOAT, [1, 16], list(np.linspace(-0.5, 0.5, 16)))
    for k in range(chains):
        prev = "x"
        for i in range(length):
            out = f"c{k}_{i}"
            if i % 2 == 0:
                nodes.append(helper.make_node("Add", [prev, "c"], [out], name=f"add{k}_{i}"))
            else:
                nodes.append(helper.make_node("Relu", [prev], [out], name=f"relu{k}_{i}"))
            prev = out
        outputs.append(helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, 16]))
    g = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                          outputs, initializer=[c])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)


def ort_ms(path, parallel, repeat):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 2
    so.execution_mode = ort.ExecutionMode.ORT_PARALLEL if parallel else ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # keep 1,000 nodes
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feed = {"x": np.random.default_rng(0).standard_normal((1, 16)).astype(np.float32)}
    for _ in range(3):
        s.run(None, feed)
    t = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        s.run(None, feed)
        t.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(t)


def bench_overhead(kiln, repeat, rounds):
    print("\n| graph (1,000 nodes) | kiln sequential µs/node | kiln dataflow µs/node | "
          "ORT sequential µs/node | ORT parallel µs/node |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as d:
        for label, chains in [("1 chain of 1,000", 1), ("8 chains of 125", 8)]:
            path = os.path.join(d, f"tiny{chains}.onnx")
            tiny_graph(path, chains, 1000 // chains)
            kseq = ["--executor", "sequential", "--threads", "1"]
            kdf = ["--executor", "dataflow", "--threads", "1", "--inter-op-threads", "2"]
            kiln_ms(kiln, path, None, kseq, 1)  # compile
            s = {"ks": [], "kd": [], "os": [], "op": []}
            for _ in range(rounds):
                s["ks"].append(kiln_ms(kiln, path, None, kseq, repeat))
                s["kd"].append(kiln_ms(kiln, path, None, kdf, repeat))
                s["os"].append(ort_ms(path, False, repeat))
                s["op"].append(ort_ms(path, True, repeat))
            us = {k: statistics.median(v) * 1e3 / 1000 for k, v in s.items()}
            print(f"| {label} | {us['ks']:.2f} | {us['kd']:.2f} | {us['os']:.2f} | {us['op']:.2f} |",
                  flush=True)


def bench_wakeup(build):
    exe = os.path.join(tempfile.gettempdir(), "kiln_executor_wakeup")
    subprocess.run(["c++", "-O2", "-std=c++20", "-I", os.path.join(REPO, "src"),
                    os.path.join(REPO, "bench", "executor_wakeup.cc"),
                    os.path.join(build, "libkiln_runtime.a"), os.path.join(build, "libkiln_support.a"),
                    "-lpthread", "-ldl", "-o", exe], check=True)
    print()
    print(subprocess.run([exe], capture_output=True, text=True, check=True).stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--models", default="inception,two_tower,resnet50,resnet18")
    ap.add_argument("--models-dir", default=os.path.join(REPO, "build", "models"))
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--skip-models", action="store_true")
    ap.add_argument("--skip-overhead", action="store_true")
    ap.add_argument("--wakeup", action="store_true")
    a = ap.parse_args()
    kiln = os.path.join(a.build, "bin", "kiln")
    print(f"cores: {os.cpu_count()}")
    if not a.skip_models:
        bench_models(kiln, [n for n in a.models.split(",") if n], a.models_dir, a.repeat, a.rounds)
    if not a.skip_overhead:
        bench_overhead(kiln, max(a.repeat, 50), a.rounds)
    if a.wakeup:
        bench_wakeup(a.build)


if __name__ == "__main__":
    main()
