"""Real-time and best-effort together: best-effort clients keep the slow model (config priority
best_effort) saturated while real-time requests (request parameter priority 1) go to mlp. Every
RT and every BE request completes once with its correct result (preempted BE work is resumed or
restarted, never lost or answered twice), and RT work preempted BE runs (kiln_preemptions_total
rose). No timing assertions: those are bench/serve_*'s."""
import re
import threading
import time

import numpy as np
import pytest

from clients import Triton, http_infer, http_request
from repo_models import assert_outputs_match, sample_inputs

BE_CLIENTS = 4
RT_REQUESTS = 30


def preemptions(server):
    """kiln_preemptions_total from /metrics (0 before the first preemption)."""
    r = http_request(server.metrics_port, "GET", "/metrics")
    assert r.status == 200, r.status
    m = re.search(r"^kiln_preemptions_total (\S+)$", r.body.decode(), re.M)
    return float(m.group(1)) if m else 0.0


def test_rt_while_be_saturates(server, reference):
    preempted_before = preemptions(server)
    be_inputs = [sample_inputs("slow", rows=1, seed=600 + k) for k in range(BE_CLIENTS)]
    be_expected = [reference.run("slow", x)["y"] for x in be_inputs]
    stop = threading.Event()
    be_results = {}  # request id -> (status, response id, correct?)
    lock = threading.Lock()

    def be_client(k):
        i = 0
        while not stop.is_set():
            rid = f"be{k}-{i}"
            r = http_infer(server.http_port, "slow", be_inputs[k], request_id=rid, binary=True,
                           binary_outputs=True, parameters={"priority": 2}, timeout=120)
            entry = (r.status, None, False)
            if r.status == 200:
                head, got = r.infer_outputs()
                entry = (200, head.get("id"), bool(np.allclose(got["y"], be_expected[k],
                                                               rtol=1e-3, atol=1e-4)))
            with lock:
                be_results[rid if rid not in be_results else rid + " (twice)"] = entry
            i += 1

    threads = [threading.Thread(target=be_client, args=(k,)) for k in range(BE_CLIENTS)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.2)
        rt_errors = []
        for j in range(RT_REQUESTS):
            inputs = sample_inputs("mlp", rows=1 + j % 2, seed=700 + j)
            r = http_infer(server.http_port, "mlp", inputs, request_id=f"rt{j}",
                           parameters={"priority": 1}, timeout=60)
            if r.status != 200:
                rt_errors.append((j, r.status, r.body[:200]))
                continue
            head, got = r.infer_outputs()
            assert head.get("id") == f"rt{j}"
            assert_outputs_match(got, reference.run("mlp", inputs), f"mlp rt{j}")
        assert not rt_errors, rt_errors
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a best-effort client never got its response"
    assert len(be_results) >= BE_CLIENTS, be_results
    bad = {rid: e for rid, e in be_results.items() if e != (200, rid, True)}
    assert not bad, f"best-effort requests failed, wrong, or answered with another id: {bad}"
    # BE runs of slow hold every core while the clients keep it saturated, so RT requests
    # arriving meanwhile must have preempted some.
    assert preemptions(server) > preempted_before, "no best-effort run was preempted by the real-time requests"


def test_grpc_rt_priority_parameter(server, reference):
    """tritonclient's `priority` argument (gRPC uint64 parameter) is accepted and served."""
    pytest.importorskip("tritonclient.grpc")
    c = Triton("grpc", server)
    try:
        for prio in (1, 2):
            inputs = sample_inputs("mlp", rows=2, seed=800 + prio)
            resp, got = c.infer("mlp", inputs, request_id=f"p{prio}", priority=prio)
            assert resp.get("id") == f"p{prio}"
            assert_outputs_match(got, reference.run("mlp", inputs), f"mlp priority {prio}")
    finally:
        c.close()
