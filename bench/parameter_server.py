"""Parameter-server training against data-parallel (docs/distributed.md, "Parameter servers"):
the loss curve and the step time of the same model, data, per-worker batch and steps, trained by
  - `mpiexec -n 2 kiln train --data-parallel` (2 ranks x batch B),
  - `mpiexec -n 3 kiln train --parameter-servers 1` (sync: 1 server + 2 workers x batch B),
  - the same with `--ps-mode async --staleness K`.
Each round runs the three, one after the other, as fresh processes. The loss curve is rank 0's
metrics CSV (sync: the workers' mean loss per step, which must equal data-parallel's; async: one
row per worker update, shown as the mean of each pair of updates so that its steps line up). The
step time is `kiln train`'s training seconds over its steps (compile excluded); medians over rounds.

    python3 bench/parameter_server.py --kiln build/bin/kiln [--model mlp|cnn] [--rounds 3]
"""
import argparse
import csv
import importlib.util
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_distributed", REPO / "bench" / "distributed.py")
D = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(D)  # its model makers, data and MPI environment


def run(kiln, ranks, model, data, work, name, batch, epochs, lr, extra):
    csv_path = work / f"{name}.csv"
    cmd = ["mpiexec", "-n", str(ranks), kiln, "train", str(model), "--data", str(data), "--batch-size", str(batch),
           "--threads", "1", "--epochs", str(epochs), "--lr", str(lr), "--no-shuffle", "--metrics-csv", str(csv_path),
           "--export", str(work / f"{name}.onnx"), *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=D.mpi_env())
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr[-3000:]}")
    m = re.search(r"trained (\d+) steps in ([\d.]+) s", r.stderr)
    with open(csv_path) as f:
        losses = [float(row["train_loss"]) for row in csv.DictReader(f) if row["train_loss"]]
    return losses, 1e3 * float(m.group(2)) / int(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", default=os.environ.get("KILN_BIN", str(REPO / "build" / "bin" / "kiln")))
    ap.add_argument("--model", default="mlp", choices=sorted(D.ONNX_MODELS))
    ap.add_argument("--batch", type=int, default=32, help="per worker (and per data-parallel rank)")
    ap.add_argument("--steps", type=int, default=16, help="steps per epoch")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--staleness", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="kiln_bench_ps_"))
    model = work / f"{args.model}.onnx"
    shape, classes = D.ONNX_MODELS[args.model](model)
    data = work / "data.npz"
    D.make_data(data, 2 * args.batch * args.steps, shape, classes)
    configs = [("data-parallel, 2 ranks", 2, ["--data-parallel"]),
               ("sync PS, 1 server + 2 workers", 3, ["--parameter-servers", "1"]),
               (f"async PS (staleness {args.staleness}), 1 server + 2 workers", 3,
                ["--parameter-servers", "1", "--ps-mode", "async", "--staleness", str(args.staleness)])]
    curves, times = {}, {name: [] for name, _, _ in configs}
    for _ in range(args.rounds):
        for i, (name, ranks, extra) in enumerate(configs):
            losses, ms = run(args.kiln, ranks, model, data, work, f"c{i}", args.batch, args.epochs, args.lr, extra)
            curves.setdefault(name, losses)
            times[name].append(ms)
    steps = args.steps * args.epochs
    async_name = configs[2][0]
    curves[async_name] = list(np.mean(np.reshape(curves[async_name], (steps, 2)), axis=1))
    dp, sync = np.array(curves[configs[0][0]]), np.array(curves[configs[1][0]])
    print(f"{args.model}, {args.batch} records per worker, {steps} steps, SGD lr {args.lr}, {args.rounds} rounds; "
          f"sync vs data-parallel loss: max relative difference {np.max(np.abs(sync - dp) / np.abs(dp)):.2g}")
    marks = sorted({1, *range(steps // 4, steps + 1, steps // 4)})
    print("| run | step time (ms, median) | per round (ms) | " + " | ".join(f"loss @{s}" for s in marks) + " |")
    print("|---|---:|---|" + "---:|" * len(marks))
    for name, _, _ in configs:
        c = curves[name]
        print(f"| {name} | {statistics.median(times[name]):.1f} | {' '.join(f'{t:.1f}' for t in times[name])} | "
              + " | ".join(f"{c[s - 1]:.4f}" for s in marks) + " |")


if __name__ == "__main__":
    main()
