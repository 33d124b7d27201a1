#!/usr/bin/env python3
"""Kiln vs ONNX Runtime vs OpenVINO on CPU: latency, GFLOP/s against the measured peak, start-up.

One run loads the same ONNX files into the three engines and, per (model, threads, batch),
interleaves them round by round (the engine order rotates each round), so load from other
processes on a shared machine falls on all of them alike:

* Kiln: one `kiln run --repeat R --threads T --executor sequential --timings-json F` process per
  round, on the kernel cache the start-up measurement warmed (compile never enters a timed
  run: `kiln run` times only the runs after its warm-up run). `--kiln-kernels X` passes
  `--kernels X` through.
* ONNX Runtime: CPU provider, intra_op_num_threads=T, inter_op_num_threads=1, sequential
  execution, all graph optimizations; one warm-up run per round, then R timed runs.
* OpenVINO: CPU plugin, INFERENCE_PRECISION_HINT=f32, PERFORMANCE_HINT=LATENCY,
  INFERENCE_NUM_THREADS=T; `infer(share_inputs=True)`, one warm-up run per round, R timed runs.

Each engine's median and p90 are over all its timed runs of all rounds: up to 3 in round 0,
then up to R per round, fewer (at least 1) where R runs would take more than --budget seconds. `kiln/best` is Kiln's
median over the faster peer's (below 1: Kiln is faster). GFLOP/s counts 2 x the MACs of Conv,
MatMul and Gemm (bench/flops.py); `% peak` is against the FP32 FMA peak measured for T threads
(bench/fma_peak.py). Kiln's outputs are compared with ONNX Runtime's (np.allclose, rtol 2e-3,
atol 5e-4 x max(1, max|ort|): the loosest tolerance tests/models states for deep random-weight
conv nets; a wrong kernel is off by O(1)); a mismatch is marked `MISMATCH` in the table.

Start-up, per model (first batch and thread count): Kiln load to first result with an empty
KILN_CACHE_DIR (every kernel generated and compiled) and again with that warm cache, both timed
inside `kiln run` (--timings-json: load + first run); ONNX Runtime's and OpenVINO's
session creation (compile_model) + first run, in this process.

Models come from scripts/make_models.py (generated into --models-dir when missing); all have a
fixed batch dimension, so other batches are the `<name>_b<N>` variants of
scripts/batch_variants.py. The table is printed and written into docs/benchmarks.md between
the `peers:begin` / `peers:end` markers (--no-docs to skip).

    bench/setup_peers.sh                      # ORT + OpenVINO in build/peers-venv
    build/peers-venv/bin/python bench/peers.py                        # the full run
    build/peers-venv/bin/python bench/peers.py --models mlp,resnet18 --threads 1 --batches 1 \\
        --rounds 3 --no-docs
    python3 bench/peers.py --smoke            # CI: outputs vs ORT once, no timing claims
    build/peers-venv/bin/python bench/peers.py --zoo --threads 2 --batches 1 --rounds 3
    python3 bench/peers.py --zoo --smoke      # every zoo model once through Kiln and ORT

The zoo (`--zoo`, scripts/export_zoo.py: 30 architectures exported by Debian's PyTorch into
--zoo-dir when missing) gets its own table between the `zoo:begin` / `zoo:end` markers, with the
geometric mean of Kiln / best peer per thread count and batch.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "scripts"))
sys.path.insert(0, HERE)

import batch_variants  # noqa: E402
import export_zoo  # noqa: E402
import fma_peak  # noqa: E402
import flops  # noqa: E402
import make_models  # noqa: E402
import roofline  # noqa: E402
import zoo_ab  # noqa: E402

DEFAULT_MODELS = "resnet50,resnet18,mobilenetv2,bert_base,mlp"
SMOKE_MODELS = "mlp,resnet18,resnet50,mobilenetv2,bert_base"  # the benchmark's own models
RTOL, ATOL = 2e-3, 5e-4
DOCS = os.path.join(REPO, "docs", "benchmarks.md")
BEGIN, END = "<!-- peers:begin -->", "<!-- peers:end -->"
ZOO_BEGIN, ZOO_END = "<!-- zoo:begin -->", "<!-- zoo:end -->"
# The zoo is exported by Debian's PyTorch (scripts/export_zoo.py), not by this interpreter (the
# peers venv has no PyTorch).
EXPORT_PYTHON = os.environ.get("KILN_EXPORT_PYTHON", "/usr/bin/python3")


# ---- engines ---------------------------------------------------------------------------------

class Kiln:
    name = "kiln"

    def __init__(self, exe, model, inputs, threads, kernels, cache_dir):
        self.exe, self.model, self.inputs, self.threads = exe, model, inputs, threads
        self.kernels, self.cache_dir = kernels, cache_dir
        self.tuning_log = None
        self.outputs = None

    def _run(self, repeat, out_dir=None):
        """Timings JSON of one `kiln run` process (and its outputs when out_dir is given)."""
        with tempfile.TemporaryDirectory() as tmp:
            tj = os.path.join(tmp, "timings.json")
            cmd = [self.exe, "run", self.model, "--inputs", self.inputs, "--repeat", str(repeat),
                   "--threads", str(self.threads), "--executor", "sequential",
                   "--timings-json", tj]
            if self.kernels:
                cmd += ["--kernels", self.kernels]
            if self.tuning_log:
                cmd += ["--tuning-log", self.tuning_log]
            if out_dir:
                cmd += ["--output-dir", out_dir]
            env = dict(os.environ, KILN_CACHE_DIR=self.cache_dir)
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                raise RuntimeError(f"{shlex.join(cmd)} exited {proc.returncode}:\n"
                                   f"{proc.stderr.strip()}")
            with open(tj) as f:
                return json.load(f)

    def startup(self):
        """Load to first result (s): a process on this engine's cache as it is."""
        t = self._run(1)
        return (t["load_ms"] + t["first_run_ms"]) / 1e3

    def timed_runs(self, repeat, names=None):
        """`repeat` run times (ms); with `names`, also keeps the outputs (self.outputs)."""
        if names is None:
            return self._run(repeat)["runs_ms"]
        with tempfile.TemporaryDirectory() as out:
            ms = self._run(repeat, out)["runs_ms"]
            # Kiln writes each output to a sanitized file name ('/' -> '_'): see zoo_ab.py.
            files = dict(zip(names, zoo_ab.kiln_output_files(list(names))))
            self.outputs = {n: np.load(os.path.join(out, f)) for n, f in files.items()
                            if os.path.exists(os.path.join(out, f))}
        return ms


