"""Runs ONNX backend node tests through ONNX Runtime, judged by the rule `kiln test-onnx` uses.

Per test directory: load model.onnx into an InferenceSession (CPU execution provider, default
graph optimizations, one intra-op and one inter-op thread), feed each test_data_set_*/input_*.pb
to the graph inputs that are not initializers, in order, and compare every output with
output_*.pb. Each .pb is read as the proto its graph input/output type says (TensorProto,
SequenceProto, OptionalProto, MapProto), as onnx's own backend test runner does.

Comparison (same as tools/kiln/output_compare.cc): dtype and shape must match; floats pass when
|got - expected| <= atol + rtol * |expected| (rtol 1e-3, atol 1e-5; NaN matches NaN, infinities
match themselves); integers, bools and strings must be equal. Sequences compare element-wise,
optionals by presence and then value.

Outcome: PASS, FAIL (wrong result, or any other error), or UNSUPPORTED (the session cannot be
created or run because ORT says the op/type is not implemented or the graph is invalid for it).

Tests run in `jobs` long-lived worker processes; a test that runs past `timeout` seconds or
kills its worker (ORT crash) is a FAIL, and the worker is replaced, so the run goes on.
"""
import glob
import multiprocessing
import os
import re
import time
from multiprocessing.connection import wait

RTOL = 1e-3
ATOL = 1e-5

# ORT error text meaning "not implemented here" rather than "wrong answer".
_UNSUPPORTED = re.compile(
    r"NOT_IMPLEMENTED|not implemented|Could not find an implementation|INVALID_GRAPH|"
    r"No Op registered|is not a registered function/op|Unsupported|not supported|"
    r"opset .* is under development|ONNX Runtime only \*guarantees\* support|"
    r"INVALID_PROTOBUF|Type Error: Type .* is invalid", re.IGNORECASE)


# ---- comparison (pure numpy; unit tested) --------------------------------------------------

def _is_float(dtype):
    return dtype.kind in "fc" or "float" in dtype.name  # ml_dtypes bfloat16/float8 are kind V


def _is_string(dtype):
    return dtype.kind in "OSU"


def _text(v):
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def compare_tensor(name, expected, got, rtol=RTOL, atol=ATOL):
    """None when `got` matches `expected` by the kiln test-onnx rule, else the reason."""
    import numpy as np

    expected = np.asarray(expected)
    got = np.asarray(got)
    if _is_string(expected.dtype) and _is_string(got.dtype):
        pass  # object/bytes/str arrays of text compare as text
    elif expected.dtype != got.dtype:
        return f"output '{name}' dtype mismatch: expected {expected.dtype}, got {got.dtype}"
    if expected.shape != got.shape:
        return (f"output '{name}' shape mismatch: expected {list(expected.shape)} "
                f"got {list(got.shape)}")
    if expected.size == 0:
        return None
    if _is_float(expected.dtype):
        e = expected.astype(np.complex128 if expected.dtype.kind == "c" else np.float64)
        g = got.astype(e.dtype)
        with np.errstate(invalid="ignore", over="ignore"):
            close = np.abs(g - e) <= atol + rtol * np.abs(e)
        ok = (np.isnan(e) & np.isnan(g)) | (~np.isnan(e) & ~np.isnan(g) & ((e == g) | close))
    elif _is_string(expected.dtype):
        ev = [_text(v) for v in expected.reshape(-1)]
        gv = [_text(v) for v in got.reshape(-1)]
        ok = np.array([a == b for a, b in zip(ev, gv)]).reshape(expected.shape)
    elif expected.dtype == np.bool_:
        ok = expected == got
    else:
        ok = expected == got
    bad = np.flatnonzero(~np.asarray(ok).reshape(-1))
    if bad.size == 0:
        return None
    i = int(bad[0])
    return (f"output '{name}' element {i}: expected {expected.reshape(-1)[i]}, got "
            f"{got.reshape(-1)[i]} ({bad.size} of {expected.size} elements differ)")


