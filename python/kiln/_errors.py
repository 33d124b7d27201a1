"""Kiln's exceptions: one class per kiln::ErrorKind, all under kiln.KilnError (a RuntimeError).

ONNX Runtime raises classes of the same names from onnxruntime.capi.onnxruntime_pybind11_state
(InvalidArgument, InvalidGraph, InvalidProtobuf, NotImplemented, NoSuchFile, Fail,
RuntimeException); kiln exports those names too (aliases where Kiln has one class for two of
ORT's). InvalidArgument is also a ValueError (ORT raises ValueError for a missing input) and
OutOfMemory a MemoryError, so code written against ORT catches them.
"""
from . import _kiln


class KilnError(RuntimeError):
    """Base of every error Kiln raises; str(e) is Kiln's message ("<kind>: what, expected vs got")."""


class InvalidArgument(KilnError, ValueError):
    """A bad argument: a missing or unknown input, wrong dtype or shape, a bad option."""


class InvalidModel(KilnError):
    """A malformed or inconsistent model file or graph (ORT: InvalidGraph / InvalidProtobuf)."""


class NotImplemented(KilnError):  # noqa: A001 (ORT's name; shadows the builtin constant only here)
    """An operator, opset, attribute value or dtype Kiln does not handle."""


class OutOfMemory(KilnError, MemoryError):
    """The session's memory budget ("kiln.memory_limit") was exceeded; the message names the tensor."""


class Fail(KilnError):
    """A failure while working (ORT's FAIL): compile errors, cancelled runs, Kiln bugs."""


class CompileError(Fail):
    """The system C compiler failed on generated kernel code."""


class Cancelled(Fail):
    """A run stopped by RunOptions.terminate (ORT raises Fail for this)."""


class FileError(KilnError):
    """A file could not be read or written."""


class NoSuchFile(FileError):
    """The model file does not exist."""


# ORT's names for the same classes.
InvalidGraph = InvalidModel
InvalidProtobuf = InvalidModel
RuntimeException = Fail
Unsupported = NotImplemented


# ORT's other status classes. Kiln raises none of them (it has no execution providers to fail
# over, no model-loaded state, no EP-compiled models); they exist so that ported `except`
# clauses naming them (kiln.capi.onnxruntime_pybind11_state.EPFail, ...) still resolve.
class EPFail(Fail):
    """ORT: an execution provider failed (ORT then falls back to the CPU provider)."""


class EngineError(Fail):
    """ORT: an execution engine error."""


class NoModel(KilnError):
    """ORT: no model loaded."""


class ModelLoaded(KilnError):
    """ORT: a model is loaded already."""


class ModelLoadCanceled(KilnError):
    """ORT: model loading was canceled."""


class ModelRequiresCompilation(KilnError):
    """ORT: the model must be compiled for an execution provider first."""


class NotFound(KilnError):
    """ORT: something looked up by name was not found."""


for _cls in (KilnError, InvalidArgument, InvalidModel, NotImplemented, OutOfMemory, Fail, CompileError, Cancelled,
             FileError, NoSuchFile, EPFail, EngineError, NoModel, ModelLoaded, ModelLoadCanceled,
             ModelRequiresCompilation, NotFound):
    _cls.__module__ = "kiln"

# The class names of onnxruntime.capi.onnxruntime_pybind11_state (kiln/capi exports these).
ORT_EXCEPTION_NAMES = ("Fail", "InvalidArgument", "NoSuchFile", "NoModel", "EngineError", "RuntimeException",
                       "InvalidProtobuf", "ModelLoaded", "NotImplemented", "InvalidGraph", "EPFail",
                       "ModelLoadCanceled", "ModelRequiresCompilation", "NotFound")

_BY_KIND = {
    "InvalidModel": InvalidModel,
    "InvalidArgument": InvalidArgument,
    "Unsupported": NotImplemented,
    "CompileError": CompileError,
    "OutOfMemory": OutOfMemory,
    "IOError": FileError,
    "ParseError": InvalidModel,
    "Cancelled": Cancelled,
    "Internal": Fail,
}
assert set(_BY_KIND) == set(_kiln._error_kind_names()), "kiln::ErrorKind changed: update _BY_KIND"
_kiln._set_error_classes(_BY_KIND, KilnError)
