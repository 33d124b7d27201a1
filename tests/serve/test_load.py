"""A bounded load test: measure the capacity of the `load` model (dynamic batching, max_queue_size
16) with a closed loop, then offer about twice that as an open loop for KILN_SERVE_LOAD_SECONDS
(10 s by default; 60 s for the issue's full run). Every request gets exactly one response, a
correct result or a clean 503, matched by request id; the server's statistics agree with the
results; its RSS after warm-up and at the end stay close (memory flat)."""
import collections
import concurrent.futures as cf
import os
import threading
import time

import numpy as np

from clients import Triton, http_infer, stat_of
from repo_models import sample_inputs

SECONDS = float(os.environ.get("KILN_SERVE_LOAD_SECONDS", "10"))
CLIENT_THREADS = 48
DISTINCT_INPUTS = 8


def test_twice_capacity_exactly_once(server, reference):
    inputs = [sample_inputs("load", rows=1, seed=500 + k) for k in range(DISTINCT_INPUTS)]
    expected = [reference.run("load", x)["y"] for x in inputs]

    def send(i):
        k = i % DISTINCT_INPUTS
        r = http_infer(server.http_port, "load", inputs[k], request_id=f"L{i}", binary=True,
                       binary_outputs=True, timeout=60)
        if r.status == 200:
            head, got = r.infer_outputs()
            ok = head.get("id") == f"L{i}" and np.allclose(got["y"], expected[k], rtol=1e-3,
                                                           atol=1e-4)
            return ("ok" if ok else "WRONG", head.get("id"))
        if r.status == 503:
            return ("rejected", None)
        return (f"HTTP {r.status}: {r.body[:120]!r}", None)

    # Capacity: a closed loop of 4 clients for 2 s.
    done = [0]
    stop = time.monotonic() + 2.0
    lock = threading.Lock()

    def closed_loop(j):
        i = 0
        while time.monotonic() < stop:
            status, _ = send(10_000_000 + 1000 * j + i)
            i += 1
            with lock:
                done[0] += status == "ok"

    with cf.ThreadPoolExecutor(4) as pool:
        list(pool.map(closed_loop, range(4)))
    capacity = done[0] / 2.0
    assert capacity > 0, "no request succeeded while measuring capacity"
    rate = 2 * capacity

    before = stat_of(Triton("http", server).statistics("load"), "load")
    outcomes = {}
    rss = {}
    start = time.monotonic()
    n_total = int(rate * SECONDS)
    with cf.ThreadPoolExecutor(CLIENT_THREADS) as pool:
        futures = {}
        for i in range(n_total):
            # Open loop: request i is due at start + i / rate, whatever came back before.
            delay = start + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            futures[pool.submit(send, i)] = i
            if "warm" not in rss and time.monotonic() - start > min(2.0, SECONDS / 4):
                rss["warm"] = server.rss_bytes()
        finished, pending = cf.wait(futures, timeout=120)
        assert not pending, f"{len(pending)} requests still unanswered 120 s after the load"
        for f in finished:
            i = futures[f]
            assert i not in outcomes
            outcomes[i] = f.result() if f.exception() is None else (repr(f.exception()), None)
    elapsed = time.monotonic() - start
    rss["end"] = server.rss_bytes()
    after = stat_of(Triton("http", server).statistics("load"), "load")

    counts = collections.Counter(status for status, _ in outcomes.values())
    summary = (f"{n_total} requests in {elapsed:.1f} s (offered {rate:.0f}/s, capacity "
               f"{capacity:.0f}/s): {dict(counts)}; RSS {rss}")
    print(summary)
    assert len(outcomes) == n_total, summary
    bad = {s: c for s, c in counts.items() if s not in ("ok", "rejected")}
    assert not bad, f"requests lost, failed or wrong: {bad}; {summary}"
    ids = [rid for status, rid in outcomes.values() if status == "ok"]
    assert len(ids) == len(set(ids)) == counts["ok"], "a response id came back twice"
    assert after["success"] - before["success"] == counts["ok"], (before, after, summary)
    assert counts["ok"] > 0, summary
    # Memory flat: a generous bound (allocator caches and the histograms may grow a little).
    warm = rss.get("warm", rss["end"])
    assert rss["end"] <= warm * 1.5 + 64 * 2**20, f"RSS grew from {warm} to {rss['end']}"
