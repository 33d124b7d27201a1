#!/usr/bin/env python3
"""What control flow costs in Kiln's graph interpreter, against ONNX Runtime, in one run.

Models (built here with onnx.helper): a Loop of N iterations whose body is `y = y * 0.5 + 1` on
a vector of S floats, for a many-small-iterations case and a few-large-iterations case, and the
same computation unrolled as a plain graph (no Loop: Kiln compiles and fuses it) for contrast.
Kiln (`kiln run --repeat R`, median) and ORT (same threads, median of R) alternate `--rounds`
times; the figure is the median over rounds. Prints a Markdown table with the Kiln/ORT ratio.

    python3 bench/control_flow.py [--threads 1] [--repeat 10] [--rounds 3]
"""
import argparse
import os
import statistics
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_models  # noqa: E402  (kiln/ORT timing helpers)

CASES = [("loop", 1000, 16), ("loop", 100, 100_000), ("unrolled", 20, 100_000)]


def f32(name, size):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, [size])


def scalar(name, elem, value):
    return helper.make_tensor(name, elem, [], [value])


def consts():
    return [scalar("k", TensorProto.FLOAT, 0.5), scalar("one", TensorProto.FLOAT, 1.0)]


def loop_model(n, size):
    body = helper.make_graph(
        [helper.make_node("Mul", ["y_in", "k"], ["y_mul"]),
         helper.make_node("Add", ["y_mul", "one"], ["y_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []), f32("y_in", size)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), f32("y_out", size)],
        consts())
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "cond", "x"], ["y"], body=body)], "loop",
        [f32("x", size)], [f32("y", size)],
        [scalar("M", TensorProto.INT64, n), scalar("cond", TensorProto.BOOL, True)])
    return graph


def unrolled_model(n, size):
    nodes, prev = [], "x"
    for i in range(n):
        nodes += [helper.make_node("Mul", [prev, "k"], [f"m{i}"]),
                  helper.make_node("Add", [f"m{i}", "one"], [f"a{i}"])]
        prev = f"a{i}"
    nodes.append(helper.make_node("Identity", [prev], ["y"]))
    return helper.make_graph(nodes, "unrolled", [f32("x", size)], [f32("y", size)], consts())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", default=os.path.join(bench_models.REPO, "build", "bin", "kiln"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    env = dict(os.environ)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind, n, size in CASES:
            graph = loop_model(n, size) if kind == "loop" else unrolled_model(n, size)
            model = os.path.join(tmp, f"{kind}_{n}_{size}.onnx")
            onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
            inputs = os.path.join(tmp, f"in_{size}.npz")
            np.savez(inputs, x=np.linspace(-1, 1, size, dtype=np.float32))
            files = (model, inputs, {})
            ort = bench_models.OrtModel(files, args.threads)
            kiln_ms, ort_ms = [], []
            for _ in range(args.rounds):
                kiln_ms.append(bench_models.kiln_median_ms(args.kiln, files, args.threads, args.repeat, env))
                ort_ms.append(ort.median_ms(args.repeat))
            k, o = statistics.median(kiln_ms), statistics.median(ort_ms)
            rows.append((kind, n, size, k, o))
            print(f"{kind} n={n} size={size}: kiln {k:.3f} ms, ort {o:.3f} ms", file=sys.stderr)
    print("| model | iterations / steps | vector size | Kiln ms | ORT ms | Kiln/ORT |")
    print("|---|---:|---:|---:|---:|---:|")
    for kind, n, size, k, o in rows:
        print(f"| {kind} | {n} | {size} | {k:.3f} | {o:.3f} | {k / o:.2f} |")


if __name__ == "__main__":
    main()
