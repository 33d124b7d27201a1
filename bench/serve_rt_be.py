#!/usr/bin/env python3
"""Real-time + best-effort on CPU (REEF, OSDI 2022, on Kiln's server): does a real-time (RT)
model keep its latency while best-effort (BE) work saturates the machine, and what does BE keep?

One repository, two models: RT (default mobilenetv2 at batch 1, a few ms; config parameter
priority "realtime", and every RT request carries the KServe parameter priority 1) and BE
(default bert_base, tens of ms per run; priority "best_effort", requests priority 2). Two
`kiln serve` processes on it, both at --threads T: the default (preemption on) and one started
with `--no-preemption`. Per round, in an order that rotates each round:

  (a) rt_alone   RT requests at --rt-rate per second (open loop: fixed send times, latency from
                 the scheduled time), preempting server: RT p50 / p99.
  (b) be_alone   BE closed loop, --be-concurrency connections (the server always has BE work
                 queued), preempting server: BE inferences/s.
  (c) rt_be      (a) and (b) at once on the preempting server: RT p99, BE inferences/s; the
                 server's kiln_preemption_latency_us histogram and kiln_preemptions_total over
                 the phase (scraped before and after).
  (d) rt_be_nopre  the same on the `--no-preemption` server: RT p99 for comparison.

RT and BE clients are separate processes (no shared interpreter lock between them). BE starts
--be-lead s before the RT window and runs until it ends; throughput counts BE answers inside
the window. Each figure is the median over rounds; the ratios are RT p99 (c) / (a) (target
<= 1.05), BE (c) / (b) (target >= 0.70), and (d) / (a). Preemption latency p50 / p99 come from
the histogram's buckets accumulated over all rounds' (c) phases (Prometheus' histogram_quantile:
linear inside a bucket, so the bucket bounds limit the resolution).

    build/peers-venv/bin/python bench/serve_rt_be.py                     # the full run
    build/peers-venv/bin/python bench/serve_rt_be.py --rounds 2 --seconds 10 --no-docs
    python3 bench/serve_rt_be.py --smoke          # CI: small models, answers checked, untimed

--smoke checks, on small models and a few seconds of load: every RT and BE request answered
200, and every BE answer under preemption equal to ONNX Runtime's (a preempted run that was
resumed or restarted must give the unpreempted result), and /metrics exporting the preemption
counters. The table goes into docs/serving_benchmarks.md between `serve-rt-be:begin/end`.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import multiprocessing
import os
import shlex
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import serve_client  # noqa: E402
import serve_procs  # noqa: E402
import serve_repo  # noqa: E402

DOCS = os.path.join(REPO, "docs", "serving_benchmarks.md")
BEGIN, END = "<!-- serve-rt-be:begin -->", "<!-- serve-rt-be:end -->"
PREEMPT_HIST = "kiln_preemption_latency_us"
PREEMPT_COUNT = "kiln_preemptions_total"
RT_PRIORITY, BE_PRIORITY = 1, 2
RTOL, ATOL = 2e-3, 5e-4


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---- client processes (top-level functions: they run in a spawned worker) ---------------------

def rt_load(addr, models_dir, model, rate, seconds, delay, workers):
    feed = serve_repo.model_inputs(models_dir, model)
    req = serve_client.Request("rt", feed, priority=RT_PRIORITY)
    time.sleep(delay)
    load = serve_client.open_loop(addr, req, rate, seconds, workers=workers)
    return load.records, load.seconds, load.batch


def be_load(addr, models_dir, model, batch, concurrency, seconds, lead, check):
    """BE closed loop; with `check`, each answer is compared with ONNX Runtime's and a wrong
    one is recorded with status -1."""
    feed = serve_repo.batch_feed(models_dir, model, batch)
    req = serve_client.Request("be", feed, priority=BE_PRIORITY)
    verify = None
    if check:
        ref = reference(models_dir, model, feed)

        def verify(outs):
            return all(n in outs and np.allclose(outs[n], r, rtol=RTOL,
                                                 atol=ATOL * max(1.0, float(np.abs(r).max())))
                       for n, r in ref.items())
    load = serve_client.closed_loop(addr, req, concurrency, seconds, warmup=lead, verify=verify)
    return load.records, load.seconds, load.batch


def reference(models_dir, model, feed):
    import onnxruntime as ort
    path = serve_repo.dynamic_batch_model(models_dir, model)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feed)))


# ---- phases ------------------------------------------------------------------------------------

def run_phase(pool, args, server, rt, be, server_side=None):
    """(RT Load or None, BE Load or None, preemption histogram delta, preemptions delta, the
    metrics after); `server_side` (a dict) receives the RT queue / compute p99 (us) from the
    server's histograms."""
    server_side = {} if server_side is None else server_side
    before = server.metrics()
    futs = {}
    if be:
        futs["be"] = pool.submit(be_load, server.addr, args.models_dir, args.be_model,
                                 args.be_batch, args.be_concurrency,
                                 args.seconds + (0.5 if rt else 0.0), args.be_lead, args.smoke)
    if rt:
        futs["rt"] = pool.submit(rt_load, server.addr, args.models_dir, args.rt_model,
                                 args.rt_rate, args.seconds, args.be_lead if be else 0.0,
                                 args.rt_workers)
    loads = {k: serve_client.Load(*f.result()) for k, f in futs.items()}
    after = server.metrics()
    hist = serve_procs.histogram_delta(serve_procs.histogram(after, PREEMPT_HIST),
                                       serve_procs.histogram(before, PREEMPT_HIST))
    count = (serve_procs.metric_sum(after, PREEMPT_COUNT)
             - serve_procs.metric_sum(before, PREEMPT_COUNT))
    # The server's own view of RT latency (finer than the client's, which includes the
    # client's and the OS's scheduling): queue wait and compute time of the RT model.
    for fam, key in (("kiln_queue_duration_us", "rt_queue_p99_us"),
                     ("kiln_compute_duration_us", "rt_compute_p99_us")):
        h = serve_procs.histogram_delta(serve_procs.histogram(after, fam, model="rt"),
                                        serve_procs.histogram(before, fam, model="rt"))
        server_side[key] = serve_procs.histogram_quantile(h, 0.99)
    return loads.get("rt"), loads.get("be"), hist, count, after