def compare_value(name, expected, got, rtol=RTOL, atol=ATOL):
    """Like compare_tensor, for tensors, sequences (lists), optionals (None) and maps (dicts)."""
    if expected is None or got is None:
        if expected is None and got is None:
            return None
        def what(v):
            return "none" if v is None else "a value"

        return f"output '{name}' optional mismatch: expected {what(expected)}, got {what(got)}"
    if isinstance(expected, dict):
        if not isinstance(got, dict) or set(expected) != set(got):
            return f"output '{name}' map keys differ"
        for k in expected:
            r = compare_value(f"{name}[{k}]", expected[k], got[k], rtol, atol)
            if r:
                return r
        return None
    if isinstance(expected, list):
        if not isinstance(got, list):
            return f"output '{name}': expected a sequence, got {type(got).__name__}"
        if len(expected) != len(got):
            return f"output '{name}' sequence length: expected {len(expected)}, got {len(got)}"
        for k, (e, g) in enumerate(zip(expected, got)):
            r = compare_value(f"{name}[{k}]", e, g, rtol, atol)
            if r:
                return r
        return None
    if isinstance(got, (list, dict)):
        return f"output '{name}': expected a tensor, got {type(got).__name__}"
    return compare_tensor(name, expected, got, rtol, atol)


def classify_error(message):
    """UNSUPPORTED when an ORT error says the op/type/graph is not supported, else FAIL."""
    return "UNSUPPORTED" if _UNSUPPORTED.search(message) else "FAIL"


# ---- running one test (in a worker) -------------------------------------------------------

def _numbered(directory, prefix):
    files = glob.glob(os.path.join(directory, f"{prefix}*.pb"))
    return sorted(files, key=lambda p: int(re.findall(r"\d+", os.path.basename(p))[-1]))


def _read_value(path, type_proto):
    import onnx
    from onnx import numpy_helper

    kind = type_proto.WhichOneof("value") if type_proto is not None else "tensor_type"
    proto = {"sequence_type": onnx.SequenceProto, "optional_type": onnx.OptionalProto,
             "map_type": onnx.MapProto}.get(kind, onnx.TensorProto)()
    with open(path, "rb") as f:
        proto.ParseFromString(f.read())
    if isinstance(proto, onnx.SequenceProto):
        return numpy_helper.to_list(proto)
    if isinstance(proto, onnx.OptionalProto):
        return numpy_helper.to_optional(proto)
    if isinstance(proto, onnx.MapProto):
        return numpy_helper.to_dict(proto)
    return numpy_helper.to_array(proto)


# ONNX element types that ORT's Python binding cannot turn into / from numpy arrays
# (bfloat16, float8s, 4-bit ints and floats, float8e8m0): fed and read as raw bytes.
_NON_NUMPY = {16, 17, 18, 19, 20, 21, 22, 23, 24}


def _elem_type(type_proto):
    return type_proto.tensor_type.elem_type if type_proto.HasField("tensor_type") else 0


def _needs_ort_value(value):
    dtype = getattr(value, "dtype", None)
    return dtype is not None and dtype.type.__module__ != "numpy"  # ml_dtypes types


def _run_with_ort_values(sess, inputs, outputs, feeds):
    """sess.run for models with non-numpy element types: every feed becomes an OrtValue, raw
    bytes for bfloat16/float8/int4..., and non-numpy outputs are read back as raw bytes."""
    import ctypes

    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    types = {i.name: _elem_type(i.type) for i in inputs}
    ort_feeds = {}
    for name, value in feeds.items():
        if _needs_ort_value(value) or types.get(name) in _NON_NUMPY:
            raw = numpy_helper.from_array(value).raw_data
            v = ort.OrtValue.ortvalue_from_shape_and_type(list(value.shape), types[name])
            if raw:
                ctypes.memmove(v.data_ptr(), raw, len(raw))
        else:
            v = ort.OrtValue.ortvalue_from_numpy(value)
        ort_feeds[name] = v
    got = sess.run_with_ort_values([o.name for o in outputs], ort_feeds)
    out = []
    for o, v in zip(outputs, got):
        et = _elem_type(o.type)
        if et in _NON_NUMPY:
            t = onnx.TensorProto(dims=v.shape(), data_type=et)
            n = v.tensor_size_in_bytes()
            t.raw_data = ctypes.string_at(v.data_ptr(), n) if n else b""
            out.append(numpy_helper.to_array(t))
        else:
            out.append(v.numpy())
    return out


def _first_line(text):
    text = str(text).strip()
    return text.splitlines()[0] if text else text


