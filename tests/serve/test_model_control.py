"""--model-control-mode explicit --load-model M: only M loads at start; the others are listed in
the repository index as not ready, load on request (POST /v2/repository/models/<m>/load), then
serve correct results; a model missing from the repository fails to load with 4xx naming it."""
from clients import http_infer, http_request
from repo_models import assert_outputs_match, sample_inputs


def test_explicit_model_control(start_server, reference):
    srv = start_server(["mlp", "digits"], "--model-control-mode", "explicit",
                       "--load-model", "mlp")
    r = http_request(srv.http_port, "POST", "/v2/repository/index", b"{}",
                     {"Content-Type": "application/json"})
    assert r.status == 200, r.body[:200]
    rows = {row["name"]: row for row in r.json()}
    assert set(rows) == {"mlp", "digits"}, rows
    assert rows["mlp"].get("state") == "READY", rows
    assert rows["digits"].get("state") != "READY", rows

    assert http_request(srv.http_port, "GET", "/v2/models/digits/ready").status != 200
    x = sample_inputs("digits", rows=2)
    r = http_infer(srv.http_port, "digits", x)
    assert r.status in (400, 404, 503) and "digits" in r.error(), (r.status, r.body[:200])

    r = http_request(srv.http_port, "POST", "/v2/repository/models/digits/load", b"{}",
                     {"Content-Type": "application/json"}, timeout=240)
    assert r.status == 200, r.body[:200]
    assert http_request(srv.http_port, "GET", "/v2/models/digits/ready").status == 200
    r = http_infer(srv.http_port, "digits", x)
    assert r.status == 200, r.error()
    assert_outputs_match(r.infer_outputs()[1], reference.run("digits", x),
                         "digits", atol=1e-4)

    r = http_request(srv.http_port, "POST", "/v2/repository/models/not_there/load", b"{}",
                     {"Content-Type": "application/json"})
    assert 400 <= r.status < 500 and "not_there" in r.error(), (r.status, r.body[:200])
    assert srv.terminate() == 0


def _post(srv, path, timeout=60):
    return http_request(srv.http_port, "POST", path, b"{}", {"Content-Type": "application/json"},
                        timeout=timeout)


def test_repository_api_is_refused_in_mode_none(start_server):
    srv = start_server(["mlp"])  # Triton's default: --model-control-mode none
    for action in ("unload", "load"):
        r = _post(srv, f"/v2/repository/models/mlp/{action}")
        assert r.status == 503 and "not allowed" in r.error(), (action, r.status, r.body[:200])
    assert http_request(srv.http_port, "GET", "/v2/models/mlp/ready").status == 200
    assert srv.terminate() == 0


def test_load_checks_names_and_reports_bad_models(start_server):
    srv = start_server(["mlp"], "--model-control-mode", "explicit", "--load-model", "mlp")
    # Names that are not a folder of the repository: 404, and no index entry left behind.
    for name in ("not_there", ".hidden", "%2E%2E"):
        r = _post(srv, f"/v2/repository/models/{name}/load")
        assert r.status == 404, (name, r.status, r.body[:200])
    r = http_request(srv.http_port, "POST", "/v2/repository/index", b"{}",
                     {"Content-Type": "application/json"})
    assert {row["name"] for row in r.json()} == {"mlp"}, r.json()
    # A model file that is not a model: the load fails with 400 naming the model.
    broken = srv.repository / "broken" / "1"
    broken.mkdir(parents=True)
    (broken / "model.onnx").write_bytes(b"this is not an ONNX model")
    r = _post(srv, "/v2/repository/models/broken/load", timeout=120)
    assert r.status == 400 and "broken" in r.error(), (r.status, r.body[:200])
    assert http_request(srv.http_port, "GET", "/v2/models/broken/ready").status != 200
    assert http_request(srv.http_port, "GET", "/v2/models/not_there/ready").status == 404
    assert srv.terminate() == 0


def _raw_post(port, path):
    """POST with no body and no Content-Length (as tritonclient and curl -X POST send a load)."""
    import socket
    with socket.create_connection(("127.0.0.1", port), timeout=120) as s:
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode(errors="replace")


def test_bodyless_load_and_unload(start_server):
    srv = start_server(["mlp"], "--model-control-mode", "explicit")
    status, body = _raw_post(srv.http_port, "/v2/repository/models/mlp/load")
    assert status == 200, (status, body)
    assert http_request(srv.http_port, "GET", "/v2/models/mlp/ready").status == 200
    status, body = _raw_post(srv.http_port, "/v2/repository/models/mlp/unload")
    assert status == 200, (status, body)
    assert http_request(srv.http_port, "GET", "/v2/models/mlp/ready").status != 200
    status, body = _raw_post(srv.http_port, "/v2/repository/index")
    assert status == 400 and "Content-Length" in body, (status, body)
    assert srv.terminate() == 0
