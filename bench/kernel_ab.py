#!/usr/bin/env python3
"""Kiln builds compared by their kernels' minima: a figure the machine's load barely moves.

Under load a whole run's minimum still holds the kernels that lost a core (a 2-thread run whose
helper was descheduled takes a single-thread time for that kernel), so build-against-build
changes of a few percent do not show. Each kernel's minimum over many runs is the time it took
when it had its cores; their sum is the run the model would take undisturbed.

Per model, every binary runs `kiln run --repeat R --profile` in `--rounds` interleaved processes
(order reversed every other round); the report gives, per binary, the sum of its kernels'
minima (each kernel the minimum over all its runs) and the part of it in the kernels whose name
contains each `--group` string.

    python3 bench/kernel_ab.py --kiln A/kiln,B/kiln --models googlenet,inception_v3
        [--zoo-dir /work/zoo] [--batch 1] [--threads 2] [--rounds 2] [--repeat 100] [--group Pool]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile


def kernel_events(kiln: str, model: str, inputs: str, threads: int, repeat: int) -> list[dict]:
    """The kernel events of `kiln run --profile` over the process's runs (Chrome trace format)."""
    fd, trace = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    cmd = [kiln, "run", model, "--inputs", inputs, "--threads", str(threads), "--repeat", str(repeat),
           "--profile", trace]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{kiln} failed on {model}:\n{proc.stderr[-2000:]}")
    with open(trace) as f:
        data = json.load(f)
    os.unlink(trace)
    events = data["traceEvents"] if isinstance(data, dict) else data
    return [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]


def kernel_minima(kiln: str, model: str, inputs: str, threads: int, repeat: int) -> dict[tuple, float]:
    """Microseconds per (step, kernel name): the minimum over the process's timed runs."""
    minima: dict[tuple, float] = {}
    for e in kernel_events(kiln, model, inputs, threads, repeat):
        key = (e["args"]["step"], e["name"])
        minima[key] = min(minima.get(key, float("inf")), e["dur"])
    return minima


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kiln", required=True, help="comma-separated Kiln binaries, the first the baseline")
    ap.add_argument("--models", required=True)
    ap.add_argument("--zoo-dir", default="/work/zoo")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1, help="the export's batch (<model>_b<batch>.onnx)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=100)
    ap.add_argument("--group", action="append", default=[], help="kernel-name substring summed apart (repeatable)")
    args = ap.parse_args()
    kilns = args.kiln.split(",")
    head = " | ".join(f"{k} us" + "".join(f" ({g})" for g in args.group) for k in kilns)
    print(f"| model | {head} | later / first |")
    print("|---|" + "---|" * (len(kilns) + 1))
    for model in args.models.split(","):
        path = os.path.join(args.zoo_dir, f"{model}_b{args.batch}.onnx")
        inputs = os.path.join(args.zoo_dir, f"{model}_b{args.batch}_inputs.npz")
        best: dict[str, dict[tuple, float]] = {k: {} for k in kilns}
        for r in range(args.rounds):
            for k in kilns if r % 2 == 0 else kilns[::-1]:
                for key, us in kernel_minima(k, path, inputs, args.threads, args.repeat).items():
                    best[k][key] = min(best[k].get(key, float("inf")), us)
        totals = {k: sum(best[k].values()) for k in kilns}
        cells = []
        for k in kilns:
            parts = [sum(v for (_, name), v in best[k].items() if g in name) for g in args.group]
            cells.append(f"{totals[k]:.0f}" + "".join(f" ({p:.0f})" for p in parts))
        ratios = ", ".join(f"{totals[k] / totals[kilns[0]]:.2f}" for k in kilns[1:])
        print(f"| {model} | " + " | ".join(cells) + f" | {ratios} |")


if __name__ == "__main__":
    main()