def run_one(test_dir, rtol=RTOL, atol=ATOL):
    """(status, reason) of one test through ONNX Runtime."""
    import onnx
    import onnxruntime as ort

    model_path = os.path.join(test_dir, "model.onnx")
    model = onnx.load(model_path, load_external_data=False)
    init = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in init]
    outputs = list(model.graph.output)

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 4  # errors come back as exceptions; keep stderr quiet
    try:
        sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - every load error is this test's verdict
        msg = _first_line(e)
        return classify_error(msg), f"load: {msg}"

    sets = sorted(glob.glob(os.path.join(test_dir, "test_data_set_*")),
                  key=lambda p: int(p.rsplit("_", 1)[-1]))
    if not sets:
        return "FAIL", "no test_data_set_* directory"
    for s in sets:
        prefix = f"{os.path.basename(s)}: " if len(sets) > 1 else ""
        in_files = _numbered(s, "input_")
        out_files = _numbered(s, "output_")
        if len(in_files) > len(inputs):
            return "FAIL", (f"{prefix}test data has {len(in_files)} inputs, "
                            f"the model has {len(inputs)}")
        feeds = {inputs[k].name: _read_value(p, inputs[k].type) for k, p in enumerate(in_files)}
        expected = [_read_value(p, outputs[k].type if k < len(outputs) else None)
                    for k, p in enumerate(out_files)]
        try:
            if any(_needs_ort_value(v) for v in feeds.values()) or any(
                    _elem_type(o.type) in _NON_NUMPY for o in outputs):
                got = _run_with_ort_values(sess, inputs, outputs, feeds)
            else:
                got = sess.run([o.name for o in outputs], feeds)
        except Exception as e:  # noqa: BLE001
            msg = _first_line(e)
            return classify_error(msg), f"{prefix}run: {msg}"
        if len(got) != len(expected):
            return "FAIL", f"{prefix}expected {len(expected)} outputs, got {len(got)}"
        for k, (e, g) in enumerate(zip(expected, got)):
            r = compare_value(outputs[k].name, e, g, rtol, atol)
            if r:
                return "FAIL", prefix + r
    return "PASS", ""


# ---- the pool ----------------------------------------------------------------------------

def _worker(conn, rtol, atol, runner):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        import onnxruntime

        onnxruntime.set_default_logger_severity(4)
    except ImportError:
        pass
    while True:
        try:
            test_dir = conn.recv()
        except EOFError:
            return
        if test_dir is None:
            return
        t0 = time.monotonic()
        try:
            status, reason = runner(test_dir, rtol, atol)
        except Exception as e:  # noqa: BLE001 - e.g. unreadable test data
            status, reason = "FAIL", f"harness: {type(e).__name__}: {_first_line(e)}"
        conn.send((status, reason, time.monotonic() - t0))


class _Slot:
    def __init__(self, ctx, rtol, atol, runner):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, rtol, atol, runner), daemon=True)
        self.proc.start()
        child.close()
        self.task = None  # (name, started)

    def kill(self):
        self.proc.kill()
        self.proc.join()
        self.conn.close()


def run_tests(tests, jobs=2, timeout=60.0, rtol=RTOL, atol=ATOL, progress=None, runner=run_one):
    """Run {name: test_dir} through ORT; returns {name: {"status", "reason", "seconds"}}.

    `runner(test_dir, rtol, atol) -> (status, reason)` runs one test in a worker (a module-level
    function, as workers are spawned); `progress(name, result)` is called as tests finish."""
    ctx = multiprocessing.get_context("spawn")
    todo = list(sorted(tests.items()))
    todo.reverse()
    results = {}
    slots = [_Slot(ctx, rtol, atol, runner) for _ in range(max(1, min(jobs, len(todo))))]

    def feed(slot):
        if todo:
            name, d = todo.pop()
            slot.task = (name, time.monotonic())
            slot.conn.send(d)
        else:
            slot.task = None

    for s in slots:
        feed(s)
    while any(s.task for s in slots):
        busy = [s for s in slots if s.task]
        now = time.monotonic()
        wait_for = max(0.0, min(s.task[1] + timeout - now for s in busy))
        ready = wait([s.conn for s in busy], timeout=wait_for)
        for k, s in enumerate(slots):
            if not s.task:
                continue
            name, started = s.task
            if s.conn in ready:
                try:
                    status, reason, secs = s.conn.recv()
                    results[name] = {"status": status, "reason": reason, "seconds": secs}
                except (EOFError, OSError):
                    s.proc.join(5)
                    results[name] = {"status": "FAIL", "seconds": time.monotonic() - started,
                                     "reason": f"ORT process died (exit code {s.proc.exitcode})"}
                    s.kill()
                    s = slots[k] = _Slot(ctx, rtol, atol, runner)
            elif time.monotonic() - started > timeout:
                results[name] = {"status": "FAIL", "seconds": timeout,
                                 "reason": f"timed out after {timeout:g} s"}
                s.kill()
                s = slots[k] = _Slot(ctx, rtol, atol, runner)
            else:
                continue
            if progress:
                progress(name, results[name])
            feed(s)
    for s in slots:
        try:
            s.conn.send(None)
        except OSError:
            pass
        s.proc.join(5)
        if s.proc.is_alive():
            s.kill()
    return results
