#!/usr/bin/env python3
"""Convolution cliffs: single-op models of the conv variants that used to fall off Kiln's fast
path, at realistic sizes, Kiln vs ONNX Runtime in one run.

Workloads (batch 1, float32, constant weights and bias):
* deconv 2x up: ConvTranspose 64->32 channels, 4x4 kernel, stride 2, pads 1, 64x64 -> 128x128,
  then ReLU (a decoder's upsampling step);
* aspp rate 12 / rate 24: DeepLabV3's ASPP 3x3 convs, 256->256 on 33x33, dilation 12 / 24,
  pads = dilation (rate 36 on 33x33 reads only its centre tap; rate 24 all of them);
* tcn 1-D stack: four Conv1d 128->128, kernel 3, dilations 1, 2, 4, 8 (pads = dilation), each
  with ReLU, on a sequence of 4000 (a dilated temporal conv net);
* conv3d: 16->32 channels, 3x3x3, pads 1, on 1x16x8x56x56 (a video block);
* depthwise x2: a depthwise 3x3 with channel multiplier 2 (group 32, 32->64), pads 1, 112x112;
* asymmetric pads: 3x3 stride 2, 64->128, pads (0, 0, 1, 1) (TensorFlow's SAME), 56x56;
* grouped 3x3 (ResNeXt-50 32x4d's): group 32, pads 1, no bias: 128 channels at 56x56, 256 at
  28x28, 256 at 56x56 stride 2 (-> 28x28), 512 at 14x14 (grouped convs stay NCHW: conv.cc);
* 8-channel output blocks (EfficientNet-B0's projections): 1x1 144->24 and 96->24 at 56x56 (the
  layout pass blocks them as KilnConv2dNCHWc [.., 16] -> [.., 8]).

Kiln runs as `kiln run --repeat R --timings-json` (bench/peers.py's Kiln engine: one process per
round; `--kernels` as given, auto by default; round 0 is one run each, later rounds as many as
fit in --budget seconds, at most --repeat); ONNX Runtime (all graph optimizations, sequential,
the same thread count) in this process; `--kiln-before` adds another Kiln build (main's: the
before figures) to the same rounds. Engines rotate who goes first per round; figures are
medians over every timed run. GFLOP/s counts 2 x MACs of the model as written (bench/flops.py:
the taps a dilated window reads in padding count too, as ORT computes them). `--smoke` runs
each workload once through both and compares outputs (no timing).

    python3 bench/cliffs_conv.py [--threads 2] [--rounds 5] [--repeat 10] [--budget 5] [--kernels auto]
        [--kiln build/bin/kiln] [--kiln-before OTHER/kiln] [--only NAME,...] [--stat median|min] [--smoke]

`--kernels generated,dnnl` times one Kiln engine per kernel source in the same rounds (the
first is "kiln", the others "kiln-<source>"; each is reported against ORT and the first).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import flops  # noqa: E402
from peers import Kiln, OnnxRuntime, compare  # noqa: E402


def _model(nodes, x_shape, inits, path):
    out = nodes[-1].output[0]
    g = helper.make_graph(nodes, "cliff", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def _weights(rng, *shape):
    fan_in = int(np.prod(shape[1:]))
    return rng.standard_normal(shape) / np.sqrt(fan_in)


def deconv_up(rng, path):
    inits = {"w": _weights(rng, 64, 32, 4, 4), "b": rng.standard_normal(32) * 0.1}
    nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"], ["y0"], kernel_shape=[4, 4], strides=[2, 2],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["y0"], ["y"])]
    _model(nodes, [1, 64, 64, 64], inits, path)
    return [1, 64, 64, 64]


def aspp(rate):
    def make(rng, path):
        inits = {"w": _weights(rng, 256, 256, 3, 3), "b": rng.standard_normal(256) * 0.1}
        nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y0"], kernel_shape=[3, 3], dilations=[rate] * 2,
                                  pads=[rate] * 4),
                 helper.make_node("Relu", ["y0"], ["y"])]
        _model(nodes, [1, 256, 33, 33], inits, path)
        return [1, 256, 33, 33]
    return make


def tcn(rng, path):
    inits, nodes, cur = {}, [], "x"
    for i, d in enumerate((1, 2, 4, 8)):
        inits[f"w{i}"], inits[f"b{i}"] = _weights(rng, 128, 128, 3), rng.standard_normal(128) * 0.1
        nodes += [helper.make_node("Conv", [cur, f"w{i}", f"b{i}"], [f"c{i}"], kernel_shape=[3], dilations=[d],
                                   pads=[d, d]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        cur = f"r{i}"
    _model(nodes, [1, 128, 4000], inits, path)
    return [1, 128, 4000]


def conv3d(rng, path):
    inits = {"w": _weights(rng, 32, 16, 3, 3, 3), "b": rng.standard_normal(32) * 0.1}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3, 3], pads=[1] * 6)]
    _model(nodes, [1, 16, 8, 56, 56], inits, path)
    return [1, 16, 8, 56, 56]


def depthwise_x2(rng, path):
    inits = {"w": _weights(rng, 64, 1, 3, 3), "b": rng.standard_normal(64) * 0.1}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y0"], kernel_shape=[3, 3], group=32, pads=[1] * 4),
             helper.make_node("Relu", ["y0"], ["y"])]
    _model(nodes, [1, 32, 112, 112], inits, path)
    return [1, 32, 112, 112]


def asym_pads(rng, path):
    inits = {"w": _weights(rng, 128, 64, 3, 3), "b": rng.standard_normal(128) * 0.1}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y0"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[0, 0, 1, 1]),
             helper.make_node("Relu", ["y0"], ["y"])]
    _model(nodes, [1, 64, 56, 56], inits, path)
    return [1, 64, 56, 56]


def grouped(cin, hw, stride=1):
    def make(rng, path):
        inits = {"w": _weights(rng, cin, cin // 32, 3, 3)}
        nodes = [helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], group=32, pads=[1] * 4,
                                  strides=[stride] * 2)]
        _model(nodes, [1, cin, hw, hw], inits, path)
        return [1, cin, hw, hw]
    return make


def project(cin, cout, hw):
    def make(rng, path):
        inits = {"w": _weights(rng, cout, cin, 1, 1), "b": rng.standard_normal(cout) * 0.1}
        nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[1, 1])]
        _model(nodes, [1, cin, hw, hw], inits, path)
        return [1, cin, hw, hw]
    return make


WORKLOADS = {
    "deconv_2x_up_64to32_64x64": deconv_up,
    "aspp_rate12_256_33x33": aspp(12),
    "aspp_rate24_256_33x33": aspp(24),
    "tcn_1d_d1248_128x4000": tcn,
    "conv3d_16to32_8x56x56": conv3d,
    "depthwise_x2_32to64_112x112": depthwise_x2,
    "asym_pads_s2_64to128_56x56": asym_pads,
    "grouped_g32_128_56x56": grouped(128, 56),
    "grouped_g32_256_28x28": grouped(256, 28),
    "grouped_g32_s2_256_56x56": grouped(256, 56, 2),
    "grouped_g32_512_14x14": grouped(512, 14),
    "block8_1x1_144to24_56x56": project(144, 24, 56),
    "block8_1x1_96to24_56x56": project(96, 24, 56),
}


def measure(args, name, tmp):
    path, inputs = os.path.join(tmp, f"{name}.onnx"), os.path.join(tmp, f"{name}.npz")
    x_shape = WORKLOADS[name](np.random.default_rng(0), path)
    feed = {"x": np.random.default_rng(1).standard_normal(x_shape).astype(np.float32)}
    np.savez(inputs, **feed)
    sources = args.kernels.split(",")
    kilns = [Kiln(args.kiln, path, inputs, args.threads, k, args.cache_dir) for k in sources]
    for k, e in zip(sources[1:], kilns[1:]):
        e.name = f"kiln-{k}"
    ort = OnnxRuntime(path, feed, args.threads)
    checks = []
    for e in kilns:
        e.timed_runs(1, ort.names)  # compiles (kernel cache) and keeps the outputs
        c = compare(e.outputs, ort.outputs)
        if c:
            checks.append(f"{e.name}: {c}")
    row = {"name": name, "gflop": flops.model_flops(path) / 1e9, "check": "; ".join(checks)}
    if args.smoke:
        return row
    engines = kilns + [ort]
    if args.kiln_before:  # another build of Kiln (main's) in the same rounds
        before = Kiln(args.kiln_before, path, inputs, args.threads, sources[0], args.cache_dir)
        before.name = "before"
        engines.append(before)
    times = {e.name: [] for e in engines}
    for r in range(args.rounds):
        k = r % len(engines)
        for e in engines[k:] + engines[:k]:  # rotate who goes first
            # At most --budget seconds per engine and round (at least one run): a cliff of
            # seconds per run (main's dilated convs) does not take an hour.
            n = 1 if r == 0 else max(1, min(args.repeat, int(args.budget * 1e3 / statistics.median(times[e.name]))))
            times[e.name] += e.timed_runs(n)
    stat = min if args.stat == "min" else statistics.median
    row.update({e: stat(ms) for e, ms in times.items()})
    return row


def report(rows, args):
    if args.smoke:
        for r in rows:
            print(f"{r['name']:30s} {r['gflop']:7.3f} GFLOP  {'ok' if not r['check'] else 'DIFFERS: ' + r['check']}")
        return
    print(f"threads {args.threads}, kernels {args.kernels}, {args.rounds} rounds x {args.repeat} runs, medians")
    b = args.kiln_before
    others = [f"kiln-{k}" for k in args.kernels.split(",")[1:]]
    if others:  # several kernel sources: one table of ms and ratios
        if b:  # the other build runs the first kernel source
            others.append("before")
        print(f"threads {args.threads}, kiln = --kernels {args.kernels.split(',')[0]}, {args.rounds} rounds, "
              f"{args.stat} of the runs")
        print("| workload | GFLOP | kiln ms | " + " | ".join(f"{o} ms" for o in others) + " | ORT ms | kiln / ORT | "
              + " | ".join(f"kiln / {o}" for o in others) + " | kiln GFLOP/s | outputs |")
        print("|---|---|---|" + "---|" * (2 * len(others)) + "---|---|---|---|")
        for r in rows:
            k, o = r["kiln"], r["ort"]
            print(f"| {r['name']} | {r['gflop']:.3f} | {k:.3f} | " + " | ".join(f"{r[e]:.3f}" for e in others)
                  + f" | {o:.3f} | {k / o:.2f} | " + " | ".join(f"{k / r[e]:.2f}" for e in others)
                  + f" | {r['gflop'] / k * 1e3:.1f} | {'match' if not r['check'] else r['check']} |")
        return
    print("| workload | GFLOP | Kiln ms | ORT ms | Kiln / ORT | Kiln GFLOP/s | ORT GFLOP/s |"
          + (" before ms | before / ORT | before GFLOP/s |" if b else "") + " outputs |")
    print("|---|---|---|---|---|---|---|" + ("---|---|---|" if b else "") + "---|")
    for r in rows:
        k, o = r["kiln"], r["ort"]
        extra = f" {r['before']:.3f} | {r['before'] / o:.2f} | {r['gflop'] / r['before'] * 1e3:.2f} |" if b else ""
        print(f"| {r['name']} | {r['gflop']:.3f} | {k:.3f} | {o:.3f} | {k / o:.2f} | {r['gflop'] / k * 1e3:.1f} | "
              f"{r['gflop'] / o * 1e3:.1f} |{extra} {'match' if not r['check'] else r['check']} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kiln", default=os.path.join(REPO, "build", "bin", "kiln"))
    ap.add_argument("--kiln-before", default="", help="another Kiln binary (e.g. main's) timed in the same rounds")
    ap.add_argument("--kernels", default="auto",
                    help="Kiln's --kernels (auto, generated, dnnl); a comma list times each")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--budget", type=float, default=5.0, help="seconds per engine and round (caps --repeat)")
    ap.add_argument("--stat", default="median", choices=["median", "min"],
                    help="per engine: the median of the timed runs, or the fastest (on a machine where other "
                         "processes preempt runs of milliseconds, so that the medians measure the scheduler)")
    ap.add_argument("--only", default="", help="comma-separated workload names")
    ap.add_argument("--cache-dir", default=os.path.expanduser("~/.cache/kiln"))
    ap.add_argument("--smoke", action="store_true", help="each workload once, outputs compared, no timing")
    args = ap.parse_args(argv)
    names = [n for n in WORKLOADS if not args.only or n in args.only.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(args, n, tmp) for n in names]
    report(rows, args)
    bad = [r["name"] for r in rows if r["check"]]
    if bad:
        print(f"outputs differ from ONNX Runtime: {', '.join(bad)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
