"""Clients for the tests: raw HTTP (http.client, so every byte sent is the test's), tritonclient
HTTP and gRPC behind one small adapter, and a bounded parallel runner. Every call has a timeout.
"""
import concurrent.futures as cf
import http.client
import json
import math
import threading
import time

import repo_models
import wire

HTTP_TIMEOUT_S = 60


class RawResponse:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body)

    def error(self):
        """The protocol's error message ({"error": "..."}), or the body if it is not one."""
        try:
            return self.json()["error"]
        except (ValueError, KeyError, TypeError):
            return self.body.decode(errors="replace")

    def infer_outputs(self):
        return wire.parse_infer_response(self.body, self.headers)


def http_request(port, method, path, body=None, headers=None, timeout=HTTP_TIMEOUT_S):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return RawResponse(resp.status, {k: v for k, v in resp.getheaders()}, resp.read())
    finally:
        conn.close()


def http_infer(port, model, inputs, outputs=None, request_id=None, binary=False,
               parameters=None, version=None, binary_outputs=False, timeout=HTTP_TIMEOUT_S):
    body, headers = wire.infer_body(inputs, outputs, request_id, binary, parameters,
                                    binary_outputs)
    path = f"/v2/models/{model}" + (f"/versions/{version}" if version else "") + "/infer"
    return http_request(port, "POST", path, body, headers, timeout)


def parallel(fn, items, workers=None, timeout=120):
    """fn(item) for every item on its own thread (all released together); results in order.
    An exception is returned in place of its result, never lost."""
    items = list(items)
    start = threading.Barrier(len(items)) if items and len(items) <= 64 else None

    def run(item):
        if start is not None:
            try:
                start.wait(timeout=30)
            except threading.BrokenBarrierError:
                pass
        try:
            return fn(item)
        except Exception as e:  # noqa: BLE001 - reported by the caller's assertions
            return e

    with cf.ThreadPoolExecutor(max_workers=workers or max(len(items), 1)) as pool:
        futures = [pool.submit(run, it) for it in items]
        done, not_done = cf.wait(futures, timeout=timeout)
        assert not not_done, f"{len(not_done)} of {len(futures)} calls did not finish in {timeout}s"
        return [f.result() for f in futures]


# ---- tritonclient, HTTP or gRPC, behind one interface ------------------------------------------

class Triton:
    """tritonclient.http or tritonclient.grpc with answers normalized to plain dicts."""

    def __init__(self, protocol, server):
        self.protocol = protocol
        if protocol == "http":
            import tritonclient.http as tc
            self.client = tc.InferenceServerClient(server.http_url, connection_timeout=30,
                                                   network_timeout=HTTP_TIMEOUT_S)
        else:
            import tritonclient.grpc as tc
            self.client = tc.InferenceServerClient(server.grpc_url)
        self.tc = tc

    def close(self):
        self.client.close()

    def _kw(self):
        return {} if self.protocol == "http" else {"as_json": True, "client_timeout": 60}

    def model_ready(self, name):
        """False also when the server answers the question with an error (unknown model)."""
        try:
            return self.client.is_model_ready(name)
        except self.tc.InferenceServerException:
            return False

    def model_metadata(self, name, version=""):
        md = self.client.get_model_metadata(name, version, **self._kw())
        for t in md.get("inputs", []) + md.get("outputs", []):
            t["shape"] = [int(d) for d in t["shape"]]
        return md

    def model_config(self, name, version=""):
        cfg = self.client.get_model_config(name, version, **self._kw())
        return cfg["config"] if self.protocol == "grpc" else cfg

    def server_metadata(self):
        return self.client.get_server_metadata(**self._kw())

    def statistics(self, name="", version=""):
        st = self.client.get_inference_statistics(name, version, **self._kw())
        return st.get("model_stats", [])

    def repository_index(self):
        idx = self.client.get_model_repository_index(**self._kw())
        return idx.get("models", []) if self.protocol == "grpc" else idx

    def infer(self, model, inputs, outputs=None, request_id="", binary=True, version="",
              priority=0, timeout=None):
        tins = []
        for name, arr in inputs.items():
            t = self.tc.InferInput(name, list(arr.shape), wire.datatype_of(arr))
            if self.protocol == "http":
                t.set_data_from_numpy(arr, binary_data=binary)
            else:
                t.set_data_from_numpy(arr)
            tins.append(t)
        touts = None
        if outputs is not None:
            touts = [self.tc.InferRequestedOutput(o, binary_data=binary) if self.protocol == "http"
                     else self.tc.InferRequestedOutput(o) for o in outputs]
        kw = {"client_timeout": 60} if self.protocol == "grpc" else {}
        res = self.client.infer(model, tins, model_version=version, outputs=touts,
                                request_id=request_id, priority=priority, timeout=timeout, **kw)
        resp = res.get_response(as_json=True) if self.protocol == "grpc" else res.get_response()
        names = [o["name"] for o in resp.get("outputs", [])]
        return resp, {n: res.as_numpy(n) for n in names}


def stat_of(stats, name):
    """One model's statistics row with counts as ints (gRPC's JSON gives int64 as strings)."""
    rows = [s for s in stats if s["name"] == name]
    assert rows, f"no statistics for model '{name}' in {[s['name'] for s in stats]}"
    s = rows[0]
    inf = s.get("inference_stats", {})
    return {"inference_count": int(s.get("inference_count", 0)),
            "execution_count": int(s.get("execution_count", 0)),
            "success": int(inf.get("success", {}).get("count", 0)),
            "fail": int(inf.get("fail", {}).get("count", 0))}


def occupy_slow(server, seconds, slow_latency_s, tag):
    """Starts enough requests to the slow model (one instance, no batching) on threads to keep
    it busy for about `seconds` (at most 64); returns (threads, results, count) for join_all."""
    n = min(64, max(3, math.ceil(seconds / max(slow_latency_s, 1e-3))))
    results = {}
    x = repo_models.sample_inputs("slow", rows=1, seed=5)

    def run(i):
        results[i] = http_infer(server.http_port, "slow", x, request_id=f"{tag}{i}", binary=True,
                                timeout=120)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    time.sleep(0.05)  # let them reach the server's queue
    return threads, results, n


def join_all(threads, results, n):
    for t in threads:
        t.join(timeout=120)
    assert len(results) == n and all(r.status == 200 for r in results.values()), \
        {i: (r.status, r.body[:100]) for i, r in results.items() if r.status != 200}