def failures(load):
    return {s: n for s, n in load.counts().items() if s != 200} if load else {}


PHASES = [("rt_alone", "pre", True, False), ("be_alone", "pre", False, True),
          ("rt_be", "pre", True, True), ("rt_be_nopre", "nopre", True, True)]


def measure(args, servers, pool):
    res = {p[0]: {"rt_p50": [], "rt_p99": [], "be_tput": [], "fail": {}, "rt_queue_p99_us": [],
                  "rt_compute_p99_us": []} for p in PHASES}
    hist_total, preemptions = {}, 0.0
    for r in range(args.rounds):
        k = r % len(PHASES)
        for name, srv, rt, be in PHASES[k:] + PHASES[:k]:
            side = {}
            rt_l, be_l, hist, count, _ = run_phase(pool, args, servers[srv], rt, be, side)
            row = res[name]
            for key, v in side.items():
                if v is not None and rt:
                    row[key].append(v)
            msg = f"round {r} {name}:"
            if rt_l:
                row["rt_p50"].append(rt_l.latency_ms(50))
                row["rt_p99"].append(rt_l.latency_ms(99))
                msg += f" RT p50 {rt_l.latency_ms(50):.2f} ms p99 {rt_l.latency_ms(99):.2f} ms"
            if be_l:
                row["be_tput"].append(be_l.throughput())
                msg += f" BE {be_l.throughput():.2f} inf/s"
            for load in (rt_l, be_l):
                for s, n in failures(load).items():
                    row["fail"][s] = row["fail"].get(s, 0) + n
            if name == "rt_be":
                for le, c in hist:
                    hist_total[le] = hist_total.get(le, 0.0) + c
                preemptions += count
                msg += f", {count:.0f} preemptions"
            log(msg + (f", failures {row['fail']}" if row["fail"] else ""))
    return res, sorted(hist_total.items()), preemptions


def med(xs):
    return float(np.median(xs)) if xs else float("nan")


