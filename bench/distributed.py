#!/usr/bin/env python3
"""Data-parallel training throughput and allreduce cost (docs/distributed.md).

1. `kiln train` of an MLP (256-512-512-10, synthetic data): 1 rank x 1 thread, batch B, against
   `mpiexec -n 2 kiln train --data-parallel`, 2 ranks x 1 thread, batch B each (2B per step).
   Rounds alternate the two; the figure is the steady-state samples/s (the second epoch's, from
   the metrics CSV: the first holds the compiles). Median over rounds, and the ratio.
2. bin/kiln-bench-allreduce under mpiexec -n 2: Kiln's allreduce (agreement check, fusion,
   polled non-blocking MPI) against a bare MPI_Allreduce, per message size, interleaved.

--smoke: one short round; checks the data-parallel weights equal one process's at batch 2B
(1e-6 relative) and the allreduce results; no timing assertions. The machine this was written
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


def make_model(path, features=256, hidden=512, classes=10):
    rng = np.random.default_rng(0)
    dims = [features, hidden, hidden, classes]
    inits, nodes, x = [], [], "x"
    for i in range(3):
        w = (rng.standard_normal((dims[i + 1], dims[i])) / np.sqrt(dims[i])).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"W{i}"), numpy_helper.from_array(np.zeros(dims[i + 1], np.float32), f"b{i}")]
        out = "logits" if i == 2 else f"h{i}"
        nodes.append(helper.make_node("Gemm", [x, f"W{i}", f"b{i}"], [out if i == 2 else f"g{i}"], transB=1))
        if i < 2:
            nodes.append(helper.make_node("Relu", [f"g{i}"], [out]))
        x = out
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", features])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", classes])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def make_data(path, n, features=256, classes=10):
    rng = np.random.default_rng(1)
    labels = rng.integers(0, classes, n)
    centers = rng.standard_normal((classes, features))
    x = (centers[labels] + rng.standard_normal((n, features))).astype(np.float32)
    np.savez(path, x=x, labels=labels.astype(np.int64))


def train(kiln, work, name, batch, epochs, ranks):
    csv_path, out = work / f"{name}.csv", work / f"{name}.onnx"
    cmd = [kiln, "train", str(work / "mlp.onnx"), "--data", str(work / "data.npz"), "--batch-size", str(batch),
           "--threads", "1", "--epochs", str(epochs), "--no-shuffle", "--optimizer", "sgd", "--lr", "0.05",
           "--metrics-csv", str(csv_path), "--export", str(out)]
    if ranks > 1:
        cmd = [shutil.which("mpiexec") or "mpiexec", "-n", str(ranks), *cmd, "--data-parallel"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=mpi_env())
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
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        make_model(work / "mlp.onnx")
        make_data(work / "data.npz", n=(256 if args.smoke else 4096))
        one, two = [], []
        for _ in range(rounds):
            s1, w1 = train(args.kiln, work, "one", args.batch, epochs, 1)
            s2, w2 = train(args.kiln, work, "two", args.batch, epochs, 2)
            one.append(s1), two.append(s2)
        if args.smoke:  # 2 ranks x B vs 1 process x 2B: the same weights
            _, wref = train(args.kiln, work, "ref", 2 * args.batch, epochs, 1)
            for k in wref:
                np.testing.assert_allclose(w2[k], wref[k], rtol=1e-6, atol=1e-6 * float(np.abs(wref[k]).max()), err_msg=k)
        print("| run | samples/s (median of %d) |" % rounds)
        print("|---|---|")
        print(f"| 1 rank x 1 thread, batch {args.batch} | {statistics.median(one):.0f} |")
        print(f"| 2 ranks x 1 thread, batch {args.batch} each | {statistics.median(two):.0f} |")
        print(f"| ratio 2 ranks / 1 rank | {statistics.median(two) / statistics.median(one):.2f}x |")
    print()
    print("| bytes | Kiln allreduce (us) | MPI_Allreduce (us) | Kiln/MPI time | Kiln GB/s | MPI GB/s |")
    print("|---|---|---|---|---|---|")
    for r in allreduce_bench(allreduce_bin, args.smoke):
        assert r["ok"], r
        k, m = r["kiln_s"], r["mpi_s"]
        print(f"| {r['bytes']} | {k * 1e6:.1f} | {m * 1e6:.1f} | {k / m:.2f} | {r['bytes'] / k / 1e9:.3f} | {r['bytes'] / m / 1e9:.3f} |")
    if args.smoke:
        print("smoke: ok")


if __name__ == "__main__":
    main()
