#!/usr/bin/env python3
"""ONNX Runtime behind a small Python KServe v2 HTTP server: the peer of `kiln serve` in the
serving benchmarks (bench/serve_throughput.py, bench/serve_rt_be.py).

Triton Inference Server itself cannot run here (it ships as a container image and there is no
container runtime), so this is the comparison the issue allows: "ORT behind a Python KServe v2
server". It is kept honest and plain:

* the same repository layout as `kiln serve` (DIR/<model>/<version>/model.onnx, optional
  config.pbtxt of which only max_batch_size and the "threads" parameter are read);
* one ORT InferenceSession per model version (CPU provider, all graph optimizations,
  intra_op_num_threads = --threads or the model's "threads" parameter, inter_op 1, sequential),
  shared by all connections: runs of concurrent requests go into ORT concurrently, as ORT allows;
* no batching, queueing or priorities of its own: each request is one session run of the batch
  the client sent (a "priority" request parameter is accepted and ignored);
* HTTP/1.1 keep-alive, one thread per connection (ThreadingHTTPServer);
* KServe v2: health (server and model), server and model metadata, model config (as JSON),
  infer with JSON tensors and with the binary tensor data extension (Inference-Header-Content-
  Length, binary_data_size, binary_data / binary_data_output for outputs).

    python bench/ort_kserve_server.py --model-repository DIR [--http-port 0] [--threads N]

prints "ort serve: HTTP on HOST:PORT" once the port is bound (port 0 picks a free one), loads
the models in the background (/v2/health/ready answers 200 when all are loaded) and stops on
SIGTERM / SIGINT.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import onnxruntime as ort

# KServe datatype <-> numpy, and ORT's type strings -> KServe.
DTYPES = {"BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32,
          "UINT64": np.uint64, "INT8": np.int8, "INT16": np.int16, "INT32": np.int32,
          "INT64": np.int64, "FP16": np.float16, "FP32": np.float32, "FP64": np.float64}
ORT_TYPES = {"tensor(bool)": "BOOL", "tensor(uint8)": "UINT8", "tensor(uint16)": "UINT16",
             "tensor(uint32)": "UINT32", "tensor(uint64)": "UINT64", "tensor(int8)": "INT8",
             "tensor(int16)": "INT16", "tensor(int32)": "INT32", "tensor(int64)": "INT64",
             "tensor(float16)": "FP16", "tensor(float)": "FP32", "tensor(double)": "FP64"}
NP_TO_KSERVE = {np.dtype(v): k for k, v in DTYPES.items()}

MODEL_PATH = re.compile(r"^/v2/models/([^/]+)(?:/versions/([^/]+))?(/ready|/config|/infer)?$")


class RequestError(Exception):
    """A request the server answers with `status` and {"error": message}."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class Model:
    def __init__(self, name, version, path, max_batch_size, threads):
        self.name, self.version, self.max_batch_size = name, version, max_batch_size
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        self.threads = threads
        self.inputs = {i.name: i for i in self.session.get_inputs()}
        self.output_names = [o.name for o in self.session.get_outputs()]

    @staticmethod
    def _meta(arg):
        shape = [d if isinstance(d, int) else -1 for d in arg.shape]
        return {"name": arg.name, "datatype": ORT_TYPES.get(arg.type, arg.type), "shape": shape}

    def metadata(self):
        return {"name": self.name, "versions": [self.version], "platform": "onnxruntime_onnx",
                "inputs": [self._meta(i) for i in self.session.get_inputs()],
                "outputs": [self._meta(o) for o in self.session.get_outputs()]}

    def config(self):
        def strip(meta):  # Triton's config lists dims without the batch dimension
            dims = meta["shape"][1:] if self.max_batch_size > 0 else meta["shape"]
            return {"name": meta["name"], "data_type": "TYPE_" + meta["datatype"], "dims": dims}
        md = self.metadata()
        return {"name": self.name, "platform": "onnxruntime_onnx",
                "max_batch_size": self.max_batch_size,
                "input": [strip(m) for m in md["inputs"]],
                "output": [strip(m) for m in md["outputs"]],
                "parameters": {"threads": {"string_value": str(self.threads)}}}

    def check_input(self, name, dtype, shape):
        arg = self.inputs.get(name)
        if arg is None:
            raise RequestError(400, f"model '{self.name}': unknown input '{name}' (inputs: "
                                    f"{', '.join(self.inputs)})")
        want = ORT_TYPES.get(arg.type)
        if dtype != want:
            raise RequestError(400, f"model '{self.name}', input '{name}': datatype {dtype}, "
                                    f"expected {want}")
        dims = list(arg.shape)
        ok = len(dims) == len(shape) and all(
            not isinstance(d, int) or d == s for d, s in zip(dims, shape))
        if ok and self.max_batch_size > 0 and shape and shape[0] > self.max_batch_size:
            raise RequestError(400, f"model '{self.name}', input '{name}': batch {shape[0]} "
                                    f"exceeds max_batch_size {self.max_batch_size}")
        if not ok:
            raise RequestError(400, f"model '{self.name}', input '{name}': shape {shape}, "
                                    f"expected {[d if isinstance(d, int) else -1 for d in dims]}")


