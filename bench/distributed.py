#!/usr/bin/env python3
"""Data-parallel training throughput and allreduce cost (docs/distributed.md).

1. `kiln train` of two small models on synthetic data — a CNN (3x32x32 images, two 3x3 convs,
   26k parameters: compute-heavy) and an MLP (256-512-512-10, 400k parameters: communication-
   heavy) — 1 rank x 1 thread, batch B, against `mpiexec -n 2 kiln train --data-parallel`,
   2 ranks x 1 thread, batch B each (2B per step), and against the same 2 ranks with the
   gradient allreduce removed (KILN_DIST_BENCH_NO_ALLREDUCE=1: the cost of communication).
   Rounds alternate the three; the figure is the steady-state samples/s (the second epoch's,
   from the metrics CSV: the first holds the compiles). Medians over rounds, and ratios.
2. bin/kiln-bench-allreduce under mpiexec -n 2: Kiln's allreduce (agreement check, fusion,
   polled non-blocking MPI) against a bare MPI_Allreduce, per message size, interleaved.

--smoke: one short round; checks the data-parallel weights equal one process's at batch 2B
(1e-5 relative) and the allreduce results; no timing assertions. The machine this was written
on has 2 cores shared with other work: figures are indicative only.
"""
import argparse
import csv
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = pathlib.Path(__file__).resolve().parents[1]


def mpi_env():
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none", OMPI_MCA_rmaps_base_oversubscribe="1")
    return env


def save_model(path, nodes, inputs, inits):
    graph = helper.make_graph(nodes, "net", inputs,
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
                              [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def make_mlp(path, features=256, hidden=512, classes=10):
    rng = np.random.default_rng(0)
    dims = [features, hidden, hidden, classes]
    inits, nodes, x = {}, [], "x"
    for i in range(3):
        inits[f"W{i}"] = rng.standard_normal((dims[i + 1], dims[i])) / np.sqrt(dims[i])
        inits[f"b{i}"] = np.zeros(dims[i + 1])
        out = "logits" if i == 2 else f"h{i}"
        nodes.append(helper.make_node("Gemm", [x, f"W{i}", f"b{i}"], [out if i == 2 else f"g{i}"], transB=1))
        if i < 2:
            nodes.append(helper.make_node("Relu", [f"g{i}"], [out]))
        x = out
    save_model(path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", features])], inits)
    return (features,)


def make_cnn(path):
    rng = np.random.default_rng(0)
    inits = {"c1": rng.standard_normal((16, 3, 3, 3)) / np.sqrt(27), "c1b": np.zeros(16),
             "c2": rng.standard_normal((32, 16, 3, 3)) / np.sqrt(144), "c2b": np.zeros(32),
             "fc": rng.standard_normal((10, 32 * 8 * 8)) / np.sqrt(2048), "fcb": np.zeros(10)}
    nodes = [helper.make_node("Conv", ["x", "c1", "c1b"], ["a1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a1"], ["r1"]),
             helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p1", "c2", "c2b"], ["a2"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a2"], ["r2"]),
             helper.make_node("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p2"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fcb"], ["logits"], transB=1)]
    save_model(path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 32, 32])], inits)
    return (3, 32, 32)


MODELS = {"cnn": make_cnn, "mlp": make_mlp}


def make_data(path, n, record_shape, classes=10):
    rng = np.random.default_rng(1)
    labels = rng.integers(0, classes, n)
    centers = rng.standard_normal((classes, *record_shape))
    x = (centers[labels] + rng.standard_normal((n, *record_shape))).astype(np.float32)
    np.savez(path, x=x, labels=labels.astype(np.int64))


