"""grpc.health.v1.Health on `kiln serve`'s gRPC port (src/serve/grpc_health.h), as a load
balancer or Kubernetes' gRPC probe calls it: SERVING for the server ("") once its models are
ready, a model's name SERVING only while that model is loaded, NOT_FOUND for a name the
repository does not have; Watch streams a model's status as it loads and unloads. The messages are encoded by hand (grpc/health/v1/health.proto: one
string field, one enum field), so no generated client is needed."""
import os

import pytest

from clients import http_request

grpc = pytest.importorskip("grpc")

pytestmark = pytest.mark.skipif(os.environ.get("KILN_SERVE_REFERENCE") == "1",
                                reason="the ONNX Runtime reference server has no health service")

UNKNOWN, SERVING, NOT_SERVING = 0, 1, 2


def _request(service):
    data = service.encode()
    assert len(data) < 128  # one-byte length varint
    return b"\x0a" + bytes([len(data)]) + data if data else b""


def _status(raw):
    """HealthCheckResponse.status (field 1, varint; absent = UNKNOWN)."""
    if not raw:
        return UNKNOWN
    assert raw[0] == 0x08 and len(raw) == 2, raw
    return raw[1]


def check(srv, service):
    with grpc.insecure_channel(srv.grpc_url) as channel:
        call = channel.unary_unary("/grpc.health.v1.Health/Check", request_serializer=_request,
                                   response_deserializer=_status)
        return call(service, timeout=30)


def test_health_follows_the_server_and_each_model(start_server):
    srv = start_server(["mlp", "digits"], "--model-control-mode", "explicit", "--load-model", "mlp")
    channel = grpc.insecure_channel(srv.grpc_url)
    watch = channel.unary_stream("/grpc.health.v1.Health/Watch", request_serializer=_request,
                                 response_deserializer=_status)("digits", timeout=120)
    assert next(watch) == NOT_SERVING
    assert check(srv, "") == SERVING
    assert check(srv, "inference.GRPCInferenceService") == SERVING
    assert check(srv, "mlp") == SERVING
    assert check(srv, "digits") == NOT_SERVING  # in the repository, not loaded
    with pytest.raises(grpc.RpcError) as err:
        check(srv, "not_there")
    assert err.value.code() == grpc.StatusCode.NOT_FOUND and "not_there" in err.value.details()

    r = http_request(srv.http_port, "POST", "/v2/repository/models/digits/load", b"{}",
                     {"Content-Type": "application/json"}, timeout=240)
    assert r.status == 200, r.body[:200]
    assert check(srv, "digits") == SERVING
    assert next(watch) == SERVING  # the watch saw the load
    r = http_request(srv.http_port, "POST", "/v2/repository/models/mlp/unload", b"{}",
                     {"Content-Type": "application/json"}, timeout=60)
    assert r.status == 200, r.body[:200]
    assert check(srv, "mlp") == NOT_SERVING
    assert check(srv, "digits") == SERVING
    watch.cancel()
    # A watch open at SIGTERM ends (UNAVAILABLE) and does not hold the shutdown.
    server_watch = channel.unary_stream("/grpc.health.v1.Health/Watch", request_serializer=_request,
                                        response_deserializer=_status)("", timeout=120)
    assert next(server_watch) == SERVING
    assert srv.terminate() == 0
    with pytest.raises(grpc.RpcError) as err:
        list(server_watch)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    channel.close()
