"""CheckpointState: ONNX Runtime's training state object (onnxruntime.training.api.CheckpointState).

In ONNX Runtime the state exists first (loaded from generate_artifacts' checkpoint) and the
Module trains it. Kiln's native TrainingSession owns the parameters, running statistics and
optimizer state, so a CheckpointState here is a view: before a Module takes it, it is the
checkpoint file it was loaded from (or nothing: the model's own initializers); once a Module
uses it, `parameters` reads and writes the session's values, and save_checkpoint writes
everything the session holds (Kiln always includes the optimizer state).

Checkpoint files are Kiln's (TrainingSession::save_checkpoint: parameters, running statistics,
optimizer state, step counter and a string map, written atomically); `properties` live in that
string map.
"""
import os
import struct

import numpy as np

from .._errors import InvalidArgument, NoSuchFile

_PROPERTY_PREFIX = "property:"
# kiln::DType codes (include/kiln/dtype.h) of the tensors a checkpoint can be read back as.
_NUMPY_DTYPES = {0: np.float32, 1: np.float64, 2: np.float16, 6: np.int32, 7: np.int64}


def _read_checkpoint(path):
    """(step, extra, {tensor name: ndarray}) of a Kiln checkpoint, for a state no Module has taken
    yet. The native reader (load into a Module) checks the checksum; this one checks lengths."""
    with open(path, "rb") as f:
        data = f.read()
    pos = 0

    def take(n, what):
        nonlocal pos
        if pos + n > len(data):
            raise InvalidArgument(f"checkpoint '{path}': truncated while reading {what}")
        pos += n
        return data[pos - n:pos]

    def string(what):
        (n,) = struct.unpack("<I", take(4, what))
        return take(n, what)

    if take(8, "the magic") != b"KILNCKPT":
        raise InvalidArgument(f"'{path}' is not a Kiln checkpoint (no KILNCKPT magic)")
    version, step = struct.unpack("<Iq", take(12, "the header"))
    if version != 1:
        raise InvalidArgument(f"checkpoint '{path}': version {version}, this reader knows 1")
    extra = {}
    (count,) = struct.unpack("<I", take(4, "the extra count"))
    for _ in range(count):
        key = string("an extra key").decode()
        extra[key] = string("an extra value").decode()
    tensors = {}
    (count,) = struct.unpack("<I", take(4, "the tensor count"))
    for _ in range(count):
        name = string("a tensor name").decode()
        dtype, rank = struct.unpack("<iI", take(8, f"tensor '{name}'"))
        shape = struct.unpack(f"<{rank}q", take(8 * rank, f"tensor '{name}' dims"))
        raw = string(f"tensor '{name}' data")
        if dtype in _NUMPY_DTYPES:
            tensors[name] = np.frombuffer(raw, dtype=_NUMPY_DTYPES[dtype]).reshape(shape).copy()
    return step, extra, tensors


def _encode(value):
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InvalidArgument(f"a checkpoint property is an int, a float or a str, got {type(value).__name__}")
    return {int: "i:", float: "f:", str: "s:"}[type(value)] + str(value)


def _decode(text):
    kind, value = text[:2], text[2:]
    return int(value) if kind == "i:" else float(value) if kind == "f:" else value


class Parameter:
    """One trained parameter: `data` (a copy; assigning writes it), `grad` (the gradient the
    Module accumulated since the last reset, or None) and `requires_grad` (always True: Kiln's
    state holds the trained parameters; frozen initializers stay in the model)."""

    def __init__(self, state, name):
        self._state, self.name = state, name

    @property
    def data(self):
        return self._state._get(self.name)

    @data.setter
    def data(self, value):
        self._state._set(self.name, value)

    @property
    def grad(self):
        m = self._state._module
        return None if m is None or m._grads is None else m._grads.get(self.name)

    @property
    def requires_grad(self):
        return True

    def __repr__(self):
        d = self.data
        return f"Parameter(name='{self.name}', shape={list(d.shape)}, dtype={d.dtype})"


class Parameters:
    """The parameters by name: state.parameters["fc.weight"].data, state.parameters[name] = array."""

    def __init__(self, state):
        self._state = state

    def _names(self):
        return self._state._names()

    def __getitem__(self, name):
        if name not in self._names():
            raise KeyError(f"'{name}' is not a trained parameter")
        return Parameter(self._state, name)

    def __setitem__(self, name, value):
        self._state._set(name, value)

    def __contains__(self, name):
        return name in self._names()

    def __iter__(self):
        return iter(self._names())

    def __len__(self):
        return len(self._names())

    def __repr__(self):
        return f"Parameters({self._names()})"


class Properties(dict):
    """User properties saved with the checkpoint (int, float or str values), as in ONNX Runtime."""

    def __setitem__(self, key, value):
        _encode(value)  # type check
        super().__setitem__(str(key), value)


class CheckpointState:
    """The training state a Module trains. CheckpointState() starts from the model's initializers;
    CheckpointState.load_checkpoint(path) from a Kiln checkpoint."""

    def __init__(self, path=None):
        self._path = None if path is None else os.fspath(path)
        self._module = None  # the Module that owns the state once it takes it
        self._pending = {}  # parameter values set before a Module took the state
        self._file_tensors = {}
        self.properties = Properties()
        if self._path is not None:
            if not os.path.isfile(self._path):
                raise NoSuchFile(f"checkpoint '{self._path}': no such file")
            _, extra, tensors = _read_checkpoint(self._path)
            self._file_tensors = {k[len("param:"):]: v for k, v in tensors.items() if k.startswith("param:")}
            for k, v in extra.items():
                if k.startswith(_PROPERTY_PREFIX):
                    dict.__setitem__(self.properties, k[len(_PROPERTY_PREFIX):], _decode(v))

    @classmethod
    def load_checkpoint(cls, checkpoint_uri):
        """The state of a checkpoint written by save_checkpoint (or kiln train --checkpoint)."""
        return cls(checkpoint_uri)

    @classmethod
    def save_checkpoint(cls, state, checkpoint_uri, include_optimizer_state=False):
        """Writes the state of the Module that trains it. Kiln's checkpoints always hold the
        optimizer state (a resumed run needs it; ONNX Runtime writes it only on request)."""
        del include_optimizer_state
        if state._module is None:
            raise InvalidArgument("save_checkpoint: no Module has trained this state yet (Kiln writes "
                                  "checkpoints from its training session)")
        state._module._save_checkpoint(os.fspath(checkpoint_uri), state._extra())

    @property
    def parameters(self):
        return Parameters(self)

    # The Module's side.
    def _extra(self):
        return {_PROPERTY_PREFIX + k: _encode(v) for k, v in self.properties.items()}

    def _load_extra(self, extra):
        for k, v in extra.items():
            if k.startswith(_PROPERTY_PREFIX):
                dict.__setitem__(self.properties, k[len(_PROPERTY_PREFIX):], _decode(v))

    def _names(self):
        if self._module is not None:
            return self._module._parameter_names()
        if self._path is not None:
            return list(self._file_tensors)
        raise InvalidArgument("the parameters of a fresh CheckpointState are the model's: create the Module first")

    def _get(self, name):
        if self._module is not None:
            return self._module._parameter(name)
        if name in self._pending:
            return self._pending[name].copy()
        if name in self._file_tensors:
            return self._file_tensors[name].copy()
        raise KeyError(f"'{name}' is not a trained parameter")

    def _set(self, name, value):
        value = np.ascontiguousarray(value)
        if self._module is not None:
            self._module._set_parameter(name, value)
        else:
            self._pending[name] = value.copy()
