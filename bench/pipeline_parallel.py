#!/usr/bin/env python3
"""Pipeline-parallel inference over MPI (docs/distributed.md, "Partitioned graphs"):
`mpiexec -n 2 kiln run MODEL --partition 2 --microbatches M` (2 ranks x 1 thread, each rank one
half of the model, rank r running microbatch m + 1 while rank r + 1 runs m) against the whole
model in one process at 1 thread and at 2 threads, on a BERT-base encoder (12 layers, hidden
768, seq 128; scripts/make_models.py's, with its batch dim made symbolic) at batch B. A fourth
row runs the whole model at 1 thread on one microbatch (batch B/M) and multiplies by M: what the
pipeline's stages would cost run one after the other, so that pipeline / that row shows the
overlap (ideal 2M/(M+1) for 2 stages) apart from the cost of smaller matrices.

Rounds alternate the three; each figure is `kiln run`'s median over --repeat runs; the table
gives medians over rounds and throughput ratios against 1 rank x 1 thread. The pipeline's
outputs are checked against the whole model's (bitwise in-process first: --smoke).

--smoke: a 2-layer encoder at batch 4, 2 microbatches, one round: the pipeline's outputs must
equal the in-process partitioned run's bit for bit and the whole model's within 1e-4 (the
header says whether they were bitwise: they were on this machine). The
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

import numpy as np
import onnx
from onnx import numpy_helper

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
import make_models  # noqa: E402


def mpi_env():
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none", OMPI_MCA_rmaps_base_oversubscribe="1")
    return env


def batch_symbolic_bert(path, layers, hidden=768, heads=12, ffn=3072, seq=128):
    """make_models' BERT encoder with its leading dim named `batch`: the head-split Reshapes'
    leading 1 becomes 0 (copy the input's dim)."""
    g = make_models.build_bert(np.random.default_rng(0), "bert_pipe", layers, hidden, heads, ffn, seq)
    m = g.model()
    inits = {i.name: i for i in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type == "Reshape" and n.input[1] in inits:
            a = numpy_helper.to_array(inits[n.input[1]]).copy()
            if a[0] == 1:
                a[0] = 0
                inits[n.input[1]].CopyFrom(numpy_helper.from_array(a, n.input[1]))
    for v in list(m.graph.input) + list(m.graph.output):
        v.type.tensor_type.shape.dim[0].dim_param = "batch"
    onnx.save(m, str(path))


def run(cmd, env=None):
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    m = re.search(r"median ([0-9.]+) ms", proc.stdout)
    return float(m.group(1)) if m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", default=os.environ.get("KILN_BIN", str(REPO / "build" / "bin" / "kiln")))
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--microbatches", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()
    if a.smoke:
        a.layers, a.batch, a.microbatches, a.rounds, a.repeat = 2, 4, 2, 1, 1
    with tempfile.TemporaryDirectory(prefix="kiln-pipeline-") as work:  # a 12-layer model is 340 MB
        bench(a, pathlib.Path(work))


def bench(a, work):
    model = work / "bert.onnx"
    batch_symbolic_bert(model, a.layers)
    inputs, micro_inputs = work / "in.npz", work / "micro.npz"
    x = np.random.default_rng(1).standard_normal((a.batch, 128, 768)).astype(np.float32)
    np.savez(inputs, embeddings=x)
    micro = a.batch // a.microbatches
    np.savez(micro_inputs, embeddings=x[:micro])
    base = [a.kiln, "run", str(model), "--inputs", str(inputs), "--dim", f"batch={a.batch}", "--repeat", str(a.repeat)]
    pipe = ["--partition", "2", "--microbatches", str(a.microbatches)]
    configs = {
        "1 rank x 1 thread": (base + ["--threads", "1", "--output-dir", str(work / "whole")], None),
        "1 rank x 2 threads": (base + ["--threads", "2"], None),
        f"1 rank x 1 thread, batch {micro} x {a.microbatches} runs": (
            [a.kiln, "run", str(model), "--inputs", str(micro_inputs), "--dim", f"batch={micro}", "--repeat",
             str(a.repeat), "--threads", "1"], None),
        f"2 ranks x 1 thread, {a.microbatches} microbatches": (
            ["mpiexec", "-n", "2"] + base + ["--threads", "1", "--output-dir", str(work / "mpi")] + pipe, mpi_env()),
    }
    times = {k: [] for k in configs}
    for _ in range(a.rounds):
        for name, (cmd, env) in configs.items():
            times[name].append(run(cmd, env) * (a.microbatches if "runs" in name else 1))
    run(base + ["--threads", "1", "--output-dir", str(work / "local")] + pipe)
    whole = np.load(work / "whole" / "last_hidden_state.npy")
    local = np.load(work / "local" / "last_hidden_state.npy")
    over_mpi = np.load(work / "mpi" / "last_hidden_state.npy")
    assert over_mpi.tobytes() == local.tobytes(), "the pipeline over MPI differs from the in-process pipeline"
    diff = float(np.abs(over_mpi - whole).max())
    assert diff <= 1e-4, f"pipeline vs whole model: max |diff| {diff}"
    ref = statistics.median(times["1 rank x 1 thread"])
    bitwise = over_mpi.tobytes() == whole.tobytes()
    print(f"BERT encoder, {a.layers} layers, batch {a.batch}, seq 128; {a.rounds} rounds x {a.repeat} runs "
          f"(outputs: pipeline == in-process pipeline bitwise; vs whole model "
          f"{'bitwise' if bitwise else f'max |diff| {diff:.1e}'})")
    print("| configuration | ms per batch (median) | throughput vs 1 rank x 1 thread | ms per round |")
    print("|---|---:|---:|---|")
    for name, t in times.items():
        med = statistics.median(t)
        print(f"| {name} | {med:.1f} | {ref / med:.2f}x | {' '.join(f'{v:.0f}' for v in t)} |")


if __name__ == "__main__":
    main()
