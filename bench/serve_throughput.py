#!/usr/bin/env python3
"""Serving throughput: `kiln serve` vs ONNX Runtime behind a Python KServe v2 server
(bench/ort_kserve_server.py), on ResNet-50 and BERT-base, driven by the same client.

Both servers run at once on the same machine with the same --threads (Kiln: `kiln serve
--threads T`; ORT: intra_op_num_threads T) on repositories of the same model files (a symbolic
batch dimension, max_batch_size --max-batch). Kiln is measured twice: as the client sends
(no dynamic_batching in config.pbtxt) and with the dynamic batcher on (model `<name>_db`:
preferred batch sizes and a queue delay), the ORT server only as the client sends, one session
run per request (it has no batcher; batching is the client's).

A setting is `BxC`: client batch B (rows per request), C connections in a closed loop (each
sends its next request when the last answer arrives; bench/serve_client.py, binary tensor data
over HTTP/1.1 keep-alive). Per round, each (model, setting) runs every server variant in turn,
the order rotating each round; each run is --warmup s unrecorded then --seconds s recorded.
Throughput is inferences (rows) answered per second; each variant's figure is its median over
the rounds, and its best is the best setting's median. `kiln/ort` is Kiln's best over ORT's best
(above 1: Kiln serves more). Before timing, each variant answers one request per batch size
(Kiln compiles each batch size's specialization at its first run), and the servers' outputs are
compared with each other (np.allclose, rtol 2e-3, atol 5e-4 x max|ort|), the batcher's with
rows sent concurrently as single requests.

    bench/setup_peers.sh
    build/peers-venv/bin/python bench/serve_throughput.py                  # the full run
    build/peers-venv/bin/python bench/serve_throughput.py --models resnet50 --settings 1x1,8x2 \\
        --rounds 2 --seconds 5 --no-docs
    build/peers-venv/bin/python bench/serve_throughput.py --smoke          # CI: answers agree

The table goes into docs/serving_benchmarks.md between `serve-throughput:begin/end`.
"""
from __future__ import annotations

import argparse
import datetime
import os
import shlex
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import serve_client  # noqa: E402
from peers import compare  # noqa: E402  (outputs vs the reference, peers.py's tolerance)
import serve_procs  # noqa: E402
import serve_repo  # noqa: E402

DOCS = os.path.join(REPO, "docs", "serving_benchmarks.md")
BEGIN, END = "<!-- serve-throughput:begin -->", "<!-- serve-throughput:end -->"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def parse_settings(text):
    out = []
    for s in text.split(","):
        b, c = s.lower().split("x")
        out.append((int(b), int(c)))
    return out


def repositories(args, root):
    """(ORT repository, Kiln repository): the same model files; Kiln's also has `<m>_db`."""
    ort_entries, kiln_entries = [], []
    for m in args.models:
        ort_entries.append(serve_repo.Entry(m, m, max_batch_size=args.max_batch))
        kiln_entries.append(serve_repo.Entry(m, m, max_batch_size=args.max_batch))
        if not args.no_dynamic_batching:
            pref = [b for b in (2, 4, 8, 16) if b <= args.max_batch]
            kiln_entries.append(serve_repo.Entry(m + "_db", m, max_batch_size=args.max_batch,
                                                 preferred=pref, queue_delay_us=args.queue_delay_us))
    return (serve_repo.write_repository(os.path.join(root, "ort"), ort_entries, args.models_dir),
            serve_repo.write_repository(os.path.join(root, "kiln"), kiln_entries, args.models_dir))


def variants(args, model, servers):
    """[(label, server, served model name)] for one model."""
    out = [("ort", servers["ort"], model), ("kiln", servers["kiln"], model)]
    if not args.no_dynamic_batching:
        out.append(("kiln_db", servers["kiln"], model + "_db"))
    return out


def infer_once(addr, model, feed):
    c = serve_client.Connection(addr, timeout=600)
    try:
        status, outs, err = c.infer(serve_client.Request(model, feed))
    finally:
        c.close()
    if status != 200:
        raise RuntimeError(f"{model} at {addr}: HTTP {status}: {err}")
    return outs


