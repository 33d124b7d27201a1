#!/usr/bin/env python3
"""Single-op cliffs: one-node (or small-chain) ONNX models of ops outside the conv/matmul core —
pools, sorts, scans, scatters, broadcasts, pads, resizes, activations — Kiln vs ONNX Runtime.

Issue 24 asks for no cliffs anywhere; a model zoo finds the ops its models use, this sweep finds
the ones they will. Each case is a realistic size from a CNN, a detector or a transformer. Per
case the engines alternate round by round (load from other processes falls on all alike):
* Kiln: `kiln run --repeat R --threads T --timings-json F` (a warm-up run first, kernel cache
  warmed before timing); `--kiln-before PATH` adds another build (before/after) in the same rounds.
* ONNX Runtime: CPU provider, intra_op_num_threads=T, R runs of `sess.run` per round.
Medians over all timed runs; `kiln/ort` above 2 is flagged.

    /work/peers-venv/bin/python bench/cliffs_ops.py [--threads 1] [--rounds 3] [--repeat 20]
        [--only maxpool,topk] [--kiln-before /path/to/kiln]
    python3 bench/cliffs_ops.py --smoke   # each model once, Kiln's outputs vs ORT
"""
from __future__ import annotations

import argparse
import json
import os
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
N = helper.make_node


def ints(name, v):
    return numpy_helper.from_array(np.array(v, np.int64), name)


def floats(name, v):
    return numpy_helper.from_array(np.array(v, np.float32), name)


