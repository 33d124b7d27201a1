"""A Kiln session from Python through the C API (include/kiln/kiln_c.h) with ctypes.

For tests and benchmarks that need one session run many times (a VAD's state carried from chunk
to chunk) without building or installing the Kiln Python package. The library is `$KILN_LIB`,
else `lib/libkiln.so` beside `$KILN_BIN`'s `bin/`, else `<repo>/build/lib/libkiln.so`.

    s = CapiSession("model.onnx", threads=2)
    outs = s.run({"input": x, "sr": np.array(16000)})   # {output name: numpy array}
"""
import ctypes
import os

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# kiln_dtype values (ONNX TensorProto numbers) <-> numpy dtypes.
_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32,
           7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64}
_CODES = {np.dtype(v): k for k, v in _DTYPES.items()}


def library_path():
    if os.environ.get("KILN_LIB"):
        return os.environ["KILN_LIB"]
    kiln_bin = os.environ.get("KILN_BIN")
    if kiln_bin:
        return os.path.join(os.path.dirname(os.path.dirname(kiln_bin)), "lib", "libkiln.so")
    return os.path.join(REPO, "build", "lib", "libkiln.so")


class KilnError(RuntimeError):
    pass


class _ValueInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("kind", ctypes.c_int), ("dtype", ctypes.c_int),
                ("rank", ctypes.c_size_t), ("dims", ctypes.POINTER(ctypes.c_int64)),
                ("symbols", ctypes.POINTER(ctypes.c_char_p))]


_lib = None


def _load():
    global _lib
    if _lib is None:
        path = library_path()
        if not os.path.isfile(path):
            raise FileNotFoundError(f"libkiln.so not found at {path}: build it "
                                    f"(ninja -C build kiln_shared) or set KILN_LIB")
        lib = ctypes.CDLL(path)
        vp = ctypes.c_void_p
        lib.kiln_last_error.restype = ctypes.c_char_p
        lib.kiln_session_options_create.argtypes = [ctypes.POINTER(vp)]
        lib.kiln_session_options_free.argtypes = [vp]
        lib.kiln_session_options_set_threads.argtypes = [vp, ctypes.c_int32]
        lib.kiln_session_options_set_opt_level.argtypes = [vp, ctypes.c_int32]
        lib.kiln_session_options_set_dim.argtypes = [vp, ctypes.c_char_p, ctypes.c_int64]
        lib.kiln_session_create.argtypes = [ctypes.c_char_p, vp, ctypes.POINTER(vp)]
        lib.kiln_session_free.argtypes = [vp]
        lib.kiln_session_output_count.argtypes = [vp, ctypes.POINTER(ctypes.c_size_t)]
        lib.kiln_session_output_info.argtypes = [vp, ctypes.c_size_t, ctypes.POINTER(_ValueInfo)]
        lib.kiln_session_run.argtypes = [vp, vp, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(vp),
                                         ctypes.c_size_t, ctypes.POINTER(vp), ctypes.c_size_t]
        lib.kiln_tensor_borrow.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int64),
                                           ctypes.c_size_t, vp, ctypes.POINTER(vp)]
        lib.kiln_tensor_free.argtypes = [vp]
        lib.kiln_tensor_dtype.argtypes = [vp, ctypes.POINTER(ctypes.c_int)]
        lib.kiln_tensor_shape.argtypes = [vp, ctypes.POINTER(ctypes.POINTER(ctypes.c_int64)),
                                          ctypes.POINTER(ctypes.c_size_t)]
        lib.kiln_tensor_nbytes.argtypes = [vp, ctypes.POINTER(ctypes.c_size_t)]
        lib.kiln_tensor_data.argtypes = [vp, ctypes.POINTER(vp)]
        _lib = lib
    return _lib


def _check(status, what):
    if status != 0:
        raise KilnError(f"{what}: {_load().kiln_last_error().decode()}")


class CapiSession:
    """One kiln_session; `run` takes and returns numpy arrays by name."""

    def __init__(self, model, threads=0, opt_level=None, dims=None):
        lib = _load()
        opts = ctypes.c_void_p()
        _check(lib.kiln_session_options_create(ctypes.byref(opts)), "options")
        try:
            _check(lib.kiln_session_options_set_threads(opts, threads), "threads")
            if opt_level is not None:
                _check(lib.kiln_session_options_set_opt_level(opts, opt_level), "opt level")
            for k, v in (dims or {}).items():
                _check(lib.kiln_session_options_set_dim(opts, k.encode(), v), f"dim {k}")
            self._s = ctypes.c_void_p()
            _check(lib.kiln_session_create(str(model).encode(), opts, ctypes.byref(self._s)),
                   f"loading {model}")
        finally:
            lib.kiln_session_options_free(opts)
        n = ctypes.c_size_t()
        _check(lib.kiln_session_output_count(self._s, ctypes.byref(n)), "output count")
        self.output_names = []
        for i in range(n.value):
            info = _ValueInfo()
            _check(lib.kiln_session_output_info(self._s, i, ctypes.byref(info)), "output info")
            self.output_names.append(info.name.decode())

    def run(self, feeds):
        lib = _load()
        # Kept alive while borrowed. (np.ascontiguousarray would make a 0-d array 1-d.)
        arrays = {k: np.asarray(v, order="C") for k, v in feeds.items()}
        names = (ctypes.c_char_p * len(arrays))(*[k.encode() for k in arrays])
        tensors = (ctypes.c_void_p * len(arrays))()
        outs = (ctypes.c_void_p * len(self.output_names))()
        try:
            for i, a in enumerate(arrays.values()):
                shape = (ctypes.c_int64 * max(a.ndim, 1))(*a.shape)
                t = ctypes.c_void_p()
                _check(lib.kiln_tensor_borrow(_CODES[a.dtype], shape, a.ndim,
                                              a.ctypes.data_as(ctypes.c_void_p), ctypes.byref(t)),
                       "borrowing an input")
                tensors[i] = t.value
            _check(lib.kiln_session_run(self._s, None, names, tensors, len(arrays), outs,
                                        len(self.output_names)), "run")
            return {name: _to_numpy(lib, outs[i]) for i, name in enumerate(self.output_names)}
        finally:
            for t in tensors:
                lib.kiln_tensor_free(t)
            for t in outs:
                lib.kiln_tensor_free(t)

    def close(self):
        if getattr(self, "_s", None):
            _load().kiln_session_free(self._s)
            self._s = None

    def __del__(self):
        self.close()


def _to_numpy(lib, t):
    code = ctypes.c_int()
    _check(lib.kiln_tensor_dtype(t, ctypes.byref(code)), "output dtype")
    dims = ctypes.POINTER(ctypes.c_int64)()
    rank = ctypes.c_size_t()
    _check(lib.kiln_tensor_shape(t, ctypes.byref(dims), ctypes.byref(rank)), "output shape")
    shape = tuple(dims[i] for i in range(rank.value))
    nbytes = ctypes.c_size_t()
    _check(lib.kiln_tensor_nbytes(t, ctypes.byref(nbytes)), "output size")
    data = ctypes.c_void_p()
    _check(lib.kiln_tensor_data(t, ctypes.byref(data)), "output data")
    buf = ctypes.string_at(data, nbytes.value) if nbytes.value else b""
    return np.frombuffer(buf, dtype=_DTYPES[code.value]).reshape(shape).copy()
