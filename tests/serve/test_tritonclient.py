"""tritonclient (HTTP and gRPC) against the server: health, metadata, model config, inference on
every repository model vs ONNX Runtime (JSON and binary tensors), requested-output subsets,
request ids, statistics, and the model repository extension (index, unload, load)."""
import pytest

from clients import stat_of
from repo_models import assert_outputs_match, sample_inputs

ALL_MODELS = ["digits", "mlp", "intbool", "strings", "slow"]


def test_health(triton):
    assert triton.client.is_server_live()
    assert triton.client.is_server_ready()
    for model in ALL_MODELS:
        assert triton.client.is_model_ready(model), f"model '{model}' not ready"
    assert not triton.model_ready("no_such_model")


def test_server_metadata(triton):
    md = triton.server_metadata()
    assert md["name"], md
    assert "version" in md, md


@pytest.mark.parametrize("model,inputs,outputs", [
    ("digits", [("image", "FP32", [-1, 1, 8, 8])], None),
    ("mlp", [("x", "FP32", [-1, 16])], [("logits", "FP32", [-1, 4]), ("probs", "FP32", [-1, 4])]),
    ("intbool", [("x", "INT64", [-1, 4]), ("mask", "BOOL", [-1, 4])],
     [("y", "INT64", [-1, 4]), ("notmask", "BOOL", [-1, 4])]),
    ("strings", [("s", "BYTES", [-1, 1])], [("id", "INT64", [-1, 1]), ("echo", "BYTES", [-1, 1])]),
])
def test_model_metadata(triton, model, inputs, outputs):
    md = triton.model_metadata(model)
    assert md["name"] == model
    assert md["versions"] == ["1"], md
    got_in = {(t["name"], t["datatype"], tuple(t["shape"])) for t in md["inputs"]}
    assert got_in == {(n, d, tuple(s)) for n, d, s in inputs}, md
    if outputs is not None:
        got_out = {(t["name"], t["datatype"], tuple(t["shape"])) for t in md["outputs"]}
        assert got_out == {(n, d, tuple(s)) for n, d, s in outputs}, md
    assert triton.model_metadata(model, "1")["name"] == model


def test_model_config(triton):
    cfg = triton.model_config("mlp")
    assert cfg["name"] == "mlp"
    assert int(cfg["max_batch_size"]) == 16
    db = cfg["dynamic_batching"]
    assert [int(x) for x in db["preferred_batch_size"]] == [4, 8]
    assert int(db["max_queue_delay_microseconds"]) == 20000
    assert int(cfg["instance_group"][0]["count"]) == 1
    assert {i["name"] for i in cfg["input"]} == {"x"}
    assert {o["name"] for o in cfg["output"]} == {"logits", "probs"}
    slow = triton.model_config("slow")
    assert slow["parameters"]["priority"]["string_value"] == "best_effort"
    assert int(triton.model_config("bounded")["dynamic_batching"]["default_queue_policy"]
               ["max_queue_size"]) == 2


@pytest.mark.parametrize("model,rows", [("digits", 3), ("mlp", 5), ("intbool", 2),
                                        ("strings", 4), ("slow", 1)])
@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_infer_matches_onnxruntime(triton, reference, model, rows, binary):
    if triton.protocol == "grpc" and not binary:
        pytest.skip("gRPC has one encoding in tritonclient (raw contents)")
    inputs = sample_inputs(model, rows=rows, seed=rows)
    resp, got = triton.infer(model, inputs, request_id=f"{model}-{rows}", binary=binary)
    assert resp["model_name"] == model
    assert resp.get("id") == f"{model}-{rows}"
    assert_outputs_match(got, reference.run(model, inputs), model, rtol=1e-4, atol=1e-4)


def test_requested_output_subset(triton, reference):
    inputs = sample_inputs("mlp", rows=3, seed=11)
    for wanted in (["probs"], ["logits"], ["probs", "logits"]):
        resp, got = triton.infer("mlp", inputs, outputs=wanted, request_id="subset")
        assert sorted(got) == sorted(wanted), f"asked {wanted}, got {sorted(got)}"
        assert_outputs_match(got, reference.run("mlp", inputs, wanted), "mlp")


def test_explicit_version(triton, reference):
    inputs = sample_inputs("mlp", rows=2, seed=5)
    resp, got = triton.infer("mlp", inputs, version="1", request_id="v1")
    assert str(resp["model_version"]) == "1"
    assert_outputs_match(got, reference.run("mlp", inputs), "mlp")


def test_request_ids_are_echoed(triton):
    inputs = sample_inputs("digits", rows=1)
    for rid in ["a", "request-with-dashes-0123456789", "ünïcode id"]:
        resp, _ = triton.infer("digits", inputs, request_id=rid)
        assert resp.get("id") == rid
    resp, _ = triton.infer("digits", inputs)  # no id: none echoed
    assert not resp.get("id")


def test_statistics_count_requests(triton):
    before = stat_of(triton.statistics("intbool"), "intbool")
    inputs = sample_inputs("intbool", rows=3)
    for i in range(4):
        triton.infer("intbool", inputs, request_id=f"stat{i}")
    after = stat_of(triton.statistics("intbool"), "intbool")
    assert after["success"] - before["success"] == 4, (before, after)
    assert after["inference_count"] - before["inference_count"] == 12, (before, after)
    assert 1 <= after["execution_count"] - before["execution_count"] <= 4, (before, after)
    every = triton.statistics()
    assert {"intbool", "mlp", "digits"} <= {s["name"] for s in every}


def test_repository_index_unload_load(triton, reference):
    rows = {r["name"]: r for r in triton.repository_index()}
    assert set(ALL_MODELS) <= set(rows), rows
    assert rows["mlp"].get("state") == "READY", rows["mlp"]

    # Unload the digits model: not ready, inference refused, the index says so; others serve.
    triton.client.unload_model("digits")
    try:
        assert not triton.model_ready("digits")
        with pytest.raises(triton.tc.InferenceServerException) as err:
            triton.infer("digits", sample_inputs("digits", rows=1))
        assert "digits" in str(err.value.message()), err.value
        rows = {r["name"]: r for r in triton.repository_index()}
        assert rows["digits"].get("state") != "READY", rows["digits"]
        inputs = sample_inputs("mlp", rows=1)
        assert_outputs_match(triton.infer("mlp", inputs)[1], reference.run("mlp", inputs), "mlp")
    finally:
        triton.client.load_model("digits")
    assert triton.client.is_model_ready("digits")
    inputs = sample_inputs("digits", rows=2, seed=3)
    assert_outputs_match(triton.infer("digits", inputs)[1], reference.run("digits", inputs),
                         "digits", atol=1e-4)