def check_outputs(args, model, vs):
    """Every variant's answer to a batch-2 request vs the ORT server's; the batcher's variant
    also with the rows sent as concurrent single requests. Returns the problems found."""
    feed = serve_repo.batch_feed(args.models_dir, model, 2, seed=1)
    ref = infer_once(vs[0][1].addr, vs[0][2], feed)
    problems = []
    for label, server, name in vs[1:]:
        bad = compare(infer_once(server.addr, name, feed), ref)
        if bad:
            problems.append(f"{model} {label} batch 2: {bad}")
        if label.endswith("_db"):
            rows = [{k: v[i:i + 1] for k, v in feed.items()} for i in range(2)] * 4
            got = [None] * len(rows)

            def one(i):
                got[i] = infer_once(server.addr, name, rows[i])

            ts = [threading.Thread(target=one, args=(i,)) for i in range(len(rows))]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            for i, outs in enumerate(got):
                row_ref = {k: v[i % 2:i % 2 + 1] for k, v in ref.items()}
                bad = compare(outs or {}, row_ref)
                if bad:
                    problems.append(f"{model} {label} concurrent single rows, request {i}: {bad}")
    return problems


def warm(args, model, vs, settings):
    """One request per batch size per variant (compiles), untimed."""
    for b in sorted({b for b, _ in settings}):
        feed = serve_repo.batch_feed(args.models_dir, model, b)
        for label, server, name in vs:
            t0 = time.time()
            infer_once(server.addr, name, feed)
            log(f"  warm {model} {label} batch {b}: {time.time() - t0:.2f} s")


def measure(args, servers):
    """{model: {(b, c): {label: [throughput per round]}}} and p50 latencies alike."""
    settings = parse_settings(args.settings)
    tput, p50 = {}, {}
    for m in args.models:
        vs = variants(args, m, servers)
        warm(args, m, vs, settings)
        problems = check_outputs(args, m, vs)
        for p in problems:
            log(f"  MISMATCH {p}")
        tput[m] = {s: {v[0]: [] for v in vs} for s in settings}
        p50[m] = {s: {v[0]: [] for v in vs} for s in settings}
        tput[m]["problems"] = problems
    for r in range(args.rounds):
        for m in args.models:
            vs = variants(args, m, servers)
            for b, c in settings:
                req = {}
                k = r % len(vs)
                for label, server, name in vs[k:] + vs[:k]:
                    if name not in req:
                        req[name] = serve_client.Request(name, serve_repo.batch_feed(
                            args.models_dir, m, b))
                    load = serve_client.closed_loop(server.addr, req[name], c, args.seconds,
                                                    warmup=args.warmup)
                    bad = {s: n for s, n in load.counts().items() if s != 200}
                    tput[m][(b, c)][label].append(load.throughput())
                    p50[m][(b, c)][label].append(load.latency_ms(50))
                    log(f"round {r} {m} {b}x{c} {label}: {load.throughput():.2f} inf/s, p50 "
                        f"{load.latency_ms(50):.1f} ms" + (f", failures {bad}" if bad else ""))
    return tput, p50


def table(args, tput, p50):
    labels = ["ort", "kiln"] + ([] if args.no_dynamic_batching else ["kiln_db"])
    names = {"ort": "ORT server", "kiln": "Kiln", "kiln_db": "Kiln + dynamic batching"}
    lines = ["| model | batch x conc. | " + " | ".join(f"{names[v]} inf/s (p50 ms)"
                                                       for v in labels) + " |",
             "|---|---|" + "---:|" * len(labels)]
    summary = ["| model | " + " | ".join(f"{names[v]} best inf/s (setting)" for v in labels)
               + " | Kiln / ORT | Kiln + batching / ORT | outputs |",
               "|---|" + "---:|" * (len(labels) + 2) + "---|"]
    for m in args.models:
        best = {}
        for s, per in tput[m].items():
            if s == "problems":
                continue
            cells = []
            for v in labels:
                med = float(np.median(per[v]))
                lat = float(np.median(p50[m][s][v]))
                cells.append(f"{med:.2f} ({lat:.1f})")
                if med > best.get(v, (0, None))[0]:
                    best[v] = (med, s)
            lines.append(f"| {m} | {s[0]}x{s[1]} | " + " | ".join(cells) + " |")
        ort = best["ort"][0]
        ratio = f"{best['kiln'][0] / ort:.2f}" if ort else "-"
        ratio_db = f"{best['kiln_db'][0] / ort:.2f}" if "kiln_db" in best and ort else "-"
        check = "; ".join(tput[m]["problems"]) or "agree"
        summary.append(f"| {m} | " + " | ".join(f"{best[v][0]:.2f} ({best[v][1][0]}x{best[v][1][1]})"
                                                 for v in labels)
                       + f" | {ratio} | {ratio_db} | {check} |")
    return "\n".join(summary), "\n".join(lines)