def report(args, argv, res, hist, preemptions):
    a, b, c, d = (res[p] for p in ("rt_alone", "be_alone", "rt_be", "rt_be_nopre"))
    rt_ratio = med(c["rt_p99"]) / med(a["rt_p99"])
    nopre_ratio = med(d["rt_p99"]) / med(a["rt_p99"])
    be_ratio = med(c["be_tput"]) / med(b["be_tput"])
    be_nopre_ratio = med(d["be_tput"]) / med(b["be_tput"])
    p50 = serve_procs.histogram_quantile(hist, 0.50)
    p99 = serve_procs.histogram_quantile(hist, 0.99)

    def us(v):
        return "not exported" if v is None else f"{v:.1f}"

    def fail(row):
        return ", ".join(f"{n} x HTTP {s}" for s, n in sorted(row["fail"].items())) or "none"
    rows = [
        "| phase | RT p50 ms | RT p99 ms | server: RT queue p99 ms | server: RT compute p99 ms "
        "| BE inf/s | failures |",
        "|---|---:|---:|---:|---:|---:|---|"]
    for name, row in res.items():
        rows.append(f"| {name} | {med(row['rt_p50']):.2f} | {med(row['rt_p99']):.2f} | "
                    f"{med(row['rt_queue_p99_us']) / 1e3:.2f} | "
                    f"{med(row['rt_compute_p99_us']) / 1e3:.2f} | "
                    f"{med(row['be_tput']):.2f} | {fail(row)} |")
    targets = [
        "| figure | measured | target |", "|---|---:|---:|",
        f"| RT p99 with BE / RT p99 alone (preemption on) | {rt_ratio:.3f} | <= 1.05 |",
        f"| BE inf/s with RT / BE alone (preemption on) | {be_ratio:.3f} | >= 0.70 |",
        f"| RT p99 with BE / RT p99 alone, `--no-preemption` | {nopre_ratio:.3f} | (comparison) |",
        f"| BE inf/s with RT / BE alone, `--no-preemption` | {be_nopre_ratio:.3f} | (comparison) |",
        f"| preemption latency p50 / p99 us | {us(p50)} / {us(p99)} | p99 < 100 |",
        f"| preemptions during the rt_be phases | {preemptions:.0f} | |"]
    return "\n".join([
        f"Measured {datetime.date.today().isoformat()} on {os.cpu_count()} logical CPUs; "
        f"`kiln serve --threads {args.threads}`. RT: {args.rt_model} batch 1 at "
        f"{args.rt_rate:g}/s (open loop); BE: {args.be_model} batch {args.be_batch}, "
        f"{args.be_concurrency} connections (closed loop). Medians over {args.rounds} "
        f"interleaved rounds of {args.seconds:g} s per phase.", "",
        "```", "build/peers-venv/bin/python bench/serve_rt_be.py " + shlex.join(argv), "```", "",
        "\n".join(targets), "", "\n".join(rows), "",
        "RT p50 / p99: the client's (from each request's scheduled send time to its answer); "
        "the server's RT queue and compute p99 come from its kiln_queue_duration_us and "
        "kiln_compute_duration_us histograms (doubling buckets, so coarse).", "",
        "Preemption latency histogram (us, cumulative counts over the rt_be phases): "
        + (", ".join(f"le {le:g}: {c:.0f}" for le, c in hist) or "none exported") + "."])


