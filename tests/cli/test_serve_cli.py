"""`kiln serve`: its flags, the usage errors it reports before starting, and (where the server
core is built) a start on a repository with one Add model, an HTTP inference checked against
numpy, and a graceful SIGTERM with a request in flight.

The binary is $KILN_BIN, or <repo>/build/bin/kiln.
"""
import json
import os
import pathlib
import re
import signal
import subprocess
import threading
import time
import urllib.request

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
KILN = pathlib.Path(os.environ.get("KILN_BIN", REPO / "build" / "bin" / "kiln"))

pytestmark = pytest.mark.skipif(not KILN.is_file(), reason=f"kiln binary not built: {KILN}")


def kiln(*args, timeout=60):
    return subprocess.run([str(KILN), *map(str, args)], capture_output=True, text=True, timeout=timeout)


def test_help_lists_the_flags():
    r = kiln("serve", "--help")
    assert r.returncode == 0, r.stderr
    for flag in ["--model-repository", "--http-port", "--grpc-port", "--metrics-port", "--allow-http",
                 "--allow-grpc", "--allow-metrics", "--http-thread-count", "--model-control-mode", "--load-model",
                 "--threads", "--no-be-padding", "--no-preemption", "--kernel-cache-dir"]:
        assert re.search(rf"^\s+{re.escape(flag)}\b", r.stdout, re.M), f"{flag} missing from:\n{r.stdout}"


def test_usage_errors(tmp_path):
    r = kiln("serve")
    assert r.returncode == 2 and "--model-repository is required" in r.stderr
    r = kiln("serve", "--model-repository", tmp_path / "missing")
    assert r.returncode == 2 and "Directory does not exist" in r.stderr
    r = kiln("serve", "--model-repository", tmp_path, "--model-control-mode", "poll")
    assert r.returncode == 2 and "poll not in {none,explicit}" in r.stderr
    r = kiln("serve", "--model-repository", tmp_path, "--http-port", "70000")
    assert r.returncode == 2
    r = kiln("serve", "--model-repository", tmp_path, "--load-model", "m")
    assert r.returncode == 1
    assert "--load-model needs --model-control-mode explicit" in r.stderr
    r = kiln("serve", "--model-repository", tmp_path, "--allow-http=false", "--allow-grpc", "false")
    assert r.returncode == 1 and "nothing to serve on" in r.stderr


def add_model_repository(root):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph([helper.make_node("Add", ["x", "y"], ["z"])], "g", [x, y], [z])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    (root / "add" / "1").mkdir(parents=True)
    onnx.save(model, str(root / "add" / "1" / "model.onnx"))


def http(port, path, body=None, timeout=30):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method="POST" if body else "GET")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_serve_infer_and_sigterm(tmp_path):
    add_model_repository(tmp_path)
    proc = subprocess.Popen([str(KILN), "serve", "--model-repository", str(tmp_path), "--http-port", "0",
                             "--metrics-port", "0", "--allow-grpc=false"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ports = {}
        while len(ports) < 2:
            line = proc.stdout.readline()
            if not line:
                err = proc.stderr.read()
                if "not built" in err:
                    pytest.skip(f"kiln serve in this build: {err.strip()}")
                pytest.fail(f"kiln serve exited: {err}")
            m = re.match(r"kiln serve: (HTTP|metrics) on [\d.]+:(\d+)$", line.strip())
            if m:
                ports[m.group(1)] = int(m.group(2))
        port = ports["HTTP"]
        deadline = time.time() + 120
        while http(port, "/v2/models/add/ready")[0] != 200:
            assert time.time() < deadline, "model 'add' never became ready"
            time.sleep(0.2)

        rng = np.random.default_rng(0)
        x, y = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32)
        body = json.dumps({"id": "r1", "inputs": [
            {"name": "x", "shape": [2, 3], "datatype": "FP32", "data": x.flatten().tolist()},
            {"name": "y", "shape": [2, 3], "datatype": "FP32", "data": y.flatten().tolist()}]}).encode()
        status, out = http(port, "/v2/models/add/infer", body)
        assert status == 200, out
        resp = json.loads(out)
        assert resp["id"] == "r1"
        (z,) = resp["outputs"]
        assert z["name"] == "z" and z["datatype"] == "FP32" and z["shape"] == [2, 3]
        np.testing.assert_allclose(np.array(z["data"], np.float32).reshape(2, 3), x + y, rtol=1e-6)
        status, out = http(port, "/v2/models/add/infer", body[:-5])
        assert status == 400 and "malformed JSON" in json.loads(out)["error"]
        status, out = http(ports["metrics"], "/metrics")
        assert status == 200

        # SIGTERM with requests in flight: each is answered, then the process exits 0.
        results = []

        def call():
            try:
                results.append(http(port, "/v2/models/add/infer", body))
            except urllib.error.URLError as e:  # connected after the frontend stopped accepting
                results.append((None, str(e)))

        threads = [threading.Thread(target=call) for _ in range(8)]
        for t in threads:
            t.start()
        time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        for t in threads:
            t.join(60)
        assert proc.wait(60) == 0
        assert len(results) == 8
        for status, out in results:  # answered, or refused cleanly once the server stopped accepting
            assert status in (200, 503, None), out
    except Exception:
        proc.kill()
        raise
    finally:
        if proc.poll() is None:
            proc.kill()
