#!/usr/bin/env python3
"""TF1 parallel loop iterations: Kiln's frames executor with 1 and 2 inter-op threads, and ORT.

Model (built here with onnx.helper): a Loop of N iterations whose body is heavy and independent
of the other iterations, `acc = acc + (x * i) @ W1 @ W2 @ W3 @ W4` (SIZE x SIZE matrices): only
the cheap `acc +` chain links iteration i to i+1, so with `kiln run --control-flow frames`
iteration i+1's matrix products start before iteration i ends. Kiln runs at 1 intra-op thread
with 1 and with 2 inter-op threads; ORT runs the same model at 1 intra-op thread (its Loop runs
iterations one after another). Kiln (`--repeat R`, median) and ORT (median of R) alternate
`--rounds` times; each figure is the median over rounds. Prints a Markdown table: the 2-thread
speedup over 1 thread (target >= 1.7x) and Kiln/ORT ratios. A second model, 1000 iterations of a
small body (y * 0.5 + 1 on 16 floats), gives the per-iteration cost against ORT. --smoke: one run
each, compares outputs with ORT, no timing.

    python3 bench/control_flow_frames.py [--iterations 16] [--size 256] [--repeat 10] [--rounds 3]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEDIAN_RE = re.compile(r"median ([0-9.]+) ms")


def loop_model(iterations, size, chain=4):
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array((rng.standard_normal((size, size)) / np.sqrt(size)).astype(np.float32),
                                       f"W{k}") for k in range(chain)]
    nodes = [helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["x", "fi"], ["h0"])]
    for k in range(chain):
        nodes.append(helper.make_node("MatMul", [f"h{k}", f"W{k}"], [f"h{k + 1}"]))
    nodes += [helper.make_node("Add", ["acc_in", f"h{chain}"], ["acc_out"]),
              helper.make_node("Identity", ["cond_in"], ["cond_out"])]
    mat = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [size, size])  # noqa: E731
    body = helper.make_graph(
        nodes, "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []), mat("acc_in")],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), mat("acc_out")], weights)
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "cond", "acc0"], ["acc"], body=body, name="loop")], "frames_bench",
        [mat("x"), mat("acc0")], [mat("acc")],
        [helper.make_tensor("M", TensorProto.INT64, [], [iterations]),
         helper.make_tensor("cond", TensorProto.BOOL, [], [True])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def small_loop_model(iterations, size=16):
    """The per-iteration cost: y = y * 0.5 + 1 on SIZE floats, ITERATIONS times (bench/control_flow.py's)."""
    vec = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [size])  # noqa: E731
    body = helper.make_graph(
        [helper.make_node("Mul", ["y_in", "k"], ["y_mul"]), helper.make_node("Add", ["y_mul", "one"], ["y_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []), vec("y_in")],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), vec("y_out")],
        [helper.make_tensor("k", TensorProto.FLOAT, [], [0.5]), helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "cond", "acc0"], ["acc"], body=body, name="loop")], "frames_small",
        [vec("acc0")], [vec("acc")],
        [helper.make_tensor("M", TensorProto.INT64, [], [iterations]),
         helper.make_tensor("cond", TensorProto.BOOL, [], [True])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def kiln_run(kiln, model, inputs, inter, repeat, out_dir):
    cmd = [kiln, "run", model, "--control-flow", "frames", "--threads", "1", "--inter-op-threads", str(inter),
           "--inputs", inputs, "--repeat", str(repeat), "--output-dir", out_dir]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr.strip()}")
    m = MEDIAN_RE.search(proc.stdout)
    if not m:
        raise RuntimeError(f"no 'median X ms' in:\n{proc.stdout}")
    return float(m.group(1)), np.load(os.path.join(out_dir, "acc.npy")), proc.stdout


def ort_session(model):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def ort_median_ms(sess, feed, repeat):
    import time
    sess.run(None, feed)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        sess.run(None, feed)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kiln", default=os.environ.get("KILN_BIN", os.path.join(REPO, "build", "bin", "kiln")))
    ap.add_argument("--iterations", type=int, default=16)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="one run each, compare outputs, no timing")
    args = ap.parse_args(argv)
    if args.smoke:
        args.iterations, args.size, args.repeat, args.rounds = min(args.iterations, 4), min(args.size, 32), 1, 1
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "loop.onnx")
        onnx.save(loop_model(args.iterations, args.size), model)
        rng = np.random.default_rng(1)
        feed = {"x": rng.standard_normal((args.size, args.size)).astype(np.float32),
                "acc0": np.zeros((args.size, args.size), np.float32)}
        inputs = os.path.join(tmp, "inputs.npz")
        np.savez(inputs, **feed)
        sess = ort_session(model)
        want = sess.run(None, feed)[0]
        times = {1: [], 2: [], "ort": [], "small": [], "small_ort": []}
        small_n = 50 if args.smoke else 1000
        small = os.path.join(tmp, "small.onnx")
        onnx.save(small_loop_model(small_n), small)
        small_feed = {"acc0": np.linspace(-1, 1, 16).astype(np.float32)}
        small_inputs = os.path.join(tmp, "small.npz")
        np.savez(small_inputs, **small_feed)
        small_sess = ort_session(small)
        small_want = small_sess.run(None, small_feed)[0]
        executor_lines = {}
        for _ in range(args.rounds):
            for inter in (1, 2):
                ms, got, out = kiln_run(args.kiln, model, inputs, inter, args.repeat, os.path.join(tmp, f"out{inter}"))
                scale = float(np.abs(want).max()) + 1.0
                err = float(np.abs(got - want).max()) / scale
                if err > 1e-4:
                    sys.exit(f"kiln ({inter} inter-op threads) differs from ORT: max error {err:.2e} of the scale")
                times[inter].append(ms)
                executor_lines[inter] = next(line for line in out.splitlines() if line.startswith("executor frames"))
                if args.smoke:
                    print(executor_lines[inter])
            times["ort"].append(ort_median_ms(sess, feed, args.repeat))
            # The per-iteration cost of a small body (1 inter-op thread), against ORT.
            ms, got, _ = kiln_run(args.kiln, small, small_inputs, 1, args.repeat, os.path.join(tmp, "small_out"))
            if not np.allclose(got, small_want, rtol=1e-5, atol=1e-5):
                sys.exit("kiln differs from ORT on the small-body loop")
            times["small"].append(ms)
            times["small_ort"].append(ort_median_ms(small_sess, small_feed, args.repeat))
    if args.smoke:
        print("smoke: Kiln frames (1 and 2 inter-op threads) match ORT")
        return 0
    k1, k2, o = (statistics.median(times[k]) for k in (1, 2, "ort"))
    print(f"Loop of {args.iterations} independent bodies ({args.size}x{args.size}, 4 MatMuls each), "
          f"intra-op 1, medians of {args.rounds} rounds x {args.repeat} runs\n")
    print("| | ms | vs Kiln 1 inter-op thread | Kiln / ORT |")
    print("|---|---:|---:|---:|")
    print(f"| Kiln frames, 1 inter-op thread | {k1:.2f} | 1.00x | {k1 / o:.2f} |")
    print(f"| Kiln frames, 2 inter-op threads | {k2:.2f} | {k1 / k2:.2f}x faster | {k2 / o:.2f} |")
    print(f"| ONNX Runtime (intra-op 1) | {o:.2f} | | 1.00 |")
    s, so = statistics.median(times["small"]), statistics.median(times["small_ort"])
    print(f"\nLoop of {small_n} small bodies (y * 0.5 + 1 on 16 floats), 1 inter-op thread: Kiln frames "
          f"{s:.2f} ms ({s * 1e3 / small_n:.2f} us per iteration), ORT {so:.2f} ms ({so * 1e3 / small_n:.2f} us), "
          f"Kiln / ORT {s / so:.2f}\n")
    for inter in (1, 2):
        print(executor_lines[inter])
    return 0


if __name__ == "__main__":
    sys.exit(main())