def smoke(args, servers, pool):
    """Both servers, RT + BE at once for a few seconds: all answered, BE answers correct."""
    problems = []
    for key in ("pre", "nopre"):
        rt_l, be_l, hist, count, samples = run_phase(pool, args, servers[key], True, True)
        for label, load in (("RT", rt_l), ("BE", be_l)):
            bad = failures(load)
            if bad or not load.records:
                problems.append(f"{key}: {label} requests not all answered 200 "
                                f"({load.counts()}; -1 = a BE answer that differs from ORT)")
        names = {n for n, _, _ in samples}
        # A family without samples is not printed: the preempting server must have preempted
        # (BE runs nearly all the time, so some RT request lands on a running BE run), the
        # other must not have.
        if args.ort_as_kiln:
            pass
        elif key == "pre" and (count <= 0 or PREEMPT_HIST + "_bucket" not in names):
            problems.append(f"{key}: no preemption counted ({PREEMPT_COUNT} +{count:.0f}, "
                            f"{PREEMPT_HIST} {'present' if PREEMPT_HIST + '_bucket' in names else 'absent'})")
        elif key == "nopre" and count != 0:
            problems.append(f"{key}: {count:.0f} preemptions with --no-preemption")
        log(f"smoke {key}: RT {rt_l.counts()}, BE {be_l.counts()}, {count:.0f} preemptions")
    for p in problems:
        log(f"FAILED {p}")
    log("serve_rt_be smoke: " + ("FAILED" if problems else "ok"))
    return 1 if problems else 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kiln", default=os.environ.get("KILN_BIN",
                                                     os.path.join(REPO, "build", "bin", "kiln")))
    ap.add_argument("--models-dir", default=os.path.join(REPO, "build", "models"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rt-model", default=None, help="default mobilenetv2 (--smoke: mobilenetv2_96)")
    ap.add_argument("--rt-rate", type=float, default=None, help="RT requests/s (default 25)")
    ap.add_argument("--rt-workers", type=int, default=4, help="RT client connections")
    ap.add_argument("--rt-threads", type=int, default=None,
                    help="the RT model's config parameter 'threads' (default: the server's)")
    ap.add_argument("--be-model", default=None, help="default bert_base (--smoke: resnet18)")
    ap.add_argument("--be-batch", type=int, default=1)
    ap.add_argument("--be-fixed-shape", action="store_true",
                    help="serve the BE model as it is (max_batch_size 0), for a model whose batch "
                         "dimension cannot be made symbolic (a Reshape to a fixed batch of 1)")
    ap.add_argument("--be-concurrency", type=int, default=2)
    ap.add_argument("--be-lead", type=float, default=2.0,
                    help="seconds BE runs before the RT window opens")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=None, help="per phase (default 20)")
    ap.add_argument("--extra-kiln-args", default="", help="more `kiln serve` flags for both")
    ap.add_argument("--no-docs", action="store_true")
    ap.add_argument("--docs", default=DOCS)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--ort-as-kiln", action="store_true",
                    help="harness self-test: ORT servers (no priorities, no metrics) stand in")
    args = ap.parse_args(argv)
    args.rt_model = args.rt_model or ("mobilenetv2_96" if args.smoke else "mobilenetv2")
    args.be_model = args.be_model or ("resnet18" if args.smoke else "bert_base")
    args.rt_rate = args.rt_rate or (20.0 if args.smoke else 25.0)
    args.seconds = args.seconds or (3.0 if args.smoke else 20.0)
    if args.smoke:
        args.be_lead = min(args.be_lead, 1.0)
    if args.be_fixed_shape and args.be_batch != 1:
        ap.error("--be-fixed-shape serves the model's own shape: --be-batch must be 1")
    if not args.ort_as_kiln and not os.access(args.kiln, os.X_OK):
        ap.error(f"Kiln CLI not found at {args.kiln} (build it, or set KILN_BIN / --kiln)")

    entries = [serve_repo.Entry("rt", args.rt_model, max_batch_size=1, priority="realtime",
                                threads=args.rt_threads),
               serve_repo.Entry("be", args.be_model,
                                max_batch_size=0 if args.be_fixed_shape else max(1, args.be_batch),
                                priority="best_effort")]
    extra = shlex.split(args.extra_kiln_args)
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="kiln_rt_be_") as root, \
            concurrent.futures.ProcessPoolExecutor(2, mp_context=ctx) as pool:
        repo = serve_repo.write_repository(os.path.join(root, "repo"), entries, args.models_dir)
        if args.ort_as_kiln:
            servers = {k: serve_procs.start_ort(repo, args.threads) for k in ("pre", "nopre")}
        else:
            servers = {"pre": serve_procs.start_kiln(args.kiln, repo, args.threads, extra),
                       "nopre": serve_procs.start_kiln(args.kiln, repo, args.threads,
                                                       extra + ["--no-preemption"])}
        try:
            for s in servers.values():
                s.wait_ready(900, ["rt", "be"])
                log(f"{s.name}: ready on {s.addr[1]}")
            if args.smoke:
                return smoke(args, servers, pool)
            # Warm-up: each server answers RT and BE once (first runs compile).
            for s in servers.values():
                for m, src, b in (("rt", args.rt_model, 1), ("be", args.be_model, args.be_batch)):
                    c = serve_client.Connection(s.addr, timeout=600)
                    st, _, err = c.infer(serve_client.Request(
                        m, serve_repo.batch_feed(args.models_dir, src, b)))
                    c.close()
                    if st != 200:
                        raise RuntimeError(f"{s.name}: warm-up {m}: HTTP {st}: {err}")
            res, hist, preemptions = measure(args, servers, pool)
        finally:
            for s in servers.values():
                s.stop()
    text = report(args, argv, res, hist, preemptions)
    print(text)
    if not args.no_docs:
        import peers
        peers.write_docs(args.docs, text, BEGIN, END,
                         "Real-time + best-effort (REEF on CPU): `bench/serve_rt_be.py`")
        log(f"wrote {args.docs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