class _InProcess:
    """An engine in this process: `_infer()` runs once; creation + first run is start-up."""

    def timed_runs(self, repeat, names=None):
        self._infer()  # warm-up of this round
        ms = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            self._infer()
            ms.append((time.perf_counter() - t0) * 1e3)
        return ms


class OnnxRuntime(_InProcess):
    name = "ort"

    def __init__(self, model, feed, threads):
        import onnxruntime as ort
        t0 = time.perf_counter()
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        self.feed = feed
        self.names = [o.name for o in self.sess.get_outputs()]
        self.outputs = dict(zip(self.names, self.sess.run(self.names, feed)))
        self.startup_s = time.perf_counter() - t0

    def _infer(self):
        self.sess.run(self.names, self.feed)


class OpenVino(_InProcess):
    name = "openvino"

    def __init__(self, model, feed, threads):
        import openvino as ov
        t0 = time.perf_counter()
        compiled = ov.Core().compile_model(model, "CPU", {
            "INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY",
            "INFERENCE_NUM_THREADS": threads})
        self.request = compiled.create_infer_request()
        self.feed = feed
        self._infer()
        self.startup_s = time.perf_counter() - t0

    def _infer(self):
        self.request.infer(self.feed, share_inputs=True)


def have_openvino():
    try:
        import openvino  # noqa: F401
        return True
    except ImportError:
        return False


# ---- measurement -----------------------------------------------------------------------------

