"""A small reference KServe v2 server around ONNX Runtime, used to check the tests of
`kiln serve` themselves (the tests' expectations are the protocol's, so they must pass against
an independent implementation too). Not a product: one Python process, HTTP (http.server) and
gRPC (grpcio with tritonclient's generated service), dynamic batching, queue limits, request
timeouts, statistics, a few Prometheus counters, graceful SIGTERM.

It takes `kiln serve`'s flags and prints the same "kiln serve: HTTP on HOST:PORT" lines, so the
fixtures start either with the same code (tests/serve/conftest.py, KILN_SERVE_REFERENCE=1).
"""
import argparse
import collections
import concurrent.futures as cf
import json
import pathlib
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import onnxruntime as ort
from google.protobuf import text_format

import wire  # tests/serve/wire.py: KServe datatype names and the binary tensor encoding

ORT_TYPES = {"tensor(float)": "FP32", "tensor(double)": "FP64", "tensor(int64)": "INT64",
             "tensor(int32)": "INT32", "tensor(bool)": "BOOL", "tensor(string)": "BYTES",
             "tensor(uint8)": "UINT8", "tensor(int8)": "INT8", "tensor(float16)": "FP16"}


QUEUE_BUCKETS = (0.001, 0.01, 0.1, 1.0)


class Fail(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status  # HTTP status: 400, 404, 503, 504, 500


class Request:
    def __init__(self, inputs, outputs, req_id, timeout_us):
        self.inputs, self.outputs, self.id = inputs, outputs, req_id
        self.arrival = time.monotonic()
        self.deadline = None if not timeout_us else self.arrival + timeout_us / 1e6
        self.future = cf.Future()
        self.rows = next(iter(inputs.values())).shape[0] if inputs else 1


class Model:
    def __init__(self, name, directory):
        from tritonclient.grpc import model_config_pb2
        self.name, self.version = name, None
        versions = sorted((int(p.name) for p in directory.iterdir()
                           if p.name.isdigit() and (p / "model.onnx").is_file()))
        if not versions:
            raise Fail(400, f"model '{name}': no <version>/model.onnx")
        self.version = str(versions[-1])
        self.config = model_config_pb2.ModelConfig()
        if (directory / "config.pbtxt").is_file():
            text_format.Parse((directory / "config.pbtxt").read_text(), self.config)
        self.config.name = name
        self.config.platform = "onnxruntime_onnx"
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        self.session = ort.InferenceSession(str(directory / self.version / "model.onnx"), opts)
        self.max_batch = self.config.max_batch_size
        db = self.config.dynamic_batching if self.config.HasField("dynamic_batching") else None
        self.delay = db.max_queue_delay_microseconds / 1e6 if db else 0.0
        self.max_queue = db.default_queue_policy.max_queue_size if db else 0
        self.queue = collections.deque()
        self.cv = threading.Condition()
        self.stopping = False
        self.stats = collections.Counter()
        self.inputs = {i.name: i for i in self.session.get_inputs()}
        self.outputs = [o.name for o in self.session.get_outputs()]
        self._complete_config()
        count = self.config.instance_group[0].count if self.config.instance_group else 1
        self.workers = [threading.Thread(target=self._work, daemon=True)
                        for _ in range(max(count, 1))]
        for w in self.workers:
            w.start()

    def _complete_config(self):
        # Triton's auto-complete: the inputs and outputs from the model (no batch dimension).
        from tritonclient.grpc import model_config_pb2 as mc
        for args, field in ((self.session.get_inputs(), self.config.input),
                            (self.session.get_outputs(), self.config.output)):
            if len(field):
                continue
            for a in args:
                meta = self.tensor_meta(a)
                dims = meta["shape"][1:] if self.max_batch > 0 else meta["shape"]
                field.add(name=a.name, data_type=mc.DataType.Value("TYPE_" + {
                    "FP32": "FP32", "FP64": "FP64", "INT64": "INT64", "INT32": "INT32",
                    "BOOL": "BOOL", "BYTES": "STRING", "UINT8": "UINT8", "INT8": "INT8",
                    "FP16": "FP16"}[meta["datatype"]]), dims=dims)

    def tensor_meta(self, arg):
        shape = [d if isinstance(d, int) else -1 for d in arg.shape]
        return {"name": arg.name, "datatype": ORT_TYPES.get(arg.type, arg.type), "shape": shape}

    def check(self, name, arr, datatype):
        if name not in self.inputs:
            raise Fail(400, f"model '{self.name}': unknown input '{name}' "
                            f"(inputs: {', '.join(self.inputs)})")
        meta = self.tensor_meta(self.inputs[name])
        if datatype != meta["datatype"]:
            raise Fail(400, f"model '{self.name}' input '{name}': expected datatype "
                            f"{meta['datatype']}, got {datatype}")
        dims = meta["shape"]
        ok = len(dims) == arr.ndim and all(d in (-1, g) for d, g in zip(dims, arr.shape))
        if ok and self.max_batch > 0 and arr.shape[0] > self.max_batch:
            ok = False
        if not ok:
            raise Fail(400, f"model '{self.name}' input '{name}': expected shape {dims}, "
                            f"got {list(arr.shape)}")

    def submit(self, inputs, outputs, req_id, timeout_us):
        for name in self.inputs:
            if name not in inputs:
                raise Fail(400, f"model '{self.name}': missing input '{name}'")
        for o in outputs:
            if o not in self.outputs:
                raise Fail(400, f"model '{self.name}': unknown output '{o}'")
        req = Request(inputs, outputs or self.outputs, req_id, timeout_us)
        with self.cv:
            if self.stopping:
                raise Fail(503, f"model '{self.name}' is not available (unloading)")
            if self.max_queue and len(self.queue) >= self.max_queue:
                self.stats["fail"] += 1
                raise Fail(503, f"model '{self.name}': queue full ({self.max_queue} requests)")
            self.queue.append(req)
            self.cv.notify()
        return req.future

    def _take(self):
        with self.cv:
            while not self.queue and not self.stopping:
                self.cv.wait()
            if not self.queue:
                return None
            first = self.queue.popleft()
            batch = [first]
            if self.max_batch > 0:
                end = time.monotonic() + self.delay
                rows = first.rows
                while rows < self.max_batch:
                    if not self.queue:
                        left = end - time.monotonic()
                        if left <= 0 or self.stopping:
                            break
                        self.cv.wait(left)
                        continue
                    nxt = self.queue[0]
                    same = all(nxt.inputs[k].shape[1:] == v.shape[1:] for k, v in first.inputs.items())
                    if not same or rows + nxt.rows > self.max_batch:
                        break
                    batch.append(self.queue.popleft())
                    rows += nxt.rows
            return batch

    def _work(self):
        while True:
            batch = self._take()
            if batch is None:
                return
            now = time.monotonic()
            live = []
            for r in batch:
                if r.deadline is not None and now > r.deadline:
                    self.stats["fail"] += 1
                    r.future.set_exception(Fail(504, f"model '{self.name}': request '{r.id}' "
                                                     "timed out in the queue"))
                else:
                    live.append(r)
            if not live:
                continue
            try:
                feeds = {k: np.concatenate([r.inputs[k] for r in live]) if len(live) > 1
                         else live[0].inputs[k] for k in self.inputs}
                feeds = {k: (np.vectorize(bytes.decode, otypes=[object])(v) if v.dtype == object
                             else v) for k, v in feeds.items()}
                outs = dict(zip(self.outputs, self.session.run(self.outputs, feeds)))
            except Exception as e:  # noqa: BLE001 - answered, not raised
                for r in live:
                    r.future.set_exception(Fail(500, f"model '{self.name}': {e}"))
                continue
            self.stats["exec"] += 1
            start = 0
            for r in live:
                sl = {o: (outs[o][start:start + r.rows] if len(live) > 1 else outs[o])
                      for o in r.outputs}
                start += r.rows
                self.stats["success"] += 1
                self.stats["rows"] += r.rows
                waited = now - r.arrival
                self.stats["queue_s"] += waited
                for le in QUEUE_BUCKETS:
                    self.stats[f"queue_le_{le}"] += waited <= le
                r.future.set_result(sl)

    def stop(self):
        with self.cv:
            self.stopping = True
            for r in self.queue:
                r.future.set_exception(Fail(503, f"model '{self.name}' was unloaded"))
            self.queue.clear()
            self.cv.notify_all()


class Repo:
    def __init__(self, root, control, load):
        self.root = pathlib.Path(root)
        self.models = {}
        self.lock = threading.Lock()
        self.shutting_down = False
        self.control = control
        names = sorted(p.name for p in self.root.iterdir() if p.is_dir())
        for name in (names if control != "explicit" or "*" in load else load):
            self.load(name)

    def check_control(self, what):
        """Triton refuses the repository API outside explicit model control."""
        if self.control != "explicit":
            raise Fail(503, f"model {what} is not allowed in model control mode '{self.control}'")

    def api_load(self, name):
        self.check_control("load")
        self.load(name)

    def api_unload(self, name):
        self.check_control("unload")
        self.unload(name)

    def load(self, name):
        if not (self.root / name).is_dir():
            raise Fail(404, f"model '{name}' is not in the repository")
        model = Model(name, self.root / name)
        with self.lock:
            old = self.models.get(name)
            self.models[name] = model
        if old:
            old.stop()

    def unload(self, name):
        with self.lock:
            model = self.models.pop(name, None)
        if model is None:
            raise Fail(404, f"model '{name}' is not loaded")
        model.stop()

    def get(self, name, version=""):
        with self.lock:
            model = self.models.get(name)
        if model is None:
            raise Fail(404, f"unknown model '{name}'")
        if version and version != model.version:
            raise Fail(404, f"unknown version '{version}' of model '{name}'")
        return model

    def metadata(self, name, version=""):
        m = self.get(name, version)
        return {"name": m.name, "versions": [m.version], "platform": "onnxruntime_onnx",
                "inputs": [m.tensor_meta(i) for i in m.session.get_inputs()],
                "outputs": [m.tensor_meta(o) for o in m.session.get_outputs()]}

    def index(self):
        rows = []
        for p in sorted(self.root.iterdir()):
            if p.is_dir():
                m = self.models.get(p.name)
                rows.append({"name": p.name, "version": m.version if m else "",
                             "state": "READY" if m else "UNAVAILABLE",
                             "reason": "" if m else "unloaded"})
        return rows

    def statistics(self, name="", version=""):
        models = [self.get(name, version)] if name else list(self.models.values())
        out = []
        for m in models:
            s = m.stats
            out.append({"name": m.name, "version": m.version, "inference_count": s["rows"],
                        "execution_count": s["exec"],
                        "last_inference": 0, "batch_stats": [],
                        "inference_stats": {
                            "success": {"count": s["success"], "ns": 0},
                            "fail": {"count": s["fail"], "ns": 0},
                            **{k: {"count": s["success"], "ns": 0} for k in (
                                "queue", "compute_input", "compute_infer", "compute_output")},
                            **{k: {"count": 0, "ns": 0} for k in ("cache_hit", "cache_miss")}}})
        return out

    def metrics(self):
        lines = ["# HELP ref_request_success Requests answered with a result.",
                 "# TYPE ref_request_success counter"]
        for m in list(self.models.values()):
            lines.append(f'ref_request_success{{model="{m.name}",version="{m.version}"}} '
                         f'{m.stats["success"]}')
        lines += ["# HELP ref_queue_seconds Time in the queue.",
                  "# TYPE ref_queue_seconds histogram"]
        for m in list(self.models.values()):
            lab = f'model="{m.name}",version="{m.version}"'
            for le in QUEUE_BUCKETS:
                lines.append(f'ref_queue_seconds_bucket{{{lab},le="{le}"}} '
                             f'{m.stats[f"queue_le_{le}"]}')
            lines.append(f'ref_queue_seconds_bucket{{{lab},le="+Inf"}} {m.stats["success"]}')
            lines.append(f'ref_queue_seconds_sum{{{lab}}} {m.stats["queue_s"]}')
            lines.append(f'ref_queue_seconds_count{{{lab}}} {m.stats["success"]}')
        return "\n".join(lines) + "\n"


def decode_infer(repo, name, version, body, header_len):
    """Parses an HTTP infer body (JSON, or JSON + binary tensors) into a queued request."""
    model = repo.get(name, version)
    if repo.shutting_down:
        raise Fail(503, "server is shutting down")
    head = body[:header_len] if header_len is not None else body
    try:
        req = json.loads(head)
    except (ValueError, UnicodeDecodeError) as e:
        raise Fail(400, f"malformed JSON in the infer request: {e}") from None
    binary = body[header_len:] if header_len is not None else b""
    offset = 0
    inputs = {}
    for t in req.get("inputs", []):
        dt, shape = t["datatype"], t["shape"]
        size = (t.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            if offset + size > len(binary):
                raise Fail(400, f"input '{t['name']}': binary data truncated "
                                f"({len(binary) - offset} of {size} bytes)")
            arr = wire.from_bytes(binary[offset:offset + size], dt, shape, t["name"])
            offset += size
        else:
            arr = wire.from_json(t.get("data", []), dt, shape, t["name"])
        model.check(t["name"], arr, dt)
        inputs[t["name"]] = arr
    params = req.get("parameters") or {}
    outs = req.get("outputs") or []
    want = [o["name"] for o in outs]
    binary_out = {o["name"]: (o.get("parameters") or {}).get("binary_data", False) for o in outs}
    default_binary = params.get("binary_data_output", False)
    fut = model.submit(inputs, want, req.get("id", ""), params.get("timeout"))
    return model, req.get("id", ""), fut, binary_out, default_binary


def encode_infer(model, req_id, outputs, binary_out, default_binary):
    jouts, blobs = [], []
    for name, arr in outputs.items():
        dt = wire.datatype_of(arr)
        o = {"name": name, "datatype": dt, "shape": list(arr.shape)}
        if binary_out.get(name, default_binary):
            blob = wire.to_bytes(arr)
            o["parameters"] = {"binary_data_size": len(blob)}
            blobs.append(blob)
        else:
            o["data"] = wire.to_json(arr)
        jouts.append(o)
    resp = {"model_name": model.name, "model_version": model.version, "outputs": jouts}
    if req_id:
        resp["id"] = req_id
    head = json.dumps(resp).encode()
    return head, b"".join(blobs)


def make_http_handler(repo, metrics_only=False):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def reply(self, status, obj=None, raw=None, header_len=None):
            body = raw if raw is not None else json.dumps(obj if obj is not None else {}).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Content-Type", "application/json" if header_len is None
                             else "application/octet-stream")
            if header_len is not None:
                self.send_header("Inference-Header-Content-Length", str(header_len))
            self.end_headers()
            self.wfile.write(body)

        def route(self, method):
            parts = [p for p in self.path.split("?")[0].split("/") if p]
            if metrics_only:
                if parts == ["metrics"]:
                    raw = repo.metrics().encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                    return
                raise Fail(404, f"no route {self.path}")
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            if len(body) != length:
                raise Fail(400, "request body truncated")
            if parts[:1] != ["v2"]:
                raise Fail(404, f"no route {self.path}")
            p = parts[1:]
            if p == []:
                return self.reply(200, {"name": "reference", "version": "0",
                                        "extensions": ["binary_tensor_data", "statistics",
                                                       "model_repository"]})
            if p == ["health", "live"]:
                return self.reply(200)
            if p == ["health", "ready"]:
                return self.reply(503 if repo.shutting_down else 200)
            if p[:1] == ["repository"]:
                if p == ["repository", "index"]:
                    return self.reply(200, repo.index())
                if len(p) == 4 and p[1] == "models" and p[3] in ("load", "unload"):
                    (repo.api_load if p[3] == "load" else repo.api_unload)(p[2])
                    return self.reply(200)
            if p == ["models", "stats"]:
                return self.reply(200, {"model_stats": repo.statistics()})
            if p[:1] == ["models"] and len(p) >= 2:
                name, rest, version = p[1], p[2:], ""
                if rest[:1] == ["versions"] and len(rest) >= 2:
                    version, rest = rest[1], rest[2:]
                if rest == [] and method == "GET":
                    return self.reply(200, repo.metadata(name, version))
                if rest == ["ready"]:
                    repo.get(name, version)
                    return self.reply(200)
                if rest == ["config"]:
                    from google.protobuf.json_format import MessageToDict
                    cfg = MessageToDict(repo.get(name, version).config,
                                        preserving_proto_field_name=True)
                    return self.reply(200, cfg)
                if rest == ["stats"]:
                    return self.reply(200, {"model_stats": repo.statistics(name, version)})
                if rest == ["infer"] and method == "POST":
                    hl = self.headers.get("Inference-Header-Content-Length")
                    model, rid, fut, bo, db = decode_infer(repo, name, version, body,
                                                          int(hl) if hl else None)
                    outs = fut.result()
                    head, blob = encode_infer(model, rid, outs, bo, db)
                    if blob:
                        return self.reply(200, raw=head + blob, header_len=len(head))
                    return self.reply(200, raw=head)
            raise Fail(404, f"no route {method} {self.path}")

        def handle_method(self, method):
            try:
                self.route(method)
            except Fail as e:
                self.reply(e.status, {"error": str(e)})
            except (ConnectionError, BrokenPipeError):
                pass
            except Exception as e:  # noqa: BLE001
                self.reply(400, {"error": f"{type(e).__name__}: {e}"})

        def do_GET(self):
            self.handle_method("GET")

        def do_POST(self):
            self.handle_method("POST")

    return Handler


def start_grpc(repo, port):
    import grpc
    from tritonclient.grpc import service_pb2 as pb
    from tritonclient.grpc import service_pb2_grpc as pbg
    codes = {400: grpc.StatusCode.INVALID_ARGUMENT, 404: grpc.StatusCode.NOT_FOUND,
             503: grpc.StatusCode.UNAVAILABLE, 504: grpc.StatusCode.DEADLINE_EXCEEDED,
             500: grpc.StatusCode.INTERNAL}

    def guard(fn):
        def call(self, request, context):
            try:
                return fn(self, request, context)
            except Fail as e:
                context.abort(codes[e.status], str(e))
            except wire.WireError as e:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        return call

    class Service(pbg.GRPCInferenceServiceServicer):
        @guard
        def ServerLive(self, request, context):
            return pb.ServerLiveResponse(live=True)

        @guard
        def ServerReady(self, request, context):
            return pb.ServerReadyResponse(ready=not repo.shutting_down)

        @guard
        def ModelReady(self, request, context):
            try:
                repo.get(request.name, request.version)
                return pb.ModelReadyResponse(ready=True)
            except Fail:
                return pb.ModelReadyResponse(ready=False)

        @guard
        def ServerMetadata(self, request, context):
            return pb.ServerMetadataResponse(name="reference", version="0")

        @guard
        def ModelMetadata(self, request, context):
            md = repo.metadata(request.name, request.version)
            r = pb.ModelMetadataResponse(name=md["name"], versions=md["versions"],
                                         platform=md["platform"])
            for src, dst in ((md["inputs"], r.inputs), (md["outputs"], r.outputs)):
                for t in src:
                    dst.add(name=t["name"], datatype=t["datatype"], shape=t["shape"])
            return r

        @guard
        def ModelConfig(self, request, context):
            r = pb.ModelConfigResponse()
            r.config.CopyFrom(repo.get(request.name, request.version).config)
            return r

        @guard
        def ModelStatistics(self, request, context):
            r = pb.ModelStatisticsResponse()
            for s in repo.statistics(request.name, request.version):
                m = r.model_stats.add(name=s["name"], version=s["version"],
                                      inference_count=s["inference_count"],
                                      execution_count=s["execution_count"])
                m.inference_stats.success.count = s["inference_stats"]["success"]["count"]
                m.inference_stats.fail.count = s["inference_stats"]["fail"]["count"]
            return r

        @guard
        def RepositoryIndex(self, request, context):
            r = pb.RepositoryIndexResponse()
            for row in repo.index():
                r.models.add(**row)
            return r

        @guard
        def RepositoryModelLoad(self, request, context):
            repo.api_load(request.model_name)
            return pb.RepositoryModelLoadResponse()

        @guard
        def RepositoryModelUnload(self, request, context):
            repo.api_unload(request.model_name)
            return pb.RepositoryModelUnloadResponse()

        @guard
        def ModelInfer(self, request, context):
            model = repo.get(request.model_name, request.model_version)
            if repo.shutting_down:
                raise Fail(503, "server is shutting down")
            inputs = {}
            for i, t in enumerate(request.inputs):
                if i < len(request.raw_input_contents):
                    arr = wire.from_bytes(request.raw_input_contents[i], t.datatype,
                                          list(t.shape), t.name)
                else:
                    arr = wire.from_grpc_contents(t.contents, t.datatype, list(t.shape), t.name)
                model.check(t.name, arr, t.datatype)
                inputs[t.name] = arr
            timeout = (request.parameters["timeout"].int64_param
                       if "timeout" in request.parameters else None)
            fut = model.submit(inputs, [o.name for o in request.outputs], request.id, timeout)
            outs = fut.result()
            r = pb.ModelInferResponse(model_name=model.name, model_version=model.version,
                                      id=request.id)
            for name, arr in outs.items():
                r.outputs.add(name=name, datatype=wire.datatype_of(arr), shape=list(arr.shape))
                r.raw_output_contents.append(wire.to_bytes(arr))
            return r

    server = grpc.server(cf.ThreadPoolExecutor(max_workers=32))
    pbg.add_GRPCInferenceServiceServicer_to_server(Service(), server)
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    return server, bound


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-repository", required=True)
    ap.add_argument("--http-port", type=int, default=8000)
    ap.add_argument("--grpc-port", type=int, default=8001)
    ap.add_argument("--metrics-port", type=int, default=8002)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--no-preemption", action="store_true")
    ap.add_argument("--no-be-padding", action="store_true")
    ap.add_argument("--model-control-mode", default="none")
    ap.add_argument("--load-model", action="append", default=[])
    args = ap.parse_args()

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    repo = Repo(args.model_repository, args.model_control_mode, args.load_model)
    ThreadingHTTPServer.daemon_threads = False
    ThreadingHTTPServer.request_queue_size = 1024  # bursts of connections (listen backlog)
    httpd = ThreadingHTTPServer(("127.0.0.1", args.http_port), make_http_handler(repo))
    metricsd = ThreadingHTTPServer(("127.0.0.1", args.metrics_port),
                                   make_http_handler(repo, metrics_only=True))
    grpcd, grpc_port = start_grpc(repo, args.grpc_port)
    for srv in (httpd, metricsd):
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    print(f"kiln serve: HTTP on 127.0.0.1:{httpd.server_address[1]}", flush=True)
    print(f"kiln serve: gRPC on 127.0.0.1:{grpc_port}", flush=True)
    print(f"kiln serve: metrics on 127.0.0.1:{metricsd.server_address[1]}", flush=True)

    stop.wait()
    repo.shutting_down = True
    httpd.shutdown()      # stop accepting; handler threads in flight are joined below
    httpd.server_close()
    grpcd.stop(grace=30).wait()
    metricsd.shutdown()
    for m in list(repo.models.values()):
        m.stop()
    sys.exit(0)


if __name__ == "__main__":
    main()
