"""Bad requests get a clear error with the protocol's status (HTTP 400/404; gRPC INVALID_ARGUMENT,
NOT_FOUND) whose message names what was wrong, and the server answers the next good request.
HTTP requests are written byte by byte here (http.client), gRPC ones through tritonclient."""
import json
import socket

import numpy as np
import pytest

from clients import http_infer, http_request
from repo_models import assert_outputs_match, sample_inputs


@pytest.fixture
def good_request_after(server, reference):
    """Checks, after the test, that a good request still gets the right answer."""
    yield
    inputs = sample_inputs("mlp", rows=2, seed=99)
    r = http_infer(server.http_port, "mlp", inputs, request_id="after-error")
    assert r.status == 200, f"good request after an error: {r.status} {r.error()}"
    head, got = r.infer_outputs()
    assert head.get("id") == "after-error"
    assert_outputs_match(got, reference.run("mlp", inputs), "mlp")


def expect_error(resp, status, *words):
    assert resp.status == status, f"expected HTTP {status}, got {resp.status}: {resp.body[:300]!r}"
    assert resp.headers.get("Content-Type", "").startswith("application/json"), resp.headers
    msg = resp.error()
    assert isinstance(msg, str) and msg, f"no error message: {resp.body!r}"
    for w in words:
        assert w.lower() in msg.lower(), f"error message does not name {w!r}: {msg!r}"
    return msg


CASES = {
    # name: (model, inputs, expected status, words the message must contain)
    "bad_shape": ("mlp", {"x": np.zeros((2, 15), np.float32)}, 400, ["x"]),
    "bad_rank": ("mlp", {"x": np.zeros((16,), np.float32)}, 400, ["x"]),
    "bad_dtype": ("mlp", {"x": np.zeros((2, 16), np.int32)}, 400, ["x"]),
    "unknown_input": ("mlp", {"x": np.zeros((1, 16), np.float32),
                              "bogus": np.zeros((1, 16), np.float32)}, 400, ["bogus"]),
    "missing_input": ("intbool", {"x": np.zeros((1, 4), np.int64)}, 400, ["mask"]),
    "batch_too_big": ("mlp", {"x": np.zeros((17, 16), np.float32)}, 400, ["16"]),  # the limit
    "unknown_model": ("no_such_model", {"x": np.zeros((1, 16), np.float32)}, 404,
                      ["no_such_model"]),
}


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_http_bad_request(server, good_request_after, case, binary):
    model, inputs, status, words = CASES[case]
    r = http_infer(server.http_port, model, inputs, binary=binary, request_id=case)
    expect_error(r, status, *words)


def test_http_unknown_version(server, good_request_after):
    r = http_infer(server.http_port, "mlp", sample_inputs("mlp"), version="7")
    expect_error(r, 404, "mlp")
    for path in ["/v2/models/mlp/versions/7", "/v2/models/no_such_model",
                 "/v2/models/no_such_model/config"]:
        r = http_request(server.http_port, "GET", path)
        assert r.status == 404, (path, r.status, r.body[:200])
    r = http_request(server.http_port, "GET", "/v2/models/no_such_model/ready")
    assert r.status == 404 and "no_such_model" in r.error(), (r.status, r.body[:200])


def test_http_unknown_output(server, good_request_after):
    r = http_infer(server.http_port, "mlp", sample_inputs("mlp"), outputs=["nope"])
    expect_error(r, 400, "nope")


@pytest.mark.parametrize("body", [
    b"{",
    b"not json at all",
    b'{"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32", "data": [1, 2',
    b'{"inputs": "x"}',
    b'{"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32"}]}',  # no data
    b'{"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32", "data": [1, 2, 3]}]}',
    b'{"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP99", "data": []}]}',
    b'{"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32", "data": ["a", "b"]}]}',
    b"",
], ids=["open_brace", "text", "cut", "inputs_not_list", "no_data", "too_few_values",
        "unknown_datatype", "strings_for_fp32", "empty"])
def test_http_malformed_json(server, good_request_after, body):
    r = http_request(server.http_port, "POST", "/v2/models/mlp/infer", body,
                     {"Content-Type": "application/json"})
    expect_error(r, 400)


def _binary_request(cut_bytes, header_len_delta=0):
    x = sample_inputs("mlp", rows=2)["x"]
    head = json.dumps({"inputs": [{"name": "x", "shape": [2, 16], "datatype": "FP32",
                                   "parameters": {"binary_data_size": x.nbytes}}]}).encode()
    body = head + x.tobytes()
    body = body[:len(body) - cut_bytes]
    return body, {"Content-Type": "application/octet-stream",
                  "Inference-Header-Content-Length": str(len(head) + header_len_delta)}


@pytest.mark.parametrize("cut,delta", [(1, 0), (64, 0), (128, 0), (0, 5), (0, -3)],
                         ids=["cut1", "cut64", "cut_all", "header_len_long", "header_len_short"])
def test_http_truncated_or_inconsistent_binary(server, good_request_after, cut, delta):
    body, headers = _binary_request(cut, delta)
    r = http_request(server.http_port, "POST", "/v2/models/mlp/infer", body, headers)
    expect_error(r, 400)


def test_http_header_length_past_body(server, good_request_after):
    body, headers = _binary_request(0)
    headers["Inference-Header-Content-Length"] = str(len(body) + 100)
    r = http_request(server.http_port, "POST", "/v2/models/mlp/infer", body, headers)
    expect_error(r, 400)


def test_http_body_shorter_than_content_length(server, good_request_after):
    """The client promises more bytes than it sends, then closes its side: the server must not
    hang on it nor crash; whatever it answers (or not), the next request is served."""
    body, headers = _binary_request(0)
    head = (f"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/octet-stream\r\n"
            f"Inference-Header-Content-Length: {headers['Inference-Header-Content-Length']}\r\n"
            f"Content-Length: {len(body) + 50}\r\nConnection: close\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=30) as s:
        s.sendall(head + body)
        s.shutdown(socket.SHUT_WR)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    if data:
        assert data.startswith(b"HTTP/1.1 4"), data[:200]


@pytest.mark.parametrize("case", sorted(CASES))
def test_grpc_bad_request(server, good_request_after, triton_grpc, case):
    model, inputs, status, words = CASES[case]
    code = {400: "StatusCode.INVALID_ARGUMENT", 404: "StatusCode.NOT_FOUND"}[status]
    with pytest.raises(triton_grpc.tc.InferenceServerException) as err:
        triton_grpc.infer(model, inputs, request_id=case)
    assert err.value.status() == code, (err.value.status(), err.value.message())
    for w in words:
        assert w in err.value.message(), err.value.message()


def test_grpc_unknown_version_and_metadata(server, good_request_after, triton_grpc):
    tc = triton_grpc.tc
    with pytest.raises(tc.InferenceServerException) as err:
        triton_grpc.infer("mlp", sample_inputs("mlp"), version="7")
    assert err.value.status() == "StatusCode.NOT_FOUND", err.value
    with pytest.raises(tc.InferenceServerException) as err:
        triton_grpc.model_metadata("no_such_model")
    assert err.value.status() == "StatusCode.NOT_FOUND", err.value
    assert "no_such_model" in err.value.message()


@pytest.fixture
def triton_grpc(server):
    pytest.importorskip("tritonclient.grpc")
    import clients
    c = clients.Triton("grpc", server)
    yield c
    c.close()
