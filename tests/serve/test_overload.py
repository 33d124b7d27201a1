"""Overload and deadlines. A burst at a model with max_queue_size 2 (bounded): every request gets
exactly one response, a correct result or a clean 503 / UNAVAILABLE naming the model; none lost,
none duplicated (counted by request id and against the server's statistics). A request with a
short timeout queued behind slow work gets 504 / DEADLINE_EXCEEDED."""
import collections

import pytest

from clients import Triton, http_infer, join_all, occupy_slow, parallel, stat_of
from repo_models import assert_outputs_match, sample_inputs

BURST = 24


def test_http_burst_at_bounded_queue(server, reference):
    x = sample_inputs("bounded", rows=1, seed=3)
    expected = reference.run("bounded", x)
    before = stat_of(Triton("http", server).statistics("bounded"), "bounded")
    results = parallel(lambda i: (i, http_infer(server.http_port, "bounded", x,
                                                request_id=f"o{i}", binary=True,
                                                binary_outputs=True)), range(BURST))
    after = stat_of(Triton("http", server).statistics("bounded"), "bounded")

    by_status = collections.Counter()
    for res in results:
        assert not isinstance(res, Exception), f"a request got no response: {res!r}"
        i, r = res
        by_status[r.status] += 1
        if r.status == 200:
            head, got = r.infer_outputs()
            assert head.get("id") == f"o{i}", (i, head.get("id"))
            assert_outputs_match(got, expected, f"bounded o{i}", rtol=1e-3, atol=1e-4)
        else:
            assert r.status == 503, f"o{i}: {r.status} {r.body[:200]!r}"
            assert "bounded" in r.error(), r.error()
    assert by_status[200] >= 1, by_status
    assert by_status[503] >= 1, f"no rejection with max_queue_size 2 under a burst: {by_status}"
    assert by_status[200] + by_status[503] == BURST
    # Each accepted request ran exactly once.
    assert after["success"] - before["success"] == by_status[200], (before, after, by_status)


def test_grpc_burst_at_bounded_queue(server, reference):
    pytest.importorskip("tritonclient.grpc")
    x = sample_inputs("bounded", rows=1, seed=4)
    expected = reference.run("bounded", x)

    def one(i):
        c = Triton("grpc", server)
        try:
            resp, got = c.infer("bounded", x, request_id=f"go{i}")
            assert resp.get("id") == f"go{i}"
            assert_outputs_match(got, expected, f"bounded go{i}", rtol=1e-3, atol=1e-4)
            return "OK"
        except c.tc.InferenceServerException as e:
            assert e.status() == "StatusCode.UNAVAILABLE", (e.status(), e.message())
            assert "bounded" in e.message()
            return e.status()
        finally:
            c.close()

    results = parallel(one, range(BURST))
    bad = [r for r in results if isinstance(r, Exception)]
    assert not bad, bad
    counts = collections.Counter(results)
    assert counts["OK"] >= 1 and counts["StatusCode.UNAVAILABLE"] >= 1, counts


def test_http_deadline_behind_slow_work(server, slow_latency_s):
    threads, results, n = occupy_slow(server, 1.0, slow_latency_s, "d")
    try:
        timeout_us = 20_000
        r = http_infer(server.http_port, "slow", sample_inputs("slow", rows=1), request_id="late",
                       binary=True, parameters={"timeout": timeout_us})
        assert r.status == 504, f"expected 504 for a 20 ms timeout behind {n} slow requests, " \
                                f"got {r.status}: {r.body[:200]!r}"
        assert "slow" in r.error(), r.error()
    finally:
        join_all(threads, results, n)


def test_grpc_deadline_behind_slow_work(server, slow_latency_s):
    pytest.importorskip("tritonclient.grpc")
    threads, results, n = occupy_slow(server, 1.0, slow_latency_s, "gd")
    c = Triton("grpc", server)
    try:
        with pytest.raises(c.tc.InferenceServerException) as err:
            c.infer("slow", sample_inputs("slow", rows=1), request_id="glate", timeout=20_000)
        assert err.value.status() == "StatusCode.DEADLINE_EXCEEDED", \
            (err.value.status(), err.value.message())
    finally:
        c.close()
        join_all(threads, results, n)