def model_files(name, batch, args):
    """(model path, inputs npz) of a generated model (make_models) or a zoo model (export_zoo)."""
    if name not in export_zoo.ZOO:
        return batch_variants.write_batched(name, args.models_dir, batch, make_models.write_test_model)
    path, inputs = export_zoo.model_file(args.zoo_dir, name, batch)
    if not (os.path.exists(path) and os.path.exists(inputs)):
        cmd = [EXPORT_PYTHON, os.path.join(REPO, "scripts", "export_zoo.py"), "--out", args.zoo_dir,
               "--only", name, "--batch", str(batch)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{shlex.join(cmd)} exited {proc.returncode}:\n{proc.stderr.strip()[-2000:]}")
    return path, inputs


def compare(kiln_outs, ort_outs):
    """'' when every ORT output is matched within tolerance, else what differs."""
    bad = []
    for n, ref in ort_outs.items():
        got = kiln_outs.get(n)
        if got is None or got.shape != ref.shape:
            bad.append(f"{n}: shape {None if got is None else got.shape} vs {ref.shape}")
            continue
        atol = ATOL * max(1.0, float(np.abs(ref).max()))
        if not np.allclose(got, ref, rtol=RTOL, atol=atol):
            bad.append(f"{n}: max abs err {float(np.abs(got - ref).max()):.3g}")
    return "; ".join(bad)


def runs_this_round(args, r, ms_so_far):
    """Timed runs of one engine in round r: --repeat, but at most 3 in round 0 (which measures
    how long a run takes) and afterwards as many as fit in --budget seconds (at least 1), so a
    configuration where a run takes seconds does not take hours."""
    if r == 0:
        return min(args.repeat, 3)
    per_run_s = float(np.median(ms_so_far)) / 1e3
    return max(1, min(args.repeat, int(args.budget / max(per_run_s, 1e-9))))


def stats(ms):
    return (float(np.median(ms)), float(np.percentile(ms, 90))) if ms else None


def measure_config(args, name, threads, batch, cache_dir, use_ov, log):
    """One row: {engine: (median, p90)}, GFLOP, output check, peer start-up times."""
    path, inputs = model_files(name, batch, args)
    with np.load(inputs) as z:
        feed = {k: z[k] for k in z.files}
    engines = [Kiln(args.kiln, path, inputs, threads, args.kiln_kernels, cache_dir),
               OnnxRuntime(path, feed, threads)]
    if use_ov:
        try:
            engines.append(OpenVino(path, feed, threads))
        except Exception as e:  # a model OpenVINO cannot convert: its column stays empty
            log(f"  {name}: OpenVINO cannot run it: {str(e).strip().splitlines()[-1][:200]}")
    if args.kiln_tuning_log:  # Kiln with kiln tune's log, beside the untuned Kiln, in the same rounds
        tuned = Kiln(args.kiln, path, inputs, threads, args.kiln_kernels, cache_dir)
        tuned.name, tuned.tuning_log = "kiln_tuned", args.kiln_tuning_log
        engines.append(tuned)
    if args.kiln_before:  # another Kiln build (the code before a change), in the same rounds
        before = Kiln(args.kiln_before, path, inputs, threads, args.kiln_kernels,
                      args.kiln_before_cache or cache_dir)
        before.name = "kiln_before"
        engines.append(before)
    ort = engines[1]
    # One untimed process per Kiln build first: its kernels compile into the run's fresh cache
    # here, not in round 0, where every engine's few runs that followed a cold compile read up to
    # 2x slow (mnasnet: Kiln 4.0 and ORT 2.8 ms against minima of 1.9 and 1.8).
    for e in engines:
        if e.name.startswith("kiln"):
            e.startup()
    times = {e.name: [] for e in engines}
    for r in range(args.rounds):
        k = r % len(engines)
        for e in engines[k:] + engines[:k]:  # rotate who goes first
            names = ort.names if (e.name.startswith("kiln") and r == 0) else None
            times[e.name] += e.timed_runs(runs_this_round(args, r, times[e.name]), names)
    row = {"model": name, "threads": threads, "batch": batch,
           "gflop": flops.model_flops(path) / 1e9,
           "check": compare(engines[0].outputs, ort.outputs),
           "startup": {e.name: e.startup_s for e in engines[1:] if not e.name.startswith("kiln")}}
    row.update({e: stats(ms) for e, ms in times.items()})
    row["kiln_runs"] = len(times["kiln"])
    if args.kiln_tuning_log:
        row["check_tuned"] = compare(engines[-1].outputs, ort.outputs)
        if row["check_tuned"]:
            log(f"  {name} T={threads} B={batch}: tuned Kiln differs from ORT: {row['check_tuned']}")
    if row["check"]:
        log(f"  {name} T={threads} B={batch}: Kiln differs from ORT: {row['check']}")
    return row


def kernel_rooflines(args, name, threads, batch, cache_dir, peaks, bandwidth):
    """The model's kernels against their rooflines (bench/roofline.py): the slowest kernel and
    those below 10% of their roofline."""
    path, inputs = model_files(name, batch, args)
    steps = roofline.profile_steps(args.kiln, path, inputs, threads, 3, cache_dir)
    rated = roofline.rate(steps, peaks[threads][0], bandwidth)
    return {"top": roofline.describe(rated[0]) if rated else "-",
            "flagged": [roofline.describe(s) for s in roofline.flagged(rated)]}


def kiln_startup(args, name, threads, batch, cache_dir):
    """(cold s, warm s) of Kiln with an empty then warm cache_dir."""
    path, inputs = model_files(name, batch, args)
    shutil.rmtree(cache_dir, ignore_errors=True)
    os.makedirs(cache_dir)
    k = Kiln(args.kiln, path, inputs, threads, args.kiln_kernels, cache_dir)
    return k.startup(), k.startup()


# ---- tables ----------------------------------------------------------------------------------

def ms_str(ms):
    return f"{ms:.3f}" if ms >= 1 else f"{ms:.4f}"


def fmt_ms(s):
    return f"{ms_str(s[0])} / {ms_str(s[1])}" if s else "-"


def latency_table(rows, peaks):
    out = ["| model | T | batch | GFLOP | Kiln ms p50 / p90 | ORT ms p50 / p90 | "
           "OpenVINO ms p50 / p90 | Kiln / best peer | Kiln GFLOP/s | % of peak | Kiln runs |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if r.get("failed"):
            out.append(f"| {r['model']} | {r['threads']} | {r['batch']} | - | failed (see the "
                       "run's log) | - | - | - | - | - | - |")
            continue
        k = r["kiln"][0]
        peers = [r[e][0] for e in ("ort", "openvino") if r.get(e)]
        gflops = r["gflop"] / (k / 1e3)
        ratio = f"{k / min(peers):.2f}" + (" MISMATCH" if r["check"] else "")
        out.append(f"| {r['model']} | {r['threads']} | {r['batch']} | {r['gflop']:.3g} | "
                   f"{fmt_ms(r['kiln'])} | {fmt_ms(r['ort'])} | {fmt_ms(r.get('openvino'))} | "
                   f"{ratio} | {gflops:.1f} | {100 * gflops / peaks[r['threads']][0]:.1f} | "
                   f"{r['kiln_runs']} |")
    return "\n".join(out)


def before_table(rows):
    """Kiln now against the --kiln-before build, measured in the same rounds."""
    out = ["| model | T | batch | Kiln before ms p50 | Kiln now ms p50 | now / before |",
           "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        if r.get("failed") or not r.get("kiln_before"):
            continue
        b, k = r["kiln_before"][0], r["kiln"][0]
        out.append(f"| {r['model']} | {r['threads']} | {r['batch']} | {ms_str(b)} | {ms_str(k)} | {k / b:.2f} |")
    return "\n".join(out)


def geomean_table(rows):
    """Per (threads, batch): the geometric mean of Kiln / best peer and the worst model."""
    groups = {}
    for r in rows:
        if r.get("failed"):
            continue
        peers = [r[e][0] for e in ("ort", "openvino") if r.get(e)]
        groups.setdefault((r["threads"], r["batch"]), []).append((r["kiln"][0] / min(peers), r["model"]))
    out = ["| T | batch | models | geometric mean Kiln / best peer | worst (model) | models above 1.3x |",
           "|---:|---:|---:|---:|---:|---|"]
    for (t, b), ratios in sorted(groups.items()):
        gm = float(np.exp(np.mean([np.log(x) for x, _ in ratios])))
        worst = max(ratios)
        above = ", ".join(f"{m} {x:.2f}" for x, m in sorted(ratios, reverse=True) if x > 1.3) or "-"
        out.append(f"| {t} | {b} | {len(ratios)} | {gm:.2f} | {worst[0]:.2f} ({worst[1]}) | {above} |")
    return "\n".join(out)


def holdback_table(rows, bandwidth):
    """Per zoo row: the kernel that takes most of Kiln's time and the kernels below 10% of their
    roofline (bench/roofline.py)."""
    out = [f"What holds each model back (bench/roofline.py; bandwidth {bandwidth:.1f} GB/s, the "
           "FP32 peak above): the slowest kernel, and every kernel below 10% of its roofline that "
           "takes at least 1% of the run.", "",
           "| model | T | batch | Kiln / best peer | slowest kernel | kernels below 10% of roofline |",
           "|---|---:|---:|---:|---|---|"]
    for r in rows:
        if r.get("failed") or "roofline" not in r:
            continue
        peers = [r[e][0] for e in ("ort", "openvino") if r.get(e)]
        flagged = "; ".join(r["roofline"]["flagged"][:3]) or "-"
        more = len(r["roofline"]["flagged"]) - 3
        if more > 0:
            flagged += f"; and {more} more"
        out.append(f"| {r['model']} | {r['threads']} | {r['batch']} | {r['kiln'][0] / min(peers):.2f} | "
                   f"{r['roofline']['top']} | {flagged} |")
    return "\n".join(out)


def startup_table(startup):
    out = ["| model | Kiln cold s | Kiln warm s | ORT s | OpenVINO s |",
           "|---|---:|---:|---:|---:|"]
    for name, s in startup.items():
        ov = s.get("openvino")
        out.append(f"| {name} | {s['kiln_cold']:.3f} | {s['kiln_warm']:.3f} | {s['ort']:.3f} | "
                   f"{'-' if ov is None else f'{ov:.3f}'} |")
    return "\n".join(out)


def report(args, argv, rows, startup, peaks, versions):
    peak_txt = ", ".join(f"{p[0]:.1f} GFLOP/s at {t} thread{'s' if t > 1 else ''} ({p[1]})"
                         for t, p in sorted(peaks.items()))
    cpu = cpu_name()
    lines = [
        f"Measured {datetime.date.today().isoformat()} on {cpu}, {os.cpu_count()} logical CPUs "
        f"({platform.machine()}); measured FP32 peak (bench/fma_peak.c): {peak_txt}. "
        f"{versions}.",
        "",
        "```",
        "build/peers-venv/bin/python bench/peers.py " + shlex.join(argv),
        "```",
        "",
        f"Latency: median and p90 over {args.rounds} rounds of up to {args.repeat} timed runs per "
        f"engine (round 0: up to 3; later rounds: as many as fit in {args.budget:g} s, at least "
        "1; `Kiln runs` = Kiln's total), engines interleaved round by round. Kiln / best peer "
        "below 1: Kiln is faster.",
        "",
        latency_table(rows, peaks),
    ]
    if startup:
        lines += ["", "Start-up: load to first result (Kiln: empty kernel cache = cold, then "
                  "warm; ORT / OpenVINO: session creation + first run).", "",
                  startup_table(startup)]
    return "\n".join(lines)


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def write_docs(path, text, begin=BEGIN, end=END,
               heading="CPU: Kiln vs ONNX Runtime and OpenVINO (`bench/peers.py`)"):
    """Replaces the block between `begin` and `end` in the page at `path` with `text`; a page
    without the markers gets a new section `## heading` at its end."""
    with open(path) as f:
        page = f.read()
    block = f"{begin}\n{text}\n{end}"
    if begin in page and end in page:
        page = page[:page.index(begin)] + block + page[page.index(end) + len(end):]
    else:
        page = page.rstrip("\n") + f"\n\n## {heading}\n\n{block}\n"
    with open(path, "w") as f:
        f.write(page)


# ---- main ------------------------------------------------------------------------------------

def smoke(args, log):
    """Every model through Kiln and ORT once (OpenVINO too when installed); outputs must match.
    Uses $KILN_CACHE_DIR when set (scripts/test.sh's warm cache), else a temporary cache."""
    peaks = fma_peak.measure_peak([1], tries=1)
    log(f"peak 1 thread: {peaks[1][0]:.1f} GFLOP/s ({peaks[1][1]})")
    use_ov = have_openvino() and not args.no_openvino
    if args.batches is None:  # the default: batch 1, and the mlp at batch 8 (a batch variant)
        configs = [(n, 1) for n in args.models.split(",")] + ([] if args.zoo else [("mlp", 8)])
    else:
        configs = [(n, int(b)) for n in args.models.split(",") for b in args.batches.split(",")]
    own_cache = None if os.environ.get("KILN_CACHE_DIR") else tempfile.mkdtemp(prefix="kiln_smoke_")
    failed = []
    try:
        for name, batch in configs:
            t0 = time.time()
            try:
                row = measure_config(args, name, 1, batch, own_cache or os.environ["KILN_CACHE_DIR"],
                                     use_ov, log)
            except RuntimeError as e:  # a model Kiln cannot run: a failure of the smoke run
                log(f"  {name} batch {batch}: FAILED: {str(e)[-1500:]}")
                failed.append(f"{name} batch {batch}")
                continue
            log(f"  {name} batch {batch}: {row['gflop']:.3g} GFLOP, "
                f"{'outputs match ORT' if not row['check'] else 'MISMATCH ' + row['check']} "
                f"({time.time() - t0:.1f} s)")
            if row["check"]:
                failed.append(f"{name} batch {batch}")
    finally:
        if own_cache:
            shutil.rmtree(own_cache, ignore_errors=True)
    if failed:
        log(f"bench smoke: Kiln differs from ONNX Runtime on {', '.join(failed)}")
        return 1
    log("bench smoke: ok")
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kiln", default=os.environ.get("KILN_BIN",
                                                     os.path.join(REPO, "build", "bin", "kiln")))
    ap.add_argument("--models-dir", default=os.path.join(REPO, "build", "models"))
    ap.add_argument("--models", default=None, help=f"default {DEFAULT_MODELS}")
    ap.add_argument("--zoo", action="store_true",
                    help="the zoo of scripts/export_zoo.py instead of the five benchmark models "
                         "(--models then picks among the zoo's names); the table goes between the "
                         "zoo markers of docs/benchmarks.md")
    ap.add_argument("--zoo-dir", default=os.path.join(REPO, "build", "zoo"),
                    help="where the zoo models are (exported there when missing)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batches", default=None, help="default 1,8 (--smoke: 1, and mlp at 8)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds per configuration")
    ap.add_argument("--repeat", type=int, default=10,
                    help="timed runs per engine per round (round 0: at most 3)")
    ap.add_argument("--budget", type=float, default=20.0,
                    help="seconds of timed runs per engine per round after round 0: fewer "
                         "runs than --repeat (at least 1) where a run is slow")
    ap.add_argument("--kiln-kernels", default=None, help="pass `--kernels X` to kiln run")
    ap.add_argument("--kiln-tuning-log", default=None, help="pass `--tuning-log FILE` to kiln run (kiln tune's log)")
    ap.add_argument("--kiln-before", default=None,
                    help="another Kiln binary (the build before a change) timed in the same rounds; "
                         "the report adds now / before per model")
    ap.add_argument("--kiln-before-cache", default=None,
                    help="the --kiln-before build's kernel cache (default: the run's own; give one it has "
                         "filled to keep its compiles out of the run)")
    ap.add_argument("--no-openvino", action="store_true")
    ap.add_argument("--no-startup", action="store_true", help="skip the start-up table")
    ap.add_argument("--no-docs", action="store_true", help=f"do not rewrite {DOCS}")
    ap.add_argument("--docs", default=DOCS)
    ap.add_argument("--smoke", action="store_true",
                    help=f"CI check: models ({SMOKE_MODELS}) once through Kiln and ORT, "
                         "outputs compared, nothing timed or written")
    args = ap.parse_args(argv)
    if args.zoo:
        args.models = args.models or ",".join(export_zoo.ZOO)
    args.models = args.models or (SMOKE_MODELS if args.smoke else DEFAULT_MODELS)
    if not args.smoke:
        args.batches = args.batches or "1,8"
    if not os.access(args.kiln, os.X_OK):
        ap.error(f"Kiln CLI not found at {args.kiln} (build it, or set KILN_BIN / --kiln)")
    known = export_zoo.ZOO if args.zoo else make_models.ALL_MODELS
    unknown = [n for n in args.models.split(",") if n not in known]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; known: {', '.join(known)}")

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    if args.smoke:
        args.rounds, args.repeat = 1, 1
        return smoke(args, log)

    thread_counts = [int(t) for t in args.threads.split(",")]
    batches = [int(b) for b in args.batches.split(",")]
    use_ov = not args.no_openvino and have_openvino()
    if not use_ov and not args.no_openvino:
        log("OpenVINO not importable: its columns stay empty (bench/setup_peers.sh installs it)")
    import onnxruntime
    versions = f"ONNX Runtime {onnxruntime.__version__}"
    if use_ov:
        import openvino
        versions += f", OpenVINO {openvino.__version__.split('-')[0]}"
    if args.kiln_kernels:
        versions += f", Kiln `--kernels {args.kiln_kernels}`"
    log("measuring the FP32 peak (bench/fma_peak.c)")
    peaks = fma_peak.measure_peak(thread_counts, tries=3)
    for t, (g, isa) in sorted(peaks.items()):
        log(f"  {t} thread(s): {g:.1f} GFLOP/s ({isa})")

    bandwidth = roofline.measure_bandwidth_gbs() if args.zoo else None
    cache_root = tempfile.mkdtemp(prefix="kiln_peers_cache_")
    rows, startup = [], {}
    try:
        for name in args.models.split(","):
            cache = os.path.join(cache_root, name)
            os.makedirs(cache, exist_ok=True)
            if not args.no_startup:
                cold, warm = kiln_startup(args, name, thread_counts[0], batches[0], cache)
                startup[name] = {"kiln_cold": cold, "kiln_warm": warm}
                log(f"{name}: Kiln start-up cold {cold:.3f} s, warm {warm:.3f} s")
            for batch in batches:
                for t in thread_counts:
                    try:
                        row = measure_config(args, name, t, batch, cache, use_ov, log)
                    except RuntimeError as e:  # a failing kiln run: say so, go on
                        log(f"{name} T={t} B={batch}: failed: {e}")
                        rows.append({"model": name, "threads": t, "batch": batch, "failed": 1})
                        continue
                    if args.zoo:
                        row["roofline"] = kernel_rooflines(args, name, t, batch, cache, peaks, bandwidth)
                    if name in startup and batch == batches[0] and t == thread_counts[0]:
                        startup[name].update(row["startup"])
                    rows.append(row)
                    peers = ", ".join(f"{e} {row[e][0]:.3f}" for e in ("kiln_tuned", "ort", "openvino")
                                      if row.get(e))
                    log(f"{name} T={t} B={batch}: kiln {row['kiln'][0]:.3f} ms, {peers}")
    finally:
        shutil.rmtree(cache_root, ignore_errors=True)
    text = report(args, argv, rows, startup, peaks, versions)
    if args.zoo:
        text += "\n\n" + geomean_table(rows) + "\n\n" + holdback_table(rows, bandwidth)
    if args.kiln_before:
        text += "\n\nKiln now against `--kiln-before` (another build, same rounds):\n\n" + before_table(rows)
    print(text)
    if not args.no_docs:
        if args.zoo:
            write_docs(args.docs, text, ZOO_BEGIN, ZOO_END,
                       heading="The zoo: Kiln vs ONNX Runtime and OpenVINO (`bench/peers.py --zoo`)")
        else:
            write_docs(args.docs, text)
        log(f"wrote {args.docs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
