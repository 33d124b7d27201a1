"""The serving benchmarks' client: KServe v2 inference over HTTP/1.1 keep-alive with the binary
tensor data extension, and two load drivers over it.

One client drives every server the same way (bench/serve_throughput.py, serve_rt_be.py,
serve_load.py). It speaks the protocol with the standard library's http.client, one persistent
connection per worker thread: tritonclient.http (used in the --smoke checks to show that both
servers answer Triton's own client) multiplexes over gevent greenlets in one thread, which suits
neither an open-loop driver that must send at fixed times nor a per-request latency clock.
The request body is encoded once and re-sent, so the client spends its CPU on the socket, not on
serialization (the machine's cores are shared with the server under test).

* `closed_loop(addr, req, concurrency, seconds)`: `concurrency` threads, each sending the next
  request as soon as the last answer arrives (the server is kept saturated at that depth).
* `open_loop(addr, req, rate, seconds)`: requests at fixed times (1 / rate apart, or Poisson
  arrivals) whatever the answers do; a request's latency counts from its scheduled time, so a
  server that stalls is charged for the requests that waited behind it (no coordinated
  omission).

Both return a `Load`: per request (scheduled start, latency s, HTTP status), and percentiles.
"""
from __future__ import annotations

import http.client
import json
import queue
import socket
import threading
import time

import numpy as np

DTYPE_NAMES = {np.dtype(np.float32): "FP32", np.dtype(np.float64): "FP64",
               np.dtype(np.float16): "FP16", np.dtype(np.int64): "INT64",
               np.dtype(np.int32): "INT32", np.dtype(np.int16): "INT16",
               np.dtype(np.int8): "INT8", np.dtype(np.uint8): "UINT8",
               np.dtype(np.bool_): "BOOL"}
NP_OF = {v: k for k, v in DTYPE_NAMES.items()}


class Request:
    """One encoded KServe v2 binary infer request: POST path, headers and body."""

    def __init__(self, model, feed, priority=None, request_id=None, version=None):
        self.model = model
        self.batch = int(next(iter(feed.values())).shape[0])
        inputs, chunks = [], []
        for name, arr in feed.items():
            arr = np.ascontiguousarray(arr)
            raw = arr.tobytes()
            inputs.append({"name": name, "datatype": DTYPE_NAMES[arr.dtype],
                           "shape": list(arr.shape), "parameters": {"binary_data_size": len(raw)}})
            chunks.append(raw)
        header = {"inputs": inputs, "parameters": {"binary_data_output": True}}
        if priority is not None:
            header["parameters"]["priority"] = priority
        if request_id is not None:
            header["id"] = request_id
        text = json.dumps(header).encode()
        self.body = text + b"".join(chunks)
        self.headers = {"Content-Type": "application/octet-stream",
                        "Inference-Header-Content-Length": str(len(text))}
        v = f"/versions/{version}" if version else ""
        self.path = f"/v2/models/{model}{v}/infer"


