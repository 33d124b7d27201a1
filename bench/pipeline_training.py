#!/usr/bin/env python3
"""Pipeline-parallel training over MPI (docs/distributed.md, "Pipeline-parallel training"):
`mpiexec -n 2 kiln train MODEL --pipeline-parallel --microbatches M` (2 ranks x 1 thread, one
stage each, GPipe's schedule) against `kiln train` of the whole model in one process at 1 thread
and at 2 threads, on a BERT-style encoder (scripts/make_models.py's, batch dim symbolic; default
4 layers, hidden 256, 4 heads, FFN 1024, seq 128) trained with an MSE loss against random
targets, SGD, --no-shuffle. The pipeline runs twice: keeping each microbatch's forward values for
its backward (the default) and with --rematerialize (the backward computes the stage's forward
again, GPipe's memory saver).

Each figure is `kiln train`'s samples/s over its whole run (compile excluded: --epochs passes
over --records records); rounds alternate the configurations, and the table gives the median
over rounds and the ratio against 1 rank x 1 thread; for the pipelines also rank 0's median
step and the compute in it (forward, backward, optimizer: the rest is waiting for the other
stage, the pipeline's bubble). Every run's exported weights are checked
against the 1-thread run's (max |diff| / max |w| <= 1e-5; printed).

--features: what checkpoints and clipping cost the pipeline instead: 2 ranks as they are, with
--clip-norm 0.1 (one exchange of the stages' squared sums per step), and with a checkpoint every
step (--checkpoint-every 1: rank 0 gathers every stage's parameters and momentum buffers and
writes them), all with SGD with momentum (Adam's g / (sqrt(v) + eps) magnifies the rounding of
gradients near 0 past the 1e-5 check); one process with and without --clip-norm 0.1 gives the
weights' references (and shows that the clip binds).

--dispatch: master dispatch against every rank reading the model instead: 2 ranks as they are
(`--dispatch replicated`, the default), with `--dispatch master` (rank 0 builds both stages and
ships rank 1 its own, feeds it and orders each step ahead), and, with --baseline BIN, another
kiln binary as it is (a session's starting build); the master's weights must be bitwise the
replicated run's; each run's wall time (mpiexec start to exit: import, build, compile, train)
is printed too.
--smoke: a 2-layer, hidden-64 encoder, one short round, checks only (scripts/test.sh). The
machine this was written on has 2 cores shared with other work: figures are indicative only.
"""
import argparse
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import numpy_helper

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from pipeline_parallel import batch_symbolic_bert, mpi_env  # noqa: E402


WALL = {}  # the last run's wall seconds per command (--dispatch)


def train(cmd, env=None):
    """samples/s, and for a pipeline rank 0's median step: (step ms, compute ms) (else None)."""
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    WALL[tuple(map(str, cmd))] = time.monotonic() - t0
    if proc.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    m = re.search(r"trained \d+ steps in [0-9.]+ s \(([0-9.]+) samples/s\)", proc.stderr)
    p = re.search(r"per step \(median\): ([0-9.]+) ms, of which forward ([0-9.]+) ms, backward ([0-9.]+) ms, "
                  r"optimizer ([0-9.]+) ms", proc.stderr)
    stage = (float(p.group(1)), sum(float(p.group(i)) for i in (2, 3, 4))) if p else None
    return float(m.group(1)), stage


def weights(path):
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}


def worst_difference(path, ref):
    got, want = weights(path), weights(ref)
    return max(float(np.abs(got[k] - want[k]).max() / max(np.abs(want[k]).max(), 1e-30)) for k in want)


def configurations(a, model, data, work):
    base = [a.kiln, "train", str(model), "--data", str(data), "--batch-size", str(a.batch), "--loss", "mse",
            "--epochs", str(a.epochs), "--no-shuffle", "--lr", "0.01"]
    if a.features:
        base += ["--optimizer", "momentum"]
    pipe = ["mpiexec", "-n", "2", *base, "--threads", "1", "--pipeline-parallel", "--microbatches", str(a.microbatches)]
    if a.features:
        clip = ["--clip-norm", "0.1"]
        return {
            "1 rank x 1 thread": (base + ["--threads", "1", "--export", str(work / "one.onnx")], None),
            "1 rank x 1 thread, --clip-norm 0.1": (base + ["--threads", "1", *clip, "--export",
                                                           str(work / "one_clip.onnx")], None),
            "2 ranks x 1 thread": (pipe + ["--export", str(work / "pp.onnx")], mpi_env()),
            "2 ranks x 1 thread, --clip-norm 0.1": (pipe + clip + ["--export", str(work / "pp_clip.onnx")], mpi_env()),
            "2 ranks x 1 thread, a checkpoint every step": (
                pipe + ["--checkpoint-dir", str(work / "ck"), "--checkpoint-every", "1", "--export",
                        str(work / "pp_ck.onnx")], mpi_env()),
        }
    if a.dispatch:
        out = {
            "1 rank x 1 thread": (base + ["--threads", "1", "--export", str(work / "one.onnx")], None),
            "2 ranks, --dispatch replicated": (pipe + ["--export", str(work / "pp.onnx")], mpi_env()),
            "2 ranks, --dispatch master": (pipe + ["--dispatch", "master", "--export", str(work / "pp_master.onnx")],
                                           mpi_env()),
        }
        if a.baseline:
            baseline = [a.baseline if x == a.kiln else x for x in pipe]
            out["2 ranks, --baseline (replicated)"] = (baseline + ["--export", str(work / "pp_base.onnx")], mpi_env())
        return out
    return {
        "1 rank x 1 thread": (base + ["--threads", "1", "--export", str(work / "one.onnx")], None),
        "1 rank x 2 threads": (base + ["--threads", "2", "--export", str(work / "two_threads.onnx")], None),
        f"2 ranks x 1 thread, {a.microbatches} microbatches": (pipe + ["--export", str(work / "pp.onnx")], mpi_env()),
        f"2 ranks x 1 thread, {a.microbatches} microbatches, --rematerialize": (
            pipe + ["--rematerialize", "--export", str(work / "pp_remat.onnx")], mpi_env()),
    }


