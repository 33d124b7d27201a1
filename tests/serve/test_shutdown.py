"""Graceful shutdown: SIGTERM while requests are running and queued -> every one of them completes
with its correct result, and the process exits 0. A server of its own (the session's server is
stopped by the conftest fixture, with the same exit-code check)."""
import http.client
import math
import threading
import time

import wire
from clients import RawResponse, http_infer
from repo_models import assert_outputs_match, sample_inputs


def test_sigterm_finishes_in_flight_requests(start_server, reference):
    srv = start_server(["slow", "mlp"])
    x = sample_inputs("slow", rows=1, seed=12)
    t0 = time.monotonic()
    r = http_infer(srv.http_port, "slow", x, binary=True)
    latency = time.monotonic() - t0
    assert r.status == 200, r.error()

    # 4..8 requests (fewer than the HTTP threads a server has), about 0.6 s of queued work.
    n = min(8, max(4, math.ceil(0.6 / max(latency, 1e-3))))
    results = {}
    sent = threading.Barrier(n + 1)

    def one(i):
        # Connected and answered once before the barrier, so at SIGTERM every connection is
        # established and accepted; the infer request then goes on the same connection.
        conn = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=120)
        conn.request("GET", "/v2/health/live")
        conn.getresponse().read()
        sent.wait(timeout=30)
        body, headers = wire.infer_body(x, request_id=f"s{i}", binary=True)
        conn.request("POST", "/v2/models/slow/infer", body, headers)
        resp = conn.getresponse()
        results[i] = RawResponse(resp.status, dict(resp.getheaders()), resp.read())
        conn.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    sent.wait(timeout=30)
    time.sleep(min(0.15, 0.3 * n * latency))  # all sent; one running, the rest queued
    code = srv.terminate(timeout=120)
    for t in threads:
        t.join(timeout=120)

    assert code == 0, f"exit code {code} after SIGTERM\n{srv.log()}"
    assert len(results) == n, f"{n - len(results)} requests got no response"
    expected = reference.run("slow", x)
    for i, r in sorted(results.items()):
        assert r.status == 200, f"s{i}: {r.status} {r.body[:200]!r} (in flight at SIGTERM)"
        head, got = r.infer_outputs()
        assert head.get("id") == f"s{i}"
        assert_outputs_match(got, expected, f"slow s{i}", rtol=1e-3, atol=1e-4)


def test_sigterm_when_idle_exits_zero(start_server):
    srv = start_server(["mlp"])
    assert srv.alive()
    code = srv.terminate(timeout=60)
    assert code == 0, f"exit code {code}\n{srv.log()}"