def train(kiln, work, model, name, batch, epochs, ranks, no_allreduce=False):
    csv_path, out = work / f"{name}.csv", work / f"{name}.onnx"
    cmd = [kiln, "train", str(work / f"{model}.onnx"), "--data", str(work / f"{model}.npz"), "--batch-size", str(batch),
           "--threads", "1", "--epochs", str(epochs), "--no-shuffle", "--optimizer", "sgd", "--lr", "0.05",
           "--metrics-csv", str(csv_path), "--export", str(out)]
    if ranks > 1:
        cmd = [shutil.which("mpiexec") or "mpiexec", "-n", str(ranks), *cmd, "--data-parallel"]
    env = mpi_env()
    if no_allreduce:
        env["KILN_DIST_BENCH_NO_ALLREDUCE"] = "1"
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr}")
    rows = [row for row in csv.DictReader(open(csv_path)) if row["train_loss"]]
    last_epoch = [row for row in rows if row["epoch"] == str(epochs)]
    weights = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(out)).graph.initializer}
    return float(last_epoch[-1]["samples_per_s"]), weights


def allreduce_bench(binary, smoke):
    cmd = [shutil.which("mpiexec") or "mpiexec", "-n", "2", binary] + (["--smoke"] if smoke else [])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=mpi_env())
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr}")
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", default=os.environ.get("KILN_BIN", str(REPO / "build" / "bin" / "kiln")))
    ap.add_argument("--allreduce-bin", default=None, help="default: kiln-bench-allreduce beside --kiln")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32, help="per-rank batch")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    allreduce_bin = args.allreduce_bin or str(pathlib.Path(args.kiln).parent / "kiln-bench-allreduce")
    rounds, epochs = (1, 1) if args.smoke else (args.rounds, 2)
    print(f"| model | 1 rank x 1 thread, batch {args.batch} | 2 ranks x 1 thread, batch {args.batch} each | "
          "2 ranks, allreduce removed | 2 ranks / 1 rank | step time with / without allreduce |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        for model, make in MODELS.items():
            shape = make(work / f"{model}.onnx")
            records = 128 if args.smoke else (1024 if model == "cnn" else 4096)
            make_data(work / f"{model}.npz", n=records, record_shape=shape)
            one, two, bare = [], [], []
            for _ in range(rounds):
                one.append(train(args.kiln, work, model, "one", args.batch, epochs, 1)[0])
                s2, w2 = train(args.kiln, work, model, "two", args.batch, epochs, 2)
                two.append(s2)
                bare.append(train(args.kiln, work, model, "bare", args.batch, epochs, 2, no_allreduce=True)[0])
            if args.smoke:  # 2 ranks x B vs 1 process x 2B: the same weights, up to summation order
                # (a conv bias's gradient sums 32k terms that largely cancel: 2.5e-6 seen after 4 steps)
                _, wref = train(args.kiln, work, model, "ref", 2 * args.batch, epochs, 1)
                for k in wref:
                    np.testing.assert_allclose(w2[k], wref[k], rtol=1e-5, atol=1e-5 * float(np.abs(wref[k]).max()),
                                               err_msg=f"{model}: {k}")
            m1, m2, mb = (statistics.median(v) for v in (one, two, bare))
            print(f"| {model} | {m1:.0f} | {m2:.0f} | {mb:.0f} | {m2 / m1:.2f}x | {mb / m2:.2f}x |")
    print(f"(samples/s, median of {rounds} rounds)")
    print()
    print("| bytes | Kiln allreduce (us) | MPI_Allreduce (us) | MPI_Iallreduce+Wait (us) | Kiln/MPI time | Kiln GB/s | MPI GB/s |")
    print("|---|---|---|---|---|---|---|")
    for r in allreduce_bench(allreduce_bin, args.smoke):
        assert r["ok"], r
        k, m = r["kiln_s"], r["mpi_s"]
        print(f"| {r['bytes']} | {k * 1e6:.1f} | {m * 1e6:.1f} | {r['mpi_nonblocking_s'] * 1e6:.1f} | {k / m:.2f} | {r['bytes'] / k / 1e9:.3f} | {r['bytes'] / m / 1e9:.3f} |")
    if args.smoke:
        print("smoke: ok")


if __name__ == "__main__":
    main()