def bench(a, work):
    model, data = work / "encoder.onnx", work / "data.npz"
    batch_symbolic_bert(model, a.layers, a.hidden, a.heads, a.ffn, a.seq)
    rng = np.random.default_rng(1)
    shape = (a.records, a.seq, a.hidden)
    np.savez(data, embeddings=rng.standard_normal(shape).astype(np.float32),
             labels=rng.standard_normal(shape).astype(np.float32))
    configs = configurations(a, model, data, work)
    rates, stages = {k: [] for k in configs}, {k: [] for k in configs}
    walls = {k: [] for k in configs}
    for _ in range(a.rounds):
        for name, (cmd, env) in configs.items():
            rate, stage = train(cmd, env)
            rates[name].append(rate)
            walls[name].append(WALL[tuple(map(str, cmd))])
            if stage:
                stages[name].append(stage)
    if a.dispatch:  # the master computes what every rank reading the model computes, bit for bit
        got, want = weights(work / "pp_master.onnx"), weights(work / "pp.onnx")
        assert all(np.array_equal(got[k], want[k]) for k in want), "--dispatch master differs from replicated"
    refs = ({"pp.onnx": "one.onnx", "pp_clip.onnx": "one_clip.onnx", "pp_ck.onnx": "one.onnx"} if a.features else
            {f: "one.onnx" for f in ["pp.onnx", "pp_master.onnx"] + (["pp_base.onnx"] if a.baseline else [])}
            if a.dispatch else {f: "one.onnx" for f in ["two_threads.onnx", "pp.onnx", "pp_remat.onnx"]})
    diffs = {f: worst_difference(work / f, work / ref) for f, ref in refs.items()}
    if a.features:  # the clip binds: the clipped weights are not the unclipped ones
        diffs["one_clip.onnx vs one.onnx (must differ)"] = worst_difference(work / "one_clip.onnx", work / "one.onnx")
        assert diffs.pop("one_clip.onnx vs one.onnx (must differ)") > 1e-3
    assert all(d <= 1e-5 for d in diffs.values()), diffs
    ref = statistics.median(rates["1 rank x 1 thread"])
    print(f"encoder: {a.layers} layers, hidden {a.hidden}, {a.heads} heads, FFN {a.ffn}, seq {a.seq}; batch {a.batch}, "
          f"{a.records // a.batch} steps x {a.epochs} epochs per run, {a.rounds} rounds. Weights vs 1 rank x 1 thread, "
          f"max |diff| / max |w|: " + ", ".join(f"{k} {v:.1e}" for k, v in diffs.items()))
    print("| configuration | samples/s (median) | vs 1 rank x 1 thread | samples/s per round "
          "| rank 0 per step: step / compute (ms, median of rounds) | wall s per round |")
    print("|---|---:|---:|---|---|---|")
    for name, r in rates.items():
        med = statistics.median(r)
        st = stages[name]
        stage = (f"{statistics.median(x[0] for x in st):.1f} / {statistics.median(x[1] for x in st):.1f}"
                 if st else "")
        print(f"| {name} | {med:.1f} | {med / ref:.2f}x | {' '.join(f'{v:.1f}' for v in r)} | {stage} "
              f"| {' '.join(f'{w:.2f}' for w in walls[name])} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", default=os.environ.get("KILN_BIN", str(REPO / "build" / "bin" / "kiln")))
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=1024)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--records", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--features", action="store_true", help="time --clip-norm and checkpoints instead")
    ap.add_argument("--dispatch", action="store_true", help="time --dispatch master against replicated instead")
    ap.add_argument("--baseline", help="with --dispatch: another kiln binary, run replicated in the same rounds")
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()
    if a.smoke:
        a.layers, a.hidden, a.heads, a.ffn, a.seq = 2, 64, 2, 128, 32
        a.batch, a.microbatches, a.records, a.epochs, a.rounds = 4, 2, 16, 1, 1
    with tempfile.TemporaryDirectory(prefix="kiln-pipeline-training-") as work:
        bench(a, pathlib.Path(work))


if __name__ == "__main__":
    main()
