"""Faults: clients that disconnect mid-request (raw sockets), and a model unloaded while requests
are queued on it. The server stays up, answers every request that is still there exactly once,
and serves the next good request correctly."""
import json
import socket
import threading
import time

import pytest

from clients import http_infer, http_request, join_all, occupy_slow, parallel
from repo_models import assert_outputs_match, sample_inputs


def _check_serving(server, reference, tag):
    assert server.alive(), f"server died ({tag}):\n{server.log()}"
    inputs = sample_inputs("mlp", rows=2, seed=7)
    r = http_infer(server.http_port, "mlp", inputs, request_id=tag)
    assert r.status == 200, (tag, r.status, r.error())
    assert_outputs_match(r.infer_outputs()[1], reference.run("mlp", inputs), "mlp")


def _raw_infer_bytes(model, inputs):
    x = next(iter(inputs.values()))
    name = next(iter(inputs))
    head = json.dumps({"inputs": [{"name": name, "shape": list(x.shape), "datatype": "FP32",
                                   "parameters": {"binary_data_size": x.nbytes}}]}).encode()
    body = head + x.tobytes()
    return (f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/octet-stream\r\n"
            f"Inference-Header-Content-Length: {len(head)}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def test_disconnects_mid_request(server, reference):
    full = _raw_infer_bytes("slow", sample_inputs("slow", rows=1))
    for cut in [10, len(full) // 2, len(full)]:  # in the headers, in the body, after the body
        for _ in range(3):
            s = socket.create_connection(("127.0.0.1", server.http_port), timeout=10)
            s.sendall(full[:cut])
            s.close()
    # RST instead of FIN: SO_LINGER 0 while the slow model works on the request.
    for _ in range(3):
        s = socket.create_connection(("127.0.0.1", server.http_port), timeout=10)
        s.sendall(full)
        time.sleep(0.02)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()
    _check_serving(server, reference, "after-disconnects")
    # The abandoned slow requests finish or are dropped; the slow model still answers.
    x = sample_inputs("slow", rows=1, seed=8)
    r = http_infer(server.http_port, "slow", x, binary=True, timeout=120)
    assert r.status == 200, (r.status, r.error())
    assert_outputs_match(r.infer_outputs()[1], reference.run("slow", x), "slow", rtol=1e-3,
                         atol=1e-4)


def test_grpc_client_cancels(server, reference, slow_latency_s):
    pytest.importorskip("tritonclient.grpc")
    import tritonclient.grpc as tc
    threads, results, n = occupy_slow(server, 0.5, slow_latency_s, "c")
    c = tc.InferenceServerClient(server.grpc_url)
    try:
        x = sample_inputs("slow", rows=1)
        t = tc.InferInput("x", list(x["x"].shape), "FP32")
        t.set_data_from_numpy(x["x"])
        # A client-side deadline far shorter than the queued work: gRPC cancels the call.
        with pytest.raises(tc.InferenceServerException) as err:
            c.infer("slow", [t], client_timeout=0.02)
        assert "DEADLINE_EXCEEDED" in err.value.status()
    finally:
        c.close()
        join_all(threads, results, n)
    _check_serving(server, reference, "after-grpc-cancel")


def test_unload_while_requests_are_queued(server, reference, slow_latency_s):
    n = 8
    x = sample_inputs("victim", rows=1, seed=9)
    expected = reference.run("victim", x)
    sent = threading.Barrier(n + 1)

    def one(i):
        sent.wait(timeout=30)
        return http_infer(server.http_port, "victim", x, request_id=f"u{i}", binary=True,
                          timeout=120)

    results = {}
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, one(i)))
               for i in range(n)]
    for t in threads:
        t.start()
    sent.wait(timeout=30)
    time.sleep(min(0.2, 1.5 * slow_latency_s))  # one runs, the others wait in the queue
    unload = http_request(server.http_port, "POST", "/v2/repository/models/victim/unload", b"{}",
                          {"Content-Type": "application/json"})
    for t in threads:
        t.join(timeout=120)
    try:
        assert unload.status == 200, (unload.status, unload.body[:200])
        assert len(results) == n, f"{n - len(results)} requests got no response"
        statuses = {}
        for i, r in sorted(results.items()):
            statuses[i] = r.status
            if r.status == 200:
                head, got = r.infer_outputs()
                assert head.get("id") == f"u{i}"
                assert_outputs_match(got, expected, f"victim u{i}", rtol=1e-3, atol=1e-4)
            else:
                assert r.status in (503, 404), (i, r.status, r.body[:200])
                assert "victim" in r.error(), r.error()
        assert any(s != 200 for s in statuses.values()), \
            f"every queued request ran although the model was unloaded: {statuses}"
        _check_serving(server, reference, "after-unload")
        r = http_infer(server.http_port, "victim", x, binary=True)
        assert r.status in (503, 404) and "victim" in r.error(), (r.status, r.body[:200])
    finally:
        load = http_request(server.http_port, "POST", "/v2/repository/models/victim/load", b"{}",
                            {"Content-Type": "application/json"}, timeout=240)
    assert load.status == 200, (load.status, load.body[:200])
    r = http_infer(server.http_port, "victim", x, binary=True, timeout=120)
    assert r.status == 200, (r.status, r.error())
    assert_outputs_match(r.infer_outputs()[1], expected, "victim (reloaded)", rtol=1e-3, atol=1e-4)


def test_many_connections_then_serving(server, reference):
    """Open-and-drop connections in parallel with good requests; all good ones answered."""
    def drop(_):
        s = socket.create_connection(("127.0.0.1", server.http_port), timeout=10)
        s.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nContent-Length: 1000\r\n\r\n{")
        s.close()

    def good(i):
        inputs = sample_inputs("mlp", rows=1, seed=300 + i)
        r = http_infer(server.http_port, "mlp", inputs, request_id=f"m{i}")
        assert r.status == 200, (r.status, r.error())
        assert r.infer_outputs()[0].get("id") == f"m{i}"
        return True

    results = parallel(lambda i: drop(i) if i % 2 else good(i), range(40))
    errors = [r for r in results if isinstance(r, Exception)]
    assert not errors, errors
    _check_serving(server, reference, "after-connection-churn")