def report(args, argv, tput, p50):
    import onnxruntime
    summary, detail = table(args, tput, p50)
    return "\n".join([
        f"Measured {datetime.date.today().isoformat()} on {os.cpu_count()} logical CPUs; both "
        f"servers at {args.threads} threads; ONNX Runtime {onnxruntime.__version__} behind "
        "bench/ort_kserve_server.py (a Python KServe v2 server; Triton cannot be installed "
        "here).", "",
        "```", "build/peers-venv/bin/python bench/serve_throughput.py " + shlex.join(argv), "```",
        "",
        f"Closed loop, binary tensor data over HTTP keep-alive; median over {args.rounds} "
        f"interleaved rounds of {args.seconds:g} s (after {args.warmup:g} s warm-up); "
        f"max_batch_size {args.max_batch}; Kiln's batcher: preferred sizes up to "
        f"{args.max_batch}, max queue delay {args.queue_delay_us} us.", "",
        summary, "", detail])


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kiln", default=os.environ.get("KILN_BIN",
                                                     os.path.join(REPO, "build", "bin", "kiln")))
    ap.add_argument("--models-dir", default=os.path.join(REPO, "build", "models"))
    ap.add_argument("--models", default=None, help="default resnet50,bert_base (--smoke: resnet18)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--settings", default="1x1,1x4,4x2,8x1",
                    help="client batch x connections, comma-separated")
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--queue-delay-us", type=int, default=2000)
    ap.add_argument("--no-dynamic-batching", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--no-docs", action="store_true")
    ap.add_argument("--docs", default=DOCS)
    ap.add_argument("--smoke", action="store_true",
                    help="CI: both servers answer, outputs agree; nothing timed or written")
    ap.add_argument("--ort-as-kiln", action="store_true",
                    help="harness self-test: a second ORT server stands in for `kiln serve`")
    args = ap.parse_args(argv)
    args.models = (args.models or ("resnet18" if args.smoke else "resnet50,bert_base")).split(",")
    if not args.ort_as_kiln and not os.access(args.kiln, os.X_OK):
        ap.error(f"Kiln CLI not found at {args.kiln} (build it, or set KILN_BIN / --kiln)")

    with tempfile.TemporaryDirectory(prefix="kiln_serve_tput_") as root:
        ort_repo, kiln_repo = repositories(args, root)
        servers = {"ort": serve_procs.start_ort(ort_repo, args.threads),
                   "kiln": (serve_procs.start_ort(kiln_repo, args.threads) if args.ort_as_kiln
                            else serve_procs.start_kiln(args.kiln, kiln_repo, args.threads))}
        try:
            for s in servers.values():
                s.wait_ready(900)
                log(f"{s.name}: ready on {s.addr[1]}")
            if args.smoke:
                problems = []
                for m in args.models:
                    vs = variants(args, m, servers)
                    problems += check_outputs(args, m, vs)
                for p in problems:
                    log(f"MISMATCH {p}")
                log("serve_throughput smoke: " + ("FAILED" if problems else "ok"))
                return 1 if problems else 0
            tput, p50 = measure(args, servers)
        finally:
            for s in servers.values():
                s.stop()
    text = report(args, argv, tput, p50)
    print(text)
    if not args.no_docs:
        import peers
        peers.write_docs(args.docs, text, BEGIN, END,
                         "Throughput: Kiln vs ONNX Runtime behind a KServe v2 server")
        log(f"wrote {args.docs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
