"""kiln.InferenceSession: ONNX Runtime's InferenceSession over kiln::Session.

Switching from ORT is one import: `import kiln as ort`. What maps to what, and the differences,
are in docs/python.md.
"""
import os
import shutil
import tempfile
import time
import warnings
import weakref

import numpy as np

from . import _kiln, modelmeta
from ._dtypes import numpy_dtype, ort_type
from ._errors import InvalidArgument, NoSuchFile
from .io_binding import IOBinding
from .ort_value import OrtValue, feed_value
from .run_async import submit
from .runtime_info import CPU_PROVIDER
from .session_options import SessionOptions


def _dim(size, symbol):
    """A NodeArg dim: the size, the symbol's name, or None for a dim the model leaves unnamed
    (Kiln's importer names those "unk__<value>_<axis>"; ORT shows None)."""
    if symbol:
        return None if symbol.startswith("unk__") else symbol
    return size if size >= 0 else None


class NodeArg:
    """ORT's NodeArg: name, type ("tensor(float)", "seq(tensor(int64))", ...) and shape (ints; a
    symbolic dimension as its name; None where the model names none)."""

    def __init__(self, info):
        self.name = info.name
        self.type = ort_type(info.kind, info.dtype)
        if info.kind in ("tensor", "optional_tensor"):
            self.shape = [_dim(d, s) for d, s in zip(info.shape, info.symbols)]
        else:
            self.shape = []  # ORT gives sequences no shape

    def __repr__(self):
        return f"NodeArg(name='{self.name}', type='{self.type}', shape={self.shape})"


def _check_providers(providers, provider_options):
    """ORT's provider arguments: names or (name, options) pairs. Kiln has one provider; others
    are warned about and skipped, as ORT does for providers it was not built with."""
    for p in providers or []:
        name = p[0] if isinstance(p, tuple) else p
        if name != CPU_PROVIDER:
            # Always, as ORT's Python layer warns whatever the logger's severity.
            warnings.warn(f"Specified provider '{name}' is not in available provider names. "
                          f"Available providers: '{CPU_PROVIDER}'", stacklevel=3)


def _as_feed_value(name, value, kind, dtype):
    """An input value as the native session takes it: a C-contiguous, native-byte-order numpy
    array (no copy when it already is one), a list of them for a sequence, None for an empty
    optional. A list (or tuple) for a tensor input becomes an array of the input's element
    type, as ORT converts lists; a Python scalar is refused, as ORT refuses it."""
    value = feed_value(value)
    if value is None:
        return None
    if kind in ("sequence", "optional_sequence") and isinstance(value, (list, tuple)):
        return [_as_array(feed_value(v)) for v in value]
    if isinstance(value, (list, tuple)):
        try:
            return _as_array(np.array(value, dtype=None if dtype == "str" else numpy_dtype(dtype)))
        except (TypeError, ValueError) as e:
            raise InvalidArgument(f"input '{name}': the list cannot be converted to {ort_type('tensor', dtype)}: "
                                  f"{e}") from None
    if isinstance(value, (bool, int, float, complex, str, bytes)):
        raise InvalidArgument(f"input '{name}': expected a numpy array or a list, got a Python "
                              f"{type(value).__name__} (ORT refuses these too: wrap it with np.array(..., dtype))")
    return _as_array(value)


def _as_array(value):
    a = value if isinstance(value, np.ndarray) else np.asarray(value)
    if a.dtype.kind in "OUS":
        return a  # strings: copied into Kiln's string tensors anyway
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a).reshape(a.shape)  # ascontiguousarray makes 0-d arrays 1-d
    return a