def read_config(path):
    """(max_batch_size, threads or None) from a config.pbtxt; the rest is not this server's."""
    if not os.path.exists(path):
        return 0, None
    text = open(path).read()
    m = re.search(r"max_batch_size\s*:\s*(\d+)", text)
    t = re.search(r'key\s*:\s*"threads"\s*value\s*{\s*string_value\s*:\s*"(\d+)"', text)
    return (int(m.group(1)) if m else 0), (int(t.group(1)) if t else None)


def load_repository(root, threads):
    """{name: {version: Model}} of every DIR/<name>/<version>/model.onnx."""
    models = {}
    for name in sorted(os.listdir(root)):
        mdir = os.path.join(root, name)
        if not os.path.isdir(mdir):
            continue
        max_batch, model_threads = read_config(os.path.join(mdir, "config.pbtxt"))
        for version in sorted(os.listdir(mdir)):
            path = os.path.join(mdir, version, "model.onnx")
            if version.isdigit() and os.path.exists(path):
                models.setdefault(name, {})[version] = Model(
                    name, version, path, max_batch, model_threads or threads)
    return models


def decode_inputs(model, header, binary):
    """{name: array} from the request's JSON header and its binary section."""
    feed, offset = {}, 0
    inputs = header.get("inputs")
    if not isinstance(inputs, list) or not inputs:
        raise RequestError(400, f"model '{model.name}': the request has no 'inputs' list")
    for t in inputs:
        try:
            name, dtype, shape = t["name"], t["datatype"], [int(d) for d in t["shape"]]
        except (KeyError, TypeError, ValueError):
            raise RequestError(400, f"model '{model.name}': an input lacks name, datatype or "
                                    "shape")
        if dtype not in DTYPES:
            raise RequestError(400, f"model '{model.name}', input '{name}': datatype {dtype} is "
                                    "not supported by this server")
        model.check_input(name, dtype, shape)
        np_dtype = np.dtype(DTYPES[dtype])
        count = int(np.prod(shape))
        size = (t.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            if size != count * np_dtype.itemsize or offset + size > len(binary):
                raise RequestError(400, f"model '{model.name}', input '{name}': binary_data_size "
                                        f"{size}, expected {count * np_dtype.itemsize} bytes "
                                        f"({len(binary) - offset} left in the body)")
            arr = np.frombuffer(binary, np_dtype, count, offset).reshape(shape)
            offset += size
        else:
            data = t.get("data")
            if data is None:
                raise RequestError(400, f"model '{model.name}', input '{name}': no 'data' and "
                                        "no binary_data_size")
            arr = np.asarray(data, dtype=np_dtype).reshape(-1)
            if arr.size != count:
                raise RequestError(400, f"model '{model.name}', input '{name}': {arr.size} "
                                        f"values for shape {shape}")
            arr = arr.reshape(shape)
        feed[name] = arr
    if offset != len(binary):
        raise RequestError(400, f"model '{model.name}': {len(binary) - offset} bytes of binary "
                                "data no input claimed")
    missing = [n for n in model.inputs if n not in feed]
    if missing:
        raise RequestError(400, f"model '{model.name}': missing input(s) {missing}")
    return feed


def encode_outputs(model, header, results):
    """(JSON header dict, binary bytes) of the response."""
    params = header.get("parameters") or {}
    all_binary = bool(params.get("binary_data_output"))
    wanted = header.get("outputs")
    if wanted:
        names = [o["name"] for o in wanted]
        binary_of = {o["name"]: bool((o.get("parameters") or {}).get("binary_data", all_binary))
                     for o in wanted}
    else:
        names = model.output_names
        binary_of = {n: all_binary for n in names}
    outputs, chunks = [], []
    for n in names:
        if n not in results:
            raise RequestError(400, f"model '{model.name}': unknown output '{n}'")
        arr = np.ascontiguousarray(results[n])
        out = {"name": n, "datatype": NP_TO_KSERVE[arr.dtype], "shape": list(arr.shape)}
        if binary_of[n]:
            raw = arr.tobytes()
            out["parameters"] = {"binary_data_size": len(raw)}
            chunks.append(raw)
        else:
            out["data"] = arr.reshape(-1).tolist()
        outputs.append(out)
    body = {"model_name": model.name, "model_version": model.version, "outputs": outputs}
    if "id" in header:
        body["id"] = header["id"]
    return body, b"".join(chunks)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    # Headers and body go out in two writes: without TCP_NODELAY, Nagle's algorithm holds the
    # body until the client's delayed ACK (~40 ms per request).
    disable_nagle_algorithm = True
    server_version = "ort-kserve"

    def log_message(self, fmt, *args):  # no per-request log lines
        pass

    def _send(self, status, body=b"", headers=None, content_type="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if body:
            self.wfile.write(body)

    def _json(self, status, obj):
        self._send(status, json.dumps(obj).encode())

    def _model(self, name, version):
        versions = self.server.models.get(name)
        if versions is None:
            raise RequestError(404, f"unknown model '{name}'")
        if version:
            if version not in versions:
                raise RequestError(404, f"model '{name}' has no version '{version}'")
            return versions[version]
        return versions[max(versions, key=int)]

    def _dispatch(self, method):
        path = self.path.split("?", 1)[0]
        if method == "GET" and path == "/v2/health/live":
            return self._send(200)
        if method == "GET" and path == "/v2/health/ready":
            return self._send(200 if self.server.ready.is_set() else 503)
        if method == "GET" and path == "/v2":
            return self._json(200, {"name": "ort-kserve", "version": ort.__version__,
                                    "extensions": ["binary_tensor_data"]})
        m = MODEL_PATH.match(path)
        if not m:
            raise RequestError(404, f"no such endpoint: {method} {path}")
        if not self.server.ready.is_set():
            raise RequestError(503, "models are still loading")
        model = self._model(m.group(1), m.group(2))
        what = m.group(3)
        if method == "GET" and what is None:
            return self._json(200, model.metadata())
        if method == "GET" and what == "/ready":
            return self._send(200)
        if method == "GET" and what == "/config":
            return self._json(200, model.config())
        if method == "POST" and what == "/infer":
            return self._infer(model)
        raise RequestError(405, f"{method} not allowed on {path}")

    def _infer(self, model):
        body, length = self.body, len(self.body)
        hlen = self.headers.get("Inference-Header-Content-Length")
        hlen = int(hlen) if hlen is not None else length
        if hlen > length:
            raise RequestError(400, f"Inference-Header-Content-Length {hlen} > body {length}")
        try:
            header = json.loads(body[:hlen])
        except ValueError as e:
            raise RequestError(400, f"malformed JSON in the request: {e}")
        feed = decode_inputs(model, header, memoryview(body)[hlen:])
        try:
            results = dict(zip(model.output_names, model.session.run(model.output_names, feed)))
        except Exception as e:  # noqa: BLE001 - ORT's errors are plain exceptions
            raise RequestError(500, f"model '{model.name}' failed: {e}")
        resp, binary = encode_outputs(model, header, results)
        text = json.dumps(resp).encode()
        if binary:
            return self._send(200, text + binary, {"Inference-Header-Content-Length": len(text)},
                              "application/octet-stream")
        return self._send(200, text)

    def _handle(self, method):
        try:
            # The body is read before anything can fail, so that an error answer leaves the
            # keep-alive connection at the next request.
            length = int(self.headers.get("Content-Length", "0"))
            self.body = self.rfile.read(length) if length else b""
            if len(self.body) != length:
                self.close_connection = True
                raise RequestError(400, f"truncated body: {len(self.body)} of {length} bytes")
            self._dispatch(method)
        except RequestError as e:
            self._json(e.status, {"error": str(e)})
        except ValueError as e:  # a bad Content-Length or header value
            self.close_connection = True
            self._json(400, {"error": f"bad request: {e}"})

    def do_GET(self):  # noqa: N802 - http.server's naming
        self._handle("GET")

    def do_POST(self):  # noqa: N802
        self._handle("POST")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the listen backlog: load tests open many connections


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model-repository", required=True)
    ap.add_argument("--http-port", type=int, default=8000)
    ap.add_argument("--host", default="0.0.0.0")
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="ORT intra_op_num_threads of each session (default: all cores)")
    args = ap.parse_args(argv)
    if not os.path.isdir(args.model_repository):
        ap.error(f"--model-repository {args.model_repository}: not a directory")

    server = Server((args.host, args.http_port), Handler)
    server.models, server.ready = {}, threading.Event()
    print(f"ort serve: HTTP on {args.host}:{server.server_address[1]}", flush=True)

    def load():
        try:
            server.models = load_repository(args.model_repository, args.threads)
        except Exception as e:  # noqa: BLE001 - say why and stop
            print(f"ort serve: loading {args.model_repository} failed: {e}", file=sys.stderr,
                  flush=True)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        server.ready.set()
        print(f"ort serve: ready ({', '.join(server.models)}; ORT {ort.__version__}, "
              f"{args.threads} threads)", flush=True)

    threading.Thread(target=load, daemon=True).start()

    def stop(signum, frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server.serve_forever(poll_interval=0.1)
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
