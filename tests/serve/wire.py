"""KServe v2 tensor encodings, written from the protocol (not from a client library): datatype
names, JSON `data` (flattened, row-major), the binary tensor data extension (raw little-endian
bytes; BYTES elements as a 4-byte little-endian length then the bytes), and raw HTTP infer
requests. Used by the raw-protocol tests and by reference_server.py."""
import json
import struct

import numpy as np

DATATYPES = {"BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32,
             "UINT64": np.uint64, "INT8": np.int8, "INT16": np.int16, "INT32": np.int32,
             "INT64": np.int64, "FP16": np.float16, "FP32": np.float32, "FP64": np.float64,
             "BYTES": np.object_}


class WireError(ValueError):
    pass


def datatype_of(arr):
    if arr.dtype == np.object_ or arr.dtype.kind in "SU":
        return "BYTES"
    for name, t in DATATYPES.items():
        if t is not np.object_ and arr.dtype == np.dtype(t):
            return name
    raise WireError(f"no KServe datatype for numpy {arr.dtype}")


def _count(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def to_bytes(arr):
    if datatype_of(arr) == "BYTES":
        out = []
        for item in arr.reshape(-1):
            b = item if isinstance(item, bytes) else str(item).encode()
            out.append(struct.pack("<I", len(b)) + b)
        return b"".join(out)
    return np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()


def from_bytes(raw, datatype, shape, name="?"):
    if datatype not in DATATYPES:
        raise WireError(f"input '{name}': unknown datatype {datatype}")
    n = _count(shape)
    if datatype == "BYTES":
        items, pos = [], 0
        while pos < len(raw):
            if pos + 4 > len(raw):
                raise WireError(f"input '{name}': truncated BYTES element")
            (size,) = struct.unpack_from("<I", raw, pos)
            if pos + 4 + size > len(raw):
                raise WireError(f"input '{name}': truncated BYTES element")
            items.append(bytes(raw[pos + 4:pos + 4 + size]))
            pos += 4 + size
        if len(items) != n:
            raise WireError(f"input '{name}': {len(items)} BYTES elements for shape {shape}")
        return np.array(items, dtype=np.object_).reshape(shape)
    dt = np.dtype(DATATYPES[datatype]).newbyteorder("<")
    if len(raw) != n * dt.itemsize:
        raise WireError(f"input '{name}': {len(raw)} bytes for shape {shape} of {datatype}")
    return np.frombuffer(raw, dtype=dt).reshape(shape).astype(dt.newbyteorder("="))


def from_json(data, datatype, shape, name="?"):
    if datatype not in DATATYPES:
        raise WireError(f"input '{name}': unknown datatype {datatype}")
    flat = np.array(data, dtype=object).reshape(-1) if datatype == "BYTES" else \
        np.array(data, dtype=DATATYPES[datatype]).reshape(-1)
    if flat.size != _count(shape):
        raise WireError(f"input '{name}': {flat.size} values for shape {shape}")
    if datatype == "BYTES":
        flat = np.array([x.encode() if isinstance(x, str) else x for x in flat], dtype=object)
    return flat.reshape(shape)


def from_grpc_contents(contents, datatype, shape, name="?"):
    field = {"BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents",
             "INT32": "int_contents", "INT64": "int64_contents", "UINT8": "uint_contents",
             "UINT16": "uint_contents", "UINT32": "uint_contents", "UINT64": "uint64_contents",
             "FP32": "fp32_contents", "FP64": "fp64_contents", "BYTES": "bytes_contents"}
    if datatype not in field:
        raise WireError(f"input '{name}': unknown datatype {datatype}")
    return from_json(list(getattr(contents, field[datatype])), datatype, shape, name)


def to_json(arr):
    if datatype_of(arr) == "BYTES":
        return [x.decode() if isinstance(x, bytes) else str(x) for x in arr.reshape(-1)]
    return arr.reshape(-1).tolist()


def infer_body(inputs, outputs=None, request_id=None, binary=False, parameters=None,
               binary_outputs=False):
    """A KServe v2 HTTP infer request: (body, headers). `inputs` maps name -> numpy array."""
    head = {"inputs": []}
    blobs = []
    for name, arr in inputs.items():
        t = {"name": name, "shape": list(arr.shape), "datatype": datatype_of(arr)}
        if binary:
            blob = to_bytes(arr)
            t["parameters"] = {"binary_data_size": len(blob)}
            blobs.append(blob)
        else:
            t["data"] = to_json(arr)
        head["inputs"].append(t)
    if outputs is not None:
        head["outputs"] = [{"name": o, "parameters": {"binary_data": binary_outputs}}
                           for o in outputs]
    if request_id is not None:
        head["id"] = request_id
    if parameters:
        head["parameters"] = parameters
    if binary_outputs and outputs is None:
        head.setdefault("parameters", {})["binary_data_output"] = True
    raw = json.dumps(head).encode()
    headers = {"Content-Type": "application/json"}
    if blobs:
        headers = {"Content-Type": "application/octet-stream",
                   "Inference-Header-Content-Length": str(len(raw))}
    return raw + b"".join(blobs), headers


def parse_infer_response(body, headers):
    """(json header, {output name: numpy array}) of an HTTP infer response."""
    hl = headers.get("Inference-Header-Content-Length")
    head = json.loads(body[:int(hl)] if hl else body)
    blob = body[int(hl):] if hl else b""
    pos = 0
    outs = {}
    for o in head.get("outputs", []):
        size = (o.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            outs[o["name"]] = from_bytes(blob[pos:pos + size], o["datatype"], o["shape"], o["name"])
            pos += size
        else:
            outs[o["name"]] = from_json(o["data"], o["datatype"], o["shape"], o["name"])
    return head, outs