class InferenceSession:
    """Loads an ONNX model (a path or its bytes) or a compiled .kiln artifact and runs it."""

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, **kwargs):
        self._sess_options = sess_options if sess_options is not None else SessionOptions()
        _check_providers(providers, provider_options)
        self._tmpdir = None
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            data = bytes(path_or_bytes)
            # Session::load takes a path, and reads the file again when a run brings a new shape:
            # the bytes live in a private temp file for the session's lifetime.
            self._tmpdir = tempfile.mkdtemp(prefix="kiln_model_")
            weakref.finalize(self, shutil.rmtree, self._tmpdir, True)
            suffix = ".kiln" if data.startswith(modelmeta.KILN_ARTIFACT_MAGIC) else ".onnx"
            self._model_path = os.path.join(self._tmpdir, "model" + suffix)
            with open(self._model_path, "wb") as f:
                f.write(data)
        elif isinstance(path_or_bytes, (str, os.PathLike)):
            self._model_path = os.fspath(path_or_bytes)
            if not os.path.isfile(self._model_path):
                raise NoSuchFile(f"model file '{self._model_path}' does not exist")
        else:
            raise TypeError(f"Unable to load from type '{type(path_or_bytes)}'")
        self._model_bytes = path_or_bytes if self._tmpdir else None
        native_options, self._profile_path = self._sess_options._native()
        # ORT's profiling start: wall-clock ns (time.time_ns) when the profiler started, 0 when off.
        self._profiling_start_ns = time.time_ns() if self._profile_path else 0
        self._sess = _kiln.Session.load(self._model_path, native_options)
        self._inputs = [NodeArg(i) for i in self._sess.inputs()]
        self._outputs = [NodeArg(o) for o in self._sess.outputs()]
        self._input_kinds = {i.name: i.kind for i in self._sess.inputs()}
        self._input_dtypes = {i.name: i.dtype for i in self._sess.inputs()}
        self._output_index = {o.name: i for i, o in enumerate(self._outputs)}
        self._modelmeta = None

    # -- ORT's API ----------------------------------------------------------------------------

    def _feed_value(self, name, value):
        return _as_feed_value(name, value, self._input_kinds.get(name, "tensor"), self._input_dtypes.get(name, "f32"))

    def _run_native(self, output_names, feed, terminate, into=None):
        """The native run: outputs by name (all when empty), `into` maps output names to arrays
        the kernels write into (IOBinding)."""
        if output_names:
            try:
                which = [self._output_index[n] for n in output_names]
            except KeyError as e:
                raise InvalidArgument(f"Invalid output name: {e.args[0]} (outputs: "
                                      f"{', '.join(self._output_index)})") from None
        else:
            which = None
        return self._sess.run(feed, which, terminate, into or None)

    def run(self, output_names, input_feed, run_options=None):
        """Runs the model: `input_feed` maps input names to numpy arrays (lists of arrays for
        sequences, None for an empty optional; a list for a tensor input is converted to the
        input's element type, as ORT does); returns the outputs named by `output_names` (all, in
        model order, when None or empty) as numpy arrays, lists and Nones."""
        # Arrays, the common case, skip the conversions' dispatch (this is the per-call overhead).
        feed = {name: _as_array(v) if type(v) is np.ndarray else self._feed_value(name, v)
                for name, v in input_feed.items()}
        terminate = run_options._flag if run_options is not None else None
        if not output_names:
            return self._sess.run(feed, None, terminate, None)
        return self._run_native(output_names, feed, terminate)

    def run_with_ort_values(self, output_names, input_dict_ort_values, run_options=None):
        """As run, with OrtValues in and out."""
        return [OrtValue(v) for v in self.run(output_names, input_dict_ort_values, run_options)]

    def run_async(self, output_names, input_feed, callback, user_data, run_options=None):
        """Runs on a worker thread of Kiln's run pool and calls callback(results, user_data, err)
        there: results the list run() returns and err "" on success, [] and the error's message on
        failure. A missing input raises here, as in ORT."""
        missing = [i.name for i in self._inputs if i.name not in input_feed]
        if missing:
            raise InvalidArgument(f"Required inputs ({missing}) are missing from input feed "
                                  f"({list(input_feed)}).")
        feed = {name: self._feed_value(name, v) for name, v in input_feed.items()}
        terminate = run_options._flag if run_options is not None else None
        submit(lambda: self._run_native(output_names, feed, terminate), callback, user_data)

    def io_binding(self):
        return IOBinding(self)

    def run_with_iobinding(self, iobinding, run_options=None):
        """Runs with the inputs and outputs bound in `iobinding`; outputs bound to memory are
        written there by the kernels (no copy). The results are iobinding.get_outputs()."""
        if not isinstance(iobinding, IOBinding) or iobinding._session is not self:
            raise ValueError("IOBinding must be used with the session that created it.")
        iobinding._run(run_options._flag if run_options is not None else None)

    def get_profiling_start_time_ns(self):
        """When profiling started (time.time_ns() at session creation, as ORT's is on Linux); 0
        when profiling is off."""
        return self._profiling_start_ns

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_overridable_initializers(self):
        """Kiln folds initializers into the compiled model as constants: none can be overridden."""
        return []

    def get_modelmeta(self):
        if self._modelmeta is None:
            if modelmeta.is_artifact(self._model_path):
                self._modelmeta = modelmeta.from_artifact(self._sess)
            else:
                self._modelmeta = modelmeta.from_onnx(self._model_path)
        return self._modelmeta

    def get_providers(self):
        return [CPU_PROVIDER]

    def get_provider_options(self):
        return {CPU_PROVIDER: {}}

    def set_providers(self, providers=None, provider_options=None):
        _check_providers(providers, provider_options)

    def get_session_options(self):
        return self._sess_options

    def end_profiling(self):
        """Writes the Chrome trace (chrome://tracing, Perfetto) of the runs so far and returns its
        path; "" when profiling is off (enable_profiling)."""
        if not self._profile_path:
            return ""
        self._sess.write_profile()
        return self._profile_path

    # -- Kiln's extras ------------------------------------------------------------------------

    def stats(self):
        """Kernels, compile and load times, the executor and thread counts, the specializations
        held and the weight and constant bytes (kiln::SessionStats)."""
        return self._sess.stats()

    def specialize(self, dims):
        """Compiles the model now for these values of its symbolic dims (e.g. {"seq": 64}), so the
        first run at that shape is warm (docs/dynamic_shapes.md)."""
        self._sess.specialize({str(k): int(v) for k, v in dims.items()})

    def wait_for_optimized_kernels(self):
        """Blocks until every kernel runs its -O3 build: with a cold kernel cache the session first
        runs on quickly compiled kernels ("kiln.tiered_compile", on by default); time warm calls
        after this."""
        self._sess.wait_for_optimized_kernels()

    def profile_summary(self, top=15):
        """The top kernels by total time (needs enable_profiling or "kiln.profile" = "1")."""
        return self._sess.profile_summary(top)

    def memory_report(self):
        """The static memory plan and the session allocator's statistics (compiles first if needed)."""
        return self._sess.memory_report()

    def inspect(self):
        """The IR after the passes and every kernel's loop IR and C source (`kiln inspect`)."""
        return self._sess.inspect()
