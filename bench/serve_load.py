#!/usr/bin/env python3
"""Overload: `kiln serve` at twice its measured capacity for a minute. Every request must get
exactly one response (a result or a clean rejection: HTTP 503 / 504), none lost, none answered
twice, and the server's memory must stay flat.

1. Capacity: a closed loop of --concurrency connections for --probe s; capacity = its requests/s.
2. Overload: an open loop at --factor x capacity for --seconds s over --workers connections
   (fixed send times; a request no connection could send within --skip-late s of its time is
   counted as not sent by the client, so the run ends on time), the server's RSS sampled every
   second.
3. Accounting: per HTTP status, what the client got; failed connections (status 0) are lost
   requests. The server's own kiln_inference_requests_total (all outcomes) must have grown by
   exactly the number of requests the client sent: fewer = a request the server never answered,
   more = one answered twice. RSS: the median of the first and of the last 10 s, and the peak.

    build/peers-venv/bin/python bench/serve_load.py                      # resnet18, 60 s at 2x
    build/peers-venv/bin/python bench/serve_load.py --model mobilenetv2 --seconds 20
    python3 bench/serve_load.py --smoke           # CI: 5 s at 2x of a small model, bounded

Exits 1 when a request was lost or the server's count disagrees; memory is reported, not judged
(a timing- and allocator-dependent figure). --ort-as-kiln runs the harness on the ORT server
(which has no queue limit and no metrics: the server-side count is skipped).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import serve_client  # noqa: E402
import serve_procs  # noqa: E402
import serve_repo  # noqa: E402

REQUESTS = "kiln_inference_requests_total"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def sample_rss(server, stop, out):
    while not stop.wait(1.0):
        rss = server.rss_mb()
        if rss is not None:
            out.append((time.time(), rss))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kiln", default=os.environ.get("KILN_BIN",
                                                     os.path.join(REPO, "build", "bin", "kiln")))
    ap.add_argument("--models-dir", default=os.path.join(REPO, "build", "models"))
    ap.add_argument("--model", default=None, help="default resnet18 (--smoke: mobilenetv2_96)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--concurrency", type=int, default=8, help="capacity probe connections")
    ap.add_argument("--probe", type=float, default=None, help="capacity probe s (default 10)")
    ap.add_argument("--factor", type=float, default=2.0)
    ap.add_argument("--seconds", type=float, default=None, help="overload s (default 60)")
    ap.add_argument("--workers", type=int, default=64, help="overload connections")
    ap.add_argument("--skip-late", type=float, default=5.0)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--ort-as-kiln", action="store_true")
    args = ap.parse_args(argv)
    args.model = args.model or ("mobilenetv2_96" if args.smoke else "resnet18")
    args.probe = args.probe or (3.0 if args.smoke else 10.0)
    args.seconds = args.seconds or (5.0 if args.smoke else 60.0)
    if not args.ort_as_kiln and not os.access(args.kiln, os.X_OK):
        ap.error(f"Kiln CLI not found at {args.kiln} (build it, or set KILN_BIN / --kiln)")

    with tempfile.TemporaryDirectory(prefix="kiln_load_") as root:
        repo = serve_repo.write_repository(
            os.path.join(root, "repo"), [serve_repo.Entry("m", args.model, max_batch_size=8)],
            args.models_dir)
        server = (serve_procs.start_ort(repo, args.threads) if args.ort_as_kiln
                  else serve_procs.start_kiln(args.kiln, repo, args.threads))
        with server:
            server.wait_ready(900, ["m"])
            req = serve_client.Request("m", serve_repo.model_inputs(args.models_dir, args.model))
            serve_client.closed_loop(server.addr, req, 1, 1.0)  # first runs (compile)
            probe = serve_client.closed_loop(server.addr, req, args.concurrency, args.probe)
            capacity = len(probe.ok()) / args.probe
            rate = args.factor * capacity
            log(f"capacity {capacity:.1f} req/s ({args.concurrency} connections, p50 "
                f"{probe.latency_ms(50):.1f} ms); overload at {rate:.1f} req/s for "
                f"{args.seconds:g} s over {args.workers} connections")
            before = server.metrics()
            rss, stop = [], threading.Event()
            sampler = threading.Thread(target=sample_rss, args=(server, stop, rss))
            sampler.start()
            t0 = time.time()
            load = serve_client.open_loop(server.addr, req, rate, args.seconds,
                                          workers=args.workers, skip_late=args.skip_late)
            elapsed = time.time() - t0
            stop.set()
            sampler.join()
            time.sleep(0.5)
            after = server.metrics()
            code = server.stop()

    counts = load.counts()
    sent = sum(n for s, n in counts.items() if s != serve_client.SKIPPED)
    lost = counts.get(0, 0)
    print(f"serve_load: {args.model}, {rate:.1f} req/s ({args.factor:g} x {capacity:.1f}) for "
          f"{args.seconds:g} s ({elapsed:.1f} s with the drain)")
    print(f"  scheduled {len(load.records)}, sent {sent}, not sent (client late) "
          f"{counts.get(serve_client.SKIPPED, 0)}")
    for s in sorted(k for k in counts if k not in (serve_client.SKIPPED,)):
        label = {0: "lost (connection failed, no response)", 200: "result",
                 503: "rejected (unavailable)", 504: "deadline exceeded"}.get(s, "other")
        print(f"  HTTP {s}: {counts[s]} ({label})")
    ok = load.ok()
    if ok:
        lat = np.array([r[1] for r in ok]) * 1e3
        print(f"  result latency from the scheduled time: p50 {np.percentile(lat, 50):.1f} ms, "
              f"p99 {np.percentile(lat, 99):.1f} ms; results/s {len(ok) / args.seconds:.1f}")
    problems = []
    if lost:
        problems.append(f"{lost} request(s) got no response")
    if not args.ort_as_kiln:
        answered = (serve_procs.metric_sum(after, REQUESTS)
                    - serve_procs.metric_sum(before, REQUESTS))
        print(f"  server's {REQUESTS} grew by {answered:.0f} (client sent {sent})")
        if int(answered) != sent:
            problems.append(f"the server answered {answered:.0f} requests, the client sent {sent}")
    if rss:
        t_first, t_last = rss[0][0], rss[-1][0]
        first = [m for t, m in rss if t - t_first <= 10]
        last = [m for t, m in rss if t_last - t <= 10]
        print(f"  server RSS MiB: first 10 s median {np.median(first):.0f}, last 10 s median "
              f"{np.median(last):.0f}, peak {max(m for _, m in rss):.0f}")
    print(f"  server exit code after SIGTERM: {code}")
    if code != 0:
        problems.append(f"the server exited {code} on SIGTERM")
    for p in problems:
        print(f"FAILED: {p}")
    print("serve_load: " + ("FAILED" if problems else "ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
