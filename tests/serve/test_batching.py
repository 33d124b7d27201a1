"""Dynamic batching: concurrent requests to a batching model (mlp: max_batch_size 16, 20 ms queue
delay) give the same outputs as the same requests sent one at a time, and as ONNX Runtime; the
statistics show fewer executions than requests (batches were formed)."""
import numpy as np
import pytest

from clients import Triton, http_infer, parallel, stat_of
from repo_models import assert_outputs_match, sample_inputs

N = 48


def _infer(server, i, rows, binary=True):
    r = http_infer(server.http_port, "mlp", sample_inputs("mlp", rows=rows, seed=1000 + i),
                   request_id=f"b{i}", binary=binary, binary_outputs=binary)
    assert r.status == 200, f"request b{i}: {r.status} {r.error()}"
    head, outs = r.infer_outputs()
    assert head.get("id") == f"b{i}", f"request b{i} answered with id {head.get('id')!r}"
    return outs


def test_batched_equals_sequential(server, reference):
    rows = [1 + (i % 3) for i in range(N)]  # mixed batch sizes 1..3
    sequential = [_infer(server, i, rows[i]) for i in range(N)]
    before = stat_of(Triton("http", server).statistics("mlp"), "mlp")
    concurrent = parallel(lambda i: _infer(server, i, rows[i], binary=i % 2 == 0), range(N))
    after = stat_of(Triton("http", server).statistics("mlp"), "mlp")

    for i, got in enumerate(concurrent):
        assert not isinstance(got, Exception), f"request b{i}: {got!r}"
        exp = reference.run("mlp", sample_inputs("mlp", rows=rows[i], seed=1000 + i))
        assert_outputs_match(got, exp, f"mlp b{i} (concurrent vs ORT)")
        for name in exp:
            np.testing.assert_allclose(got[name], sequential[i][name], rtol=1e-5, atol=1e-6,
                                       err_msg=f"b{i}.{name}: batched != sequential")

    requests = after["success"] - before["success"]
    executions = after["execution_count"] - before["execution_count"]
    inferences = after["inference_count"] - before["inference_count"]
    assert requests == N, (before, after)
    assert inferences == sum(rows), (before, after)
    assert 1 <= executions < N, f"{executions} executions for {N} concurrent requests: no batching"


def test_grpc_concurrent_requests_keep_their_ids(server, reference):
    pytest.importorskip("tritonclient.grpc")

    def one(i):
        c = Triton("grpc", server)
        try:
            inputs = sample_inputs("mlp", rows=1, seed=2000 + i)
            resp, got = c.infer("mlp", inputs, request_id=f"g{i}")
            assert resp.get("id") == f"g{i}", (i, resp.get("id"))
            assert_outputs_match(got, reference.run("mlp", inputs), f"mlp g{i}")
        finally:
            c.close()

    results = parallel(one, range(24))
    errors = [(i, r) for i, r in enumerate(results) if isinstance(r, Exception)]
    assert not errors, errors
