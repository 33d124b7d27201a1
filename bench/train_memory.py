#!/usr/bin/env python3
"""Activation recomputation on a 50-layer network (issue 14's memory target).

Builds a 50-layer convolutional network (a 3x3 stem conv, 48 3x3 conv+Relu layers, global
average pooling, a Gemm classifier), then for --recompute none and sqrt, interleaved over
--rounds:
  * the training step's planned peak (`kiln inspect --memory --train`: the memory plan's arena
    of intermediates, activations included; parameters and optimizer state are inputs),
  * the process's peak RSS while training (/usr/bin/time -v),
  * the step time (`kiln train`, the median of the per-step samples/s of the metrics CSV).
Prints medians and the sqrt/none ratios. Target: peak <= 0.35x for step time <= 1.35x.

    python3 bench/train_memory.py [--rounds 3] [--batch 16] [--channels 32] [--size 32]
    python3 bench/train_memory.py --smoke      # tiny and untimed: both modes run and agree
"""
import argparse
import csv
import os
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build_deep_net(path, layers, channels, size, classes=10, seed=0):
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def conv(x, cin, cout, name):
        w = (rng.standard_normal((cout, cin, 3, 3)) * np.sqrt(2.0 / (cin * 9))).astype(np.float32)
        inits.append(numpy_helper.from_array(w, name + "_w"))
        inits.append(numpy_helper.from_array(np.zeros(cout, np.float32), name + "_b"))
        nodes.append(helper.make_node("Conv", [x, name + "_w", name + "_b"], [name], pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [name], [name + "_relu"]))
        return name + "_relu"

    h = conv("input", 3, channels, "conv0")
    for i in range(1, layers - 1):
        h = conv(h, channels, channels, f"conv{i}")
    nodes.append(helper.make_node("GlobalAveragePool", [h], ["pooled"]))
    nodes.append(helper.make_node("Flatten", ["pooled"], ["flat"]))
    w = (rng.standard_normal((classes, channels)) * np.sqrt(1.0 / channels)).astype(np.float32)
    inits += [numpy_helper.from_array(w, "fc_w"), numpy_helper.from_array(np.zeros(classes, np.float32), "fc_b")]
    nodes.append(helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1))
    graph = helper.make_graph(
        nodes, "deep50", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, size, size])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", classes])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def planned_peak(kiln, model, batch, recompute):
    out = subprocess.run([kiln, "inspect", model, "--memory", "--train", "--batch-size", str(batch),
                          "--recompute", recompute], check=True, capture_output=True, text=True).stdout
    return int(re.search(r"training step peak \(planned intermediates\): (\d+) bytes", out).group(1))


def train(kiln, model, data, batch, recompute, workdir, threads):
    metrics = os.path.join(workdir, f"metrics_{recompute}.csv")
    export = os.path.join(workdir, f"trained_{recompute}.onnx")
    cmd = ["/usr/bin/time", "-v", kiln, "train", model, "--data", data, "--loss", "cross_entropy",
           "--optimizer", "sgd", "--lr", "0.01", "--batch-size", str(batch), "--epochs", "1", "--no-shuffle",
           "--threads", str(threads), "--recompute", recompute, "--metrics-csv", metrics, "--export", export]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"kiln train --recompute {recompute} failed:\n{r.stderr[-3000:]}")
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr).group(1))
    with open(metrics) as f:
        rows = [row for row in csv.DictReader(f) if row.get("samples_per_s") and not row.get("eval_loss")]
    rates = [float(row["samples_per_s"]) for row in rows[1:]] or [float(rows[0]["samples_per_s"])]
    step_s = batch / statistics.median(rates)
    losses = [float(row["train_loss"]) for row in rows]
    return rss_kb * 1024, step_s, losses, export


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", default=os.environ.get("KILN_BIN", os.path.join(ROOT, "build", "bin", "kiln")))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--layers", type=int, default=50)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--channels", type=int, default=32)
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--models-dir", help="ignored (bench smoke interface)")
    args = ap.parse_args()
    if args.smoke:
        args.rounds, args.layers, args.batch, args.channels, args.size, args.steps = 1, 12, 2, 4, 8, 2
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "deep.onnx")
        build_deep_net(model, args.layers, args.channels, args.size)
        rng = np.random.default_rng(1)
        n = args.batch * args.steps
        data = os.path.join(tmp, "data.npz")
        np.savez(data, input=rng.standard_normal((n, 3, args.size, args.size)).astype(np.float32),
                 labels=rng.integers(0, 10, n).astype(np.int64))
        figures = {m: {"peak": [], "rss": [], "step": []} for m in ("none", "sqrt")}
        losses = {}
        for _ in range(args.rounds):
            for mode in ("none", "sqrt"):
                figures[mode]["peak"].append(planned_peak(args.kiln, model, args.batch, mode))
                rss, step, losses[mode], _ = train(args.kiln, model, data, args.batch, mode, tmp, args.threads)
                figures[mode]["rss"].append(rss)
                figures[mode]["step"].append(step)
        # Recomputation changes no number: the two runs' loss curves are identical.
        if losses["none"] != losses["sqrt"]:
            sys.exit(f"loss curves differ: none {losses['none']} vs sqrt {losses['sqrt']}")
        med = {m: {k: statistics.median(v) for k, v in f.items()} for m, f in figures.items()}
        print(f"{args.layers}-layer conv net, batch {args.batch}, {args.channels} channels, {args.size}x{args.size}, "
              f"{args.threads} threads, {args.rounds} rounds (medians)")
        print(f"{'recompute':10s} {'planned peak MiB':>17s} {'peak RSS MiB':>13s} {'step ms':>9s}")
        for m in ("none", "sqrt"):
            print(f"{m:10s} {med[m]['peak'] / 2**20:17.1f} {med[m]['rss'] / 2**20:13.1f} {med[m]['step'] * 1e3:9.1f}")
        if not args.smoke:
            print(f"sqrt/none: planned peak {med['sqrt']['peak'] / med['none']['peak']:.3f} (target <= 0.35), "
                  f"peak RSS {med['sqrt']['rss'] / med['none']['rss']:.3f}, "
                  f"step time {med['sqrt']['step'] / med['none']['step']:.3f} (target <= 1.35)")
        else:
            print("smoke: both modes trained, identical loss curves")


if __name__ == "__main__":
    main()
