#!/usr/bin/env python3
"""Zoo models under load: Kiln builds against each other and ONNX Runtime, minimum and median.

On a machine shared with other work the median moves by 20-50% between runs of one build (ORT
loses more than Kiln when the cores are contended), so a build-against-build change of 10% does
not show in medians of a few runs. The minimum over many interleaved runs is the run that was
least disturbed: it is the figure to compare builds by, with the median beside it.

Per model: an ORT session (all graph optimizations, sequential, --threads intra-op threads) in
this process and every Kiln binary as `kiln run --repeat R --timings-json` (one process per
round, its per-run times); `--rounds` rounds, the engine order reversed every other round.
Reports per engine the minimum and median over all timed runs and its ratio to ORT's, and each
later binary's minimum against the first's. `--openvino` adds OpenVINO (CPU plugin, f32 inference
precision, LATENCY hint, --threads threads; its default precision on a bf16-capable CPU is bf16)
to the same rounds, and each Kiln binary's minimum against the best peer's. `--smoke` runs each model once through every engine
and compares the outputs with ORT's (no timing).

    python3 bench/zoo_ab.py --kiln A/kiln[,B/kiln,...] [--models efficientnet_b0,...]
        [--zoo-dir /work/zoo] [--threads 2] [--batch 1] [--rounds 6] [--repeat 8] [--smoke]

The models are scripts/export_zoo.py's `<name>_b<batch>.onnx` with `<name>_b<batch>_inputs.npz`
(`--batch`, default 1).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

DEFAULT_MODELS = "efficientnet_b0,regnety_400mf,mobilenetv3_small,densenet121,inception_v3,googlenet,resnext50"


def ort_session(path: str, threads: int) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def openvino_request(path: str, threads: int):
    import openvino as ov  # only with --openvino (bench/setup_peers.sh's venv has it)
    compiled = ov.Core().compile_model(path, "CPU", {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY",
                                                     "INFERENCE_NUM_THREADS": threads})
    return compiled.create_infer_request()


def kiln_runs(kiln: str, model: str, inputs: str, threads: int, repeat: int, out_dir: str | None = None) -> list[float]:
    """Per-run milliseconds of one `kiln run` process (and its outputs in out_dir when given)."""
    fd, timings = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    cmd = [kiln, "run", model, "--inputs", inputs, "--threads", str(threads), "--repeat", str(repeat),
           "--timings-json", timings] + (["--output-dir", out_dir] if out_dir else [])
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{kiln} failed on {model}:\n{proc.stderr[-2000:]}")
    with open(timings) as f:
        runs = json.load(f)["runs_ms"]
    os.unlink(timings)
    return runs


def kiln_output_files(names: list[str]) -> list[str]:
    """The .npy file names `kiln run --output-dir` writes for outputs `names`, in order: each
    character outside [A-Za-z0-9._-] becomes '_', a repeated name gets `_<index>` (the rule of
    tools/kiln/name_value_args.cc sanitize_file_name and run_command.cc write_outputs)."""
    files, used = [], set()
    for i, name in enumerate(names):
        f = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in name)
        f = "_" + f if f in ("", ".", "..") else f
        f = f"{f}_{i}" if f in used else f
        used.add(f)
        files.append(f + ".npy")
    return files


def smoke(args, kilns: list[str]) -> None:
    for name in args.models.split(","):
        model, inputs = (os.path.join(args.zoo_dir, f"{name}_b{args.batch}{s}") for s in (".onnx", "_inputs.npz"))
        sess = ort_session(model, args.threads)
        feed = dict(np.load(inputs))
        ref = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feed)))
        for kiln in kilns:
            with tempfile.TemporaryDirectory() as out:
                kiln_runs(kiln, model, inputs, args.threads, 1, out)
                for (oname, want), file in zip(ref.items(), kiln_output_files(list(ref))):
                    got = np.load(os.path.join(out, file))
                    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3, err_msg=f"{name} {kiln} {oname}")
        print(f"{name}: outputs match ORT ({len(kilns)} Kiln builds)", flush=True)


def timed(args, kilns: list[str]) -> None:
    for name in args.models.split(","):
        model, inputs = (os.path.join(args.zoo_dir, f"{name}_b{args.batch}{s}") for s in (".onnx", "_inputs.npz"))
        sess = ort_session(model, args.threads)
        feed = dict(np.load(inputs))
        sess.run(None, feed)
        peers = {"ort": lambda: sess.run(None, feed)}
        if args.openvino:
            req = openvino_request(model, args.threads)
            req.infer(feed)
            peers["ov"] = lambda: req.infer(feed)
        runs: dict[str, list[float]] = {k: [] for k in kilns + list(peers)}
        for r in range(args.rounds):
            order = kilns + list(peers) if r % 2 == 0 else list(peers)[::-1] + kilns[::-1]
            for engine in order:
                if engine not in peers:
                    runs[engine] += kiln_runs(engine, model, inputs, args.threads, args.repeat)
                    continue
                for _ in range(args.repeat):
                    t = time.perf_counter()
                    peers[engine]()
                    runs[engine].append((time.perf_counter() - t) * 1e3)
        o_min, o_med = min(runs["ort"]), statistics.median(runs["ort"])
        cells = [f"{name}"] + [f"{min(runs[p]):.2f} / {statistics.median(runs[p]):.2f}" for p in peers]
        best = min(min(runs[p]) for p in peers)
        for k in kilns:
            k_min, k_med = min(runs[k]), statistics.median(runs[k])
            cells.append(f"{k_min:.2f} / {k_med:.2f} ({k_min / o_min:.2f}x / {k_med / o_med:.2f}x)")
            if args.openvino:
                cells.append(f"{k_min / best:.2f}")
        for k in kilns[1:]:
            cells.append(f"{min(runs[k]) / min(runs[kilns[0]]):.2f}")
        print("| " + " | ".join(cells) + " |", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kiln", default="build/bin/kiln", help="comma-separated Kiln binaries, the first the baseline")
    ap.add_argument("--models", default=DEFAULT_MODELS)
    ap.add_argument("--zoo-dir", default="/work/zoo")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1, help="the export's batch (<name>_b<batch>.onnx)")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=8)
    ap.add_argument("--openvino", action="store_true", help="OpenVINO in the same rounds (f32)")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    kilns = args.kiln.split(",")
    if args.smoke:
        smoke(args, kilns)
        return 0
    head = ["model", "ORT min / median ms"] + (["OpenVINO min / median ms"] if args.openvino else [])
    for k in kilns:
        head += [f"{k} min / median ms (/ ORT)"] + ([f"{k} / best peer (min)"] if args.openvino else [])
    head += [f"{k} / {kilns[0]} (min)" for k in kilns[1:]]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head), flush=True)
    timed(args, kilns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
