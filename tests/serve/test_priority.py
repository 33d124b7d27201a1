"""Real-time and best-effort together: best-effort clients keep the slow model (config priority
best_effort) saturated while real-time requests (request parameter priority 1) go to mlp. Every
RT and every BE request completes once with its correct result (preempted BE work is resumed or
restarted, never lost or answered twice). The server's preemption trace (KILN_PREEMPT_TRACE,
docs/serving.md) then shows that RT work preempted BE runs and was served ahead of them: every
preemption had an RT run in flight that finished before the preempted BE request, and at least
one RT request that arrived while a BE run was on its cores finished before it. The checks
compare the order of the server's own steady-clock times, never a duration against a threshold
(timing figures are bench/serve_*'s)."""
import os
import re
import threading
import time

import numpy as np
import pytest

from clients import Triton, http_infer, http_request
from repo_models import assert_outputs_match, sample_inputs

BE_CLIENTS = 4
RT_REQUESTS = 30
REFERENCE_SERVER = os.environ.get("KILN_SERVE_REFERENCE") == "1"


def preemptions(server):
    """kiln_preemptions_total from /metrics (0 before the first preemption)."""
    r = http_request(server.metrics_port, "GET", "/metrics")
    assert r.status == 200, r.status
    m = re.search(r"^kiln_preemptions_total (\S+)$", r.body.decode(), re.M)
    return float(m.group(1)) if m else 0.0


def read_trace(path):
    """The preemption trace's lines as dicts of their key=value fields, by kind (preempt, rt, be);
    `ids` becomes a list."""
    out = {"preempt": [], "rt": [], "be": []}
    with open(path) as f:
        for line in f:
            m = re.match(r"kiln (preempt|rt|be): (.*)$", line)
            if not m:
                continue
            fields = dict(re.findall(r"(\w+)=(\S*)", m.group(2)))
            fields["ids"] = fields.get("ids", "").split(",")
            out[m.group(1)].append(fields)
    return out


def check_rt_served_ahead(trace, preempted_total):
    """The order of events in the trace (see the module's docstring)."""
    preempts = [p for p in trace["preempt"] if p["model"] == "slow"]
    assert preempts, "no best-effort run was preempted by the real-time requests"
    assert len(preempts) == preempted_total, (len(preempts), preempted_total)
    finished = {}  # BE request id -> its "kiln be" line
    for b in trace["be"]:
        for rid in b["ids"]:
            finished[rid] = b
    rts = [(int(r["arrived_ns"]), int(r["done_ns"]), r["ids"]) for r in trace["rt"] if r["model"] == "mlp"]
    served_while_running = []
    for p in preempts:
        asked = int(p["asked_ns"])
        be = finished.get(p["ids"][0])
        assert be is not None, f"preempted best-effort request {p['ids']} has no 'kiln be' line: {trace['be']}"
        started, done = int(be["started_ns"]), int(be["done_ns"])
        assert asked < done, (p, be)  # (a stop can be asked just before `started` is read)
        # The stop is asked only for an RT run waiting for cores: one was in flight, and the BE
        # run could resume only after it gave its cores back.
        in_flight = [r for r in rts if r[0] <= asked < r[1]]
        assert in_flight, f"no real-time run was in flight when {p['ids']} was asked to stop at {asked}"
        assert all(r[1] < done for r in in_flight), (p, be, in_flight)
        served_while_running += [(p["ids"], r[2]) for r in in_flight if started <= r[0]]
    preemption_counts = {}
    for p in preempts:
        preemption_counts[p["ids"][0]] = preemption_counts.get(p["ids"][0], 0) + 1
    for rid, n in preemption_counts.items():
        assert int(finished[rid]["preemptions"]) == n, (rid, finished[rid], n)
    assert served_while_running, "no real-time request that arrived while a BE run held its cores finished first"


def test_rt_while_be_saturates(start_server, reference, tmp_path):
    trace_path = tmp_path / "preempt.trace"
    server = start_server(["slow", "mlp"], env={"KILN_PREEMPT_TRACE": str(trace_path)})
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
    if REFERENCE_SERVER:
        return  # ONNX Runtime's stand-in neither preempts nor writes the trace
    # Every client has its answer, so every run has ended and written its trace lines.
    preempted = preemptions(server) - preempted_before
    check_rt_served_ahead(read_trace(trace_path), preempted)


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