def cases():
    """name -> (nodes, [(input, shape)], initializers, output dtype)."""
    r = np.random.RandomState(0)
    f, i64 = TensorProto.FLOAT, TensorProto.INT64
    return {
        "softmax_axis1": ([N("Softmax", ["a"], ["y"], axis=1)], [("a", [1, 1000, 56])], [], f),
        "topk": ([N("TopK", ["a", "k"], ["y", "yi"], axis=-1)], [("a", [64, 1000])], [ints("k", [5])], f),
        "cumsum": ([N("CumSum", ["a", "ax"], ["y"])], [("a", [64, 4096])], [ints("ax", 1)], f),
        "scatternd": ([N("ScatterND", ["a", "i", "u"], ["y"])], [("a", [1024, 64])],
                      [ints("i", r.randint(0, 1024, (256, 1))), floats("u", r.rand(256, 64))], f),
        "gather_rows": ([N("Gather", ["w", "i"], ["y"], axis=0)], [],
                        [floats("w", r.rand(30522, 384)), ints("i", r.randint(0, 30522, (1, 128)))], f),
        "maxpool": ([N("MaxPool", ["a"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
                    [("a", [1, 64, 112, 112])], [], f),
        "avgpool": ([N("AveragePool", ["a"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
                    [("a", [1, 64, 56, 56])], [], f),
        "global_avgpool": ([N("GlobalAveragePool", ["a"], ["y"])], [("a", [1, 512, 28, 28])], [], f),
        "instance_norm": ([N("InstanceNormalization", ["a", "g", "b"], ["y"])], [("a", [1, 64, 56, 56])],
                          [floats("g", r.rand(64)), floats("b", r.rand(64))], f),
        "broadcast_add": ([N("Add", ["a", "b"], ["y"])], [("a", [1, 64, 56, 56]), ("b", [1, 64, 1, 1])], [], f),
        "expand": ([N("Expand", ["a", "s"], ["y"])], [("a", [1, 64, 1, 56])], [ints("s", [1, 64, 56, 56])], f),
        "pad": ([N("Pad", ["a", "p"], ["y"])], [("a", [1, 64, 56, 56])], [ints("p", [0, 0, 1, 1, 0, 0, 1, 1])], f),
        "concat_last": ([N("Concat", ["a", "b"], ["y"], axis=3)], [("a", [1, 64, 56, 30]), ("b", [1, 64, 56, 26])],
                        [], f),
        "tile": ([N("Tile", ["a", "t"], ["y"])], [("a", [1, 64, 28, 28])], [ints("t", [1, 1, 2, 2])], f),
        "transpose_201": ([N("Transpose", ["a"], ["y"], perm=[2, 0, 1])], [("a", [64, 128, 96])], [], f),
        "resize_nearest_2x": ([N("Resize", ["a", "", "s"], ["y"], mode="nearest")], [("a", [1, 64, 56, 56])],
                              [floats("s", [1, 1, 2, 2])], f),
        "resize_linear_2x": ([N("Resize", ["a", "", "s"], ["y"], mode="linear")], [("a", [1, 64, 56, 56])],
                             [floats("s", [1, 1, 2, 2])], f),
        "gelu_tanh": ([N("Mul", ["a", "a"], ["a2"]), N("Mul", ["a2", "a"], ["a3"]), N("Mul", ["a3", "c"], ["ca3"]),
                       N("Add", ["a", "ca3"], ["u"]), N("Mul", ["u", "s"], ["us"]), N("Tanh", ["us"], ["t"]),
                       N("Add", ["t", "one"], ["t1"]), N("Mul", ["a", "t1"], ["at"]), N("Mul", ["at", "h"], ["y"])],
                      [("a", [128, 3072])],
                      [floats("c", 0.044715), floats("s", 0.7978845608), floats("one", 1.0), floats("h", 0.5)], f),
        # The norms as opset-14 exporters write them out (Hugging Face's BERT LayerNorm, LLaMA's
        # RMSNorm), and GELU-tanh with torch.pow(x, 3): Pow with a constant exponent.
        "layernorm_written": ([N("ReduceMean", ["a"], ["m"], axes=[-1]), N("Sub", ["a", "m"], ["d"]),
                               N("Pow", ["d", "two"], ["p"]), N("ReduceMean", ["p"], ["v"], axes=[-1]),
                               N("Add", ["v", "eps"], ["ve"]), N("Sqrt", ["ve"], ["sd"]), N("Div", ["d", "sd"], ["n"]),
                               N("Mul", ["n", "g"], ["ng"]), N("Add", ["ng", "b"], ["y"])],
                              [("a", [8, 128, 384])],
                              [floats("two", 2.0), floats("eps", 1e-12), floats("g", r.rand(384)),
                               floats("b", r.rand(384))], f),
        "rmsnorm_written": ([N("Pow", ["a", "two"], ["p"]), N("ReduceMean", ["p"], ["v"], axes=[-1]),
                             N("Add", ["v", "eps"], ["ve"]), N("Sqrt", ["ve"], ["sd"]), N("Div", ["a", "sd"], ["n"]),
                             N("Mul", ["n", "g"], ["y"])],
                            [("a", [8, 128, 384])], [floats("two", 2.0), floats("eps", 1e-6), floats("g", r.rand(384))],
                            f),
        "gelu_tanh_pow": ([N("Pow", ["a", "three"], ["a3"]), N("Mul", ["a3", "c"], ["ca3"]), N("Add", ["a", "ca3"], ["u"]),
                           N("Mul", ["u", "s"], ["us"]), N("Tanh", ["us"], ["t"]), N("Add", ["t", "one"], ["t1"]),
                           N("Mul", ["a", "t1"], ["at"]), N("Mul", ["at", "h"], ["y"])],
                          [("a", [128, 3072])],
                          [floats("three", 3.0), floats("c", 0.044715), floats("s", 0.7978845608), floats("one", 1.0),
                           floats("h", 0.5)], f),
        "mish": ([N("Softplus", ["a"], ["sp"]), N("Tanh", ["sp"], ["t"]), N("Mul", ["a", "t"], ["y"])],
                 [("a", [1, 64, 112, 112])], [], f),
        "einsum_qk": ([N("Einsum", ["a", "b"], ["y"], equation="bhqd,bhkd->bhqk")],
                      [("a", [1, 12, 128, 64]), ("b", [1, 12, 128, 64])], [], f),
        "argmax": ([N("ArgMax", ["a"], ["y"], axis=1)], [("a", [64, 1000])], [], i64),
        # Session 21's sweep: unary math exporters emit, norms as single ops, data movement.
        "pow_half": ([N("Pow", ["a", "e"], ["y"])], [("a", [8, 128, 384])], [floats("e", 0.5)], f),
        "pow_general": ([N("Pow", ["a", "e"], ["y"])], [("a", [8, 128, 384])], [floats("e", 1.7)], f),
        "reciprocal": ([N("Reciprocal", ["a"], ["y"])], [("a", [8, 128, 384])], [], f),
        "erf": ([N("Erf", ["a"], ["y"])], [("a", [128, 3072])], [], f),
        "log": ([N("Log", ["a"], ["y"])], [("a", [128, 3072])], [], f),
        "exp": ([N("Exp", ["a"], ["y"])], [("a", [128, 3072])], [], f),
        "hardswish": ([N("HardSwish", ["a"], ["y"])], [("a", [1, 64, 112, 112])], [], f),
        "leaky_relu": ([N("LeakyRelu", ["a"], ["y"], alpha=0.1)], [("a", [1, 64, 112, 112])], [], f),
        "prelu": ([N("PRelu", ["a", "s"], ["y"])], [("a", [1, 64, 112, 112])], [floats("s", r.rand(64, 1, 1))], f),
        "clip": ([N("Clip", ["a", "lo", "hi"], ["y"])], [("a", [1, 64, 112, 112])],
                 [floats("lo", 0.0), floats("hi", 0.6)], f),
        "where": ([N("Greater", ["a", "b"], ["c"]), N("Where", ["c", "a", "b"], ["y"])],
                  [("a", [8, 128, 384]), ("b", [8, 128, 384])], [], f),
        "layernorm_op": ([N("LayerNormalization", ["a", "g", "b"], ["y"], axis=-1)], [("a", [8, 128, 384])],
                         [floats("g", r.rand(384)), floats("b", r.rand(384))], f),
        "groupnorm": ([N("GroupNormalization", ["a", "g", "b"], ["y"], num_groups=32)], [("a", [1, 256, 64, 64])],
                      [floats("g", r.rand(256)), floats("b", r.rand(256))], f),
        "reduce_sum_axis1": ([N("ReduceSum", ["a", "ax"], ["y"], keepdims=1)], [("a", [1, 256, 56, 56])],
                             [ints("ax", [1])], f),
        "reduce_l2": ([N("ReduceL2", ["a", "ax"], ["y"], keepdims=1)], [("a", [64, 4096])], [ints("ax", [1])], f),
        "reduce_logsumexp": ([N("ReduceLogSumExp", ["a", "ax"], ["y"], keepdims=1)], [("a", [64, 4096])],
                             [ints("ax", [1])], f),
        "reduce_max_axis0": ([N("ReduceMax", ["a", "ax"], ["y"], keepdims=0)], [("a", [4096, 256])],
                             [ints("ax", [0])], f),
        "depth_to_space": ([N("DepthToSpace", ["a"], ["y"], blocksize=2, mode="DCR")], [("a", [1, 256, 56, 56])], [], f),
        "space_to_depth": ([N("SpaceToDepth", ["a"], ["y"], blocksize=2)], [("a", [1, 64, 112, 112])], [], f),
        "slice_strided": ([N("Slice", ["a", "st", "en", "ax", "sp"], ["y"])], [("a", [1, 64, 112, 112])],
                          [ints("st", [0, 0]), ints("en", [112, 112]), ints("ax", [2, 3]), ints("sp", [2, 2])], f),
        "gather_axis1": ([N("Gather", ["a", "i"], ["y"], axis=1)], [("a", [64, 1024, 16])],
                         [ints("i", r.randint(0, 1024, (512,)))], f),
        "gather_elements": ([N("GatherElements", ["a", "i"], ["y"], axis=1)], [("a", [64, 4096])],
                            [ints("i", r.randint(0, 4096, (64, 1024)))], f),
        "resize_cubic_2x": ([N("Resize", ["a", "", "s"], ["y"], mode="cubic")], [("a", [1, 32, 56, 56])],
                            [floats("s", [1, 1, 2, 2])], f),
        "resize_linear_down": ([N("Resize", ["a", "", "", "sz"], ["y"], mode="linear")], [("a", [1, 3, 240, 320])],
                               [ints("sz", [1, 3, 112, 112])], f),
        "grid_sample": ([N("GridSample", ["a", "gr"], ["y"])], [("a", [1, 32, 64, 64])],
                        [floats("gr", r.rand(1, 64, 64, 2) * 2 - 1)], f),
        "lp_norm": ([N("LpNormalization", ["a"], ["y"], axis=-1, p=2)], [("a", [64, 4096])], [], f),
        "trilu": ([N("Trilu", ["a"], ["y"], upper=0)], [("a", [12, 128, 128])], [], f),
        "matmul_bcast": ([N("MatMul", ["a", "b"], ["y"])], [("a", [8, 12, 128, 64])], [floats("b", r.rand(64, 64))], f),
        "gemv": ([N("MatMul", ["a", "b"], ["y"])], [("a", [1, 2048])], [floats("b", r.rand(2048, 1000))], f),
        "conv1d_dilated": ([N("Conv", ["a", "w"], ["y"], dilations=[4], pads=[4, 4])], [("a", [1, 128, 4000])],
                           [floats("w", r.rand(128, 128, 3) * 0.1)], f),
        "convtranspose_1d": ([N("ConvTranspose", ["a", "w"], ["y"], strides=[4], kernel_shape=[8], pads=[2, 2])],
                             [("a", [1, 256, 500])], [floats("w", r.rand(256, 128, 8) * 0.1)], f),
        "conv_5x5_s1": ([N("Conv", ["a", "w"], ["y"], pads=[2, 2, 2, 2])], [("a", [1, 32, 112, 112])],
                        [floats("w", r.rand(32, 32, 5, 5) * 0.1)], f),
        "nonzero": ([N("NonZero", ["a"], ["y"])], [("a", [256, 1024])], [], i64),
        "onehot": ([N("Cast", ["a"], ["ai"], to=i64), N("OneHot", ["ai", "d", "v"], ["y"], axis=-1)], [("a", [8192])],
                   [ints("d", [1000]), floats("v", [0.0, 1.0])], f),
    }


NEWER_OPSET = {"GroupNormalization": 21, "ReduceL2": 18, "ReduceLogSumExp": 18, "ReduceMax": 18}


def write_case(work, name, spec):
    nodes, ins, inits, out_type = spec
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in ins],
                          [helper.make_tensor_value_info(nodes[-1].output[0], out_type, None)], initializer=inits)
    path = os.path.join(work, name + ".onnx")
    # Opset 17 unless an op's form here needs a later one (axes as an input, GroupNorm's C scales).
    opset = max([17] + [NEWER_OPSET.get(n.op_type, 17) for n in nodes])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), path)
    rng = np.random.RandomState(1)
    feed = {n: (rng.rand(*s).astype(np.float32) - 0.3) for n, s in ins}
    npz = os.path.join(work, name + "_in.npz")
    np.savez(npz, **feed)
    return path, npz, feed


def kiln_times(kiln, path, npz, threads, repeat, work):
    out = os.path.join(work, "timings.json")
    cmd = [kiln, "run", path, "--inputs", npz, "--threads", str(threads), "--repeat", str(repeat),
           "--timings-json", out]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    with open(out) as f:
        return json.load(f)["runs_ms"]


def ort_session(path, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def ort_times(sess, feed, repeat):
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        sess.run(None, feed)
        ts.append((time.perf_counter() - t0) * 1e3)
    return ts


def smoke(kiln, work, names):
    for name in names:
        path, npz, feed = write_case(work, name, cases()[name])
        outdir = os.path.join(work, name + "_out")
        os.makedirs(outdir, exist_ok=True)
        subprocess.run([kiln, "run", path, "--inputs", npz, "--repeat", "1", "--output-dir", outdir],
                       check=True, capture_output=True, text=True)
        want = ort_session(path, 1).run(None, feed)[0]
        got = np.load(os.path.join(outdir, cases()[name][0][-1].output[0] + ".npy"))
        if np.allclose(got, want, rtol=2e-5, atol=2e-5, equal_nan=True):
            print(f"{name}: Kiln matches ONNX Runtime")
            continue
        # ORT is not always the exact one (its linear Resize from sizes rounds the scale to
        # float): the ONNX reference evaluator decides.
        from onnx.reference import ReferenceEvaluator
        ref = ReferenceEvaluator(path).run(None, feed)[0]
        np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-5, err_msg=name)
        print(f"{name}: Kiln matches the ONNX reference (ORT differs by {np.abs(want - ref).max():.2g})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kiln", default=os.environ.get("KILN_BIN", os.path.join(HERE, "..", "build", "bin", "kiln")))
    ap.add_argument("--kiln-before", default="", help="another Kiln build, timed in the same rounds")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--smoke", action="store_true", help="each case once, outputs vs ORT, no timing")
    ap.add_argument("--work-dir", default="")
    args = ap.parse_args()
    names = [n for n in cases() if not args.only or n in args.only.split(",")]
    work = args.work_dir or tempfile.mkdtemp(prefix="kiln_cliffs_ops_")
    os.makedirs(work, exist_ok=True)
    try:
        if args.smoke:
            return smoke(args.kiln, work, names)
        engines = [("kiln", args.kiln)] + ([("before", args.kiln_before)] if args.kiln_before else [])
        print(f"threads {args.threads}, {args.rounds} rounds x {args.repeat} runs, medians (ms)\n")
        head = "| op | " + " | ".join(e for e, _ in engines) + " | ORT | kiln / ORT |"
        head += " before / ORT |" if args.kiln_before else ""
        print(head)
        print("|---" * (len(engines) + 2 + (1 if args.kiln_before else 0)) + "|---|")
        for name in names:
            path, npz, feed = write_case(work, name, cases()[name])
            sess = ort_session(path, args.threads)
            for _, exe in engines:  # warm the kernel cache
                kiln_times(exe, path, npz, args.threads, 1, work)
            ort_times(sess, feed, 3)
            times = {e: [] for e, _ in engines}
            times["ort"] = []
            for _ in range(args.rounds):
                for e, exe in engines:
                    times[e] += kiln_times(exe, path, npz, args.threads, args.repeat, work)
                times["ort"] += ort_times(sess, feed, args.repeat)
            med = {e: statistics.median(t) for e, t in times.items()}
            ratio = med["kiln"] / med["ort"]
            row = f"| {name} | " + " | ".join(f"{med[e]:.3f}" for e, _ in engines) + f" | {med['ort']:.3f} | "
            row += f"{ratio:.2f}{' **cliff**' if ratio > 2 else ''} |"
            if args.kiln_before:
                row += f" {med['before'] / med['ort']:.2f} |"
            print(row, flush=True)
    finally:
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