def decode_response(body, header_length):
    """({name: array}, response JSON) of an infer response (binary or JSON outputs)."""
    hlen = int(header_length) if header_length is not None else len(body)
    resp = json.loads(body[:hlen])
    outs, offset = {}, hlen
    for o in resp.get("outputs", []):
        dtype = NP_OF[o["datatype"]]
        size = (o.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            outs[o["name"]] = np.frombuffer(body, dtype, size // dtype.itemsize,
                                            offset).reshape(o["shape"])
            offset += size
        else:
            outs[o["name"]] = np.asarray(o["data"], dtype).reshape(o["shape"])
    return outs, resp


class Connection:
    """A keep-alive HTTP connection that reconnects after the server closed it."""

    def __init__(self, addr, timeout=300.0):
        self.addr, self.timeout = addr, timeout
        self.conn = None

    def request(self, method, path, body=None, headers=None):
        """(status, response headers, body bytes); status 0 = connection failure."""
        for attempt in (0, 1):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection(*self.addr, timeout=self.timeout)
                    self.conn.connect()
                    self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self.conn.request(method, path, body=body, headers=headers or {})
                r = self.conn.getresponse()
                data = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    self.close()
                return r.status, r, data
            except (ConnectionError, http.client.HTTPException, OSError):
                self.close()
                # A reused connection the server had closed fails at once: retry once on a
                # new one. A request that failed on a fresh connection is a failure.
                if attempt == 1:
                    return 0, None, b""
        return 0, None, b""

    def infer(self, req):
        """(status, outputs or None, error text)."""
        status, r, data = self.request("POST", req.path, req.body, req.headers)
        if status != 200:
            err = data.decode(errors="replace") if data else "connection failed"
            return status, None, err
        outs, _ = decode_response(data, r.getheader("Inference-Header-Content-Length"))
        return status, outs, ""

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def get_json(addr, path):
    c = Connection(addr, timeout=10)
    try:
        status, _, data = c.request("GET", path)
        return status, (json.loads(data) if data and status == 200 else data)
    finally:
        c.close()


def wait_ready(addr, seconds, models=(), proc=None):
    """Polls /v2/health/ready (and each model's ready) until 200; False after `seconds` or when
    `proc` (a Popen) has exited."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            ok = get_json(addr, "/v2/health/ready")[0] == 200 and all(
                get_json(addr, f"/v2/models/{m}/ready")[0] == 200 for m in models)
            if ok:
                return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


class Load:
    """Records of one load run: per request (scheduled start s, latency s, status)."""

    def __init__(self, records, seconds, batch):
        self.records, self.seconds, self.batch = records, seconds, batch

    def ok(self):
        return [r for r in self.records if r[2] == 200]

    def counts(self):
        c = {}
        for r in self.records:
            c[r[2]] = c.get(r[2], 0) + 1
        return c

    def throughput(self):
        """Inferences (batch rows) answered with a result per second."""
        return len(self.ok()) * self.batch / self.seconds

    def latency_ms(self, q):
        lat = [r[1] for r in self.ok()]
        return float(np.percentile(lat, q)) * 1e3 if lat else float("nan")


def closed_loop(addr, req, concurrency, seconds, warmup=0.0, verify=None):
    """`concurrency` connections each sending `req` back to back for `seconds` (after `warmup`
    seconds). The requests answered inside the window are recorded (also those sent before it:
    with requests that take seconds, counting only those sent and answered inside would
    undercount), so throughput is answers per second of the window. With `verify(outputs) -> bool`, an answer it rejects is recorded with status
    -1 (wrong result), and every answer, warm-up included, is checked."""
    records, lock = [], threading.Lock()
    t0 = time.perf_counter() + warmup
    t_end = t0 + seconds

    def worker():
        c = Connection(addr)
        mine = []
        while True:
            start = time.perf_counter()
            if start >= t_end:
                break
            status, outs, _ = c.infer(req)
            done = time.perf_counter()
            if verify is not None and status == 200 and not verify(outs):
                status = -1
                if not t0 <= done <= t_end:  # a wrong answer outside the window still counts
                    mine.append((start - t0, done - start, status))
                    continue
            if t0 <= done <= t_end:
                mine.append((start - t0, done - start, status))
        c.close()
        with lock:
            records.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return Load(sorted(records), seconds, req.batch)


SKIPPED = -2  # status of a request the client never sent (open_loop's skip_late)


def open_loop(addr, req, rate, seconds, workers=8, poisson=False, seed=0, skip_late=None):
    """`req` at `rate` per second for `seconds`; latency from each request's scheduled time.
    `workers` connections serve the schedule (a request waits for a free one, and that wait is
    part of its latency). With `skip_late` (s), a request no connection was free to send within
    that long after its time is not sent (status SKIPPED), so an overloaded run ends on time."""
    rng = np.random.default_rng(seed)
    n = int(rate * seconds)
    gaps = rng.exponential(1.0 / rate, n) if poisson else np.full(n, 1.0 / rate)
    offsets = np.cumsum(gaps) - gaps[0]
    due = queue.Queue()
    records, lock = [], threading.Lock()
    t0 = time.perf_counter() + 0.05

    def worker():
        c = Connection(addr)
        mine = []
        while True:
            off = due.get()
            if off is None:
                break
            sched = t0 + off
            now = time.perf_counter()
            if sched > now:
                time.sleep(sched - now)
            elif skip_late is not None and now - sched > skip_late:
                mine.append((off, 0.0, SKIPPED))
                continue
            status, _, _ = c.infer(req)
            mine.append((off, time.perf_counter() - sched, status))
        c.close()
        with lock:
            records.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    # Hand each request to the workers shortly before it is due, so a free worker sleeps to
    # the exact time and a busy pool shows up as latency.
    for off in offsets:
        wait = t0 + off - 0.002 - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        due.put(off)
    for _ in threads:
        due.put(None)
    for t in threads:
        t.join()
    return Load(sorted(records), seconds, req.batch)
