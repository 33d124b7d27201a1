"""Manual check (not a CI test): tritonclient.grpc against Kiln's gRPC frontend in front of the
tests' FakeServer (grpc_fake_serve.cc). Exits non-zero on the first mismatch.

    tritonclient_grpc_check.sh   # builds the fake server, makes a venv with tritonclient[grpc]
"""
import queue
import sys

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

url = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:18001"
c = grpcclient.InferenceServerClient(url)


def check(cond, what):
    if not cond:
        sys.exit(f"FAIL: {what}")
    print(f"ok   {what}")


def expect_error(fn, status, text, what):
    try:
        fn()
    except InferenceServerException as e:
        check(e.status() == status and text in e.message(), f"{what}: {e.status()} {e.message()!r}")
        return
    sys.exit(f"FAIL: {what}: no error")


check(c.is_server_live() and c.is_server_ready(), "server live and ready")
check(c.is_model_ready("add_one") and not c.is_model_ready("nope"), "model ready")
md = c.get_server_metadata(as_json=True)
check(md["name"] == "kiln" and "statistics" in md["extensions"], f"server metadata {md}")
mm = c.get_model_metadata("add_one", as_json=True)
check(mm["inputs"][0]["datatype"] == "FP32" and mm["inputs"][0]["shape"] == ["-1", "3"],
      f"model metadata {mm['inputs']}")
cfg = c.get_model_config("add_one", as_json=True)["config"]
check(cfg["max_batch_size"] == 8 and cfg["dynamic_batching"]["preferred_batch_size"] == [4, 8]
      and cfg["input"][0]["data_type"] == "TYPE_FP32", f"model config {cfg}")
st = c.get_inference_statistics("add_one", as_json=True)
check(st["model_stats"][0]["inference_count"] == "12", "statistics")
idx = c.get_model_repository_index(as_json=True)
check([m["name"] for m in idx["models"]] == ["add_one", "broken"], "repository index")
c.load_model("add_one")
c.unload_model("add_one")
check(True, "load and unload")

# add_one: raw contents as tritonclient sends them, priority/timeout parameters, request id.
x = np.arange(6, dtype=np.float32).reshape(2, 3) / 7
inp = grpcclient.InferInput("INPUT0", [2, 3], "FP32")
inp.set_data_from_numpy(x)
res = c.infer("add_one", [inp], request_id="r1", priority=1, timeout=5000,
              outputs=[grpcclient.InferRequestedOutput("OUTPUT1")])
check(res.get_response().id == "r1", "request id echoed")
check(res.as_numpy("OUTPUT0") is None and np.array_equal(res.as_numpy("OUTPUT1"), x * 2),
      "requested output only, values x * 2")
res = c.infer("add_one", [inp])
check(np.array_equal(res.as_numpy("OUTPUT0"), x + 1), "OUTPUT0 = x + 1")

# echo: BYTES, INT8, BOOL, FP16, UINT64 round trips.
arrays = {
    "s": np.array([[b"hello", b""], [b"\x00\xff", "é".encode()]], dtype=np.object_),
    "i8": np.array([-128, 0, 127], dtype=np.int8),
    "b": np.array([True, False, True]),
    "h": np.array([1.5, -2.0, 65504], dtype=np.float16),
    "u64": np.array([2**63 + 5], dtype=np.uint64),
}
dts = {"s": "BYTES", "i8": "INT8", "b": "BOOL", "h": "FP16", "u64": "UINT64"}
inputs = []
for name, a in arrays.items():
    i = grpcclient.InferInput(name, list(a.shape), dts[name])
    i.set_data_from_numpy(a)
    inputs.append(i)
res = c.infer("echo", inputs)
for name, a in arrays.items():
    got = res.as_numpy(name)
    check(got.shape == a.shape and np.array_equal(got, a), f"echo {dts[name]} {got.tolist()}")

# Errors keep their codes and messages.
expect_error(lambda: c.infer("nope", [inp]), "StatusCode.NOT_FOUND", "unknown model 'nope'",
             "unknown model")
expect_error(lambda: c.infer("full", [inp]), "StatusCode.UNAVAILABLE", "queue is full", "overload")
bad = grpcclient.InferInput("INPUT0", [2, 2], "FP32")
bad.set_data_from_numpy(np.zeros((2, 2), np.float32))
bad.set_shape([2, 3])  # the shape now says 6 elements; the data has 4
expect_error(lambda: c.infer("add_one", [bad]), "StatusCode.INVALID_ARGUMENT",
             "expected 24 bytes in raw_input_contents", "short data")
expect_error(lambda: c.get_system_shared_memory_status(), "StatusCode.UNIMPLEMENTED",
             "shared-memory", "shared memory")

# async_infer and the stream.
results = queue.Queue()
# tritonclient calls back with keywords: callback(result=..., error=...).
def on_result(result, error):
    results.put((result, error))


for k in range(4):
    c.async_infer("slow", [inp], on_result, request_id=str(k))
for _ in range(4):
    r, e = results.get(timeout=20)
    check(e is None and np.array_equal(r.as_numpy("OUTPUT0"), x + 1), f"async_infer {r.get_response().id}")

c.start_stream(callback=on_result)
for k in range(3):
    c.async_stream_infer("add_one", [inp], request_id=f"s{k}")
c.async_stream_infer("failing", [inp], request_id="sf")
got = {}
for _ in range(4):
    r, e = results.get(timeout=20)
    if e is not None:
        got["error"] = e.message()
    else:
        got[r.get_response().id] = r.as_numpy("OUTPUT0")
c.stop_stream()
check(all(np.array_equal(got[f"s{k}"], x + 1) for k in range(3)), "stream results")
check("the kernel failed" in got.get("error", ""), f"stream error {got.get('error')!r}")
print("all tritonclient.grpc checks passed")
