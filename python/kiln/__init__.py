"""Kiln: an ahead-of-time compiler and runtime for ONNX models, with ONNX Runtime's Python API.

    import kiln as ort            # the one line that switches from onnxruntime
    sess = ort.InferenceSession("model.onnx")
    probs, = sess.run(None, {"x": x})

docs/python.md describes the API, threading, errors and the differences from ONNX Runtime.
"""
from . import _kiln
from ._errors import (Cancelled, CompileError, EngineError, EPFail, Fail, FileError, InvalidArgument, InvalidGraph,
                      InvalidModel, InvalidProtobuf, KilnError, ModelLoadCanceled, ModelLoaded,
                      ModelRequiresCompilation, NoModel, NoSuchFile, NotFound, NotImplemented, OutOfMemory,
                      RuntimeException, Unsupported)
from ._logging import set_default_logger_severity, set_default_logger_verbosity
from .inference_session import InferenceSession, NodeArg
from .io_binding import IOBinding
from .modelmeta import ModelMetadata
from .ort_value import OrtValue
from .run_options import RunOptions
from .runtime_info import (disable_telemetry_events, enable_telemetry_events, get_all_providers,
                           get_available_providers, get_build_info, get_device, get_version_string)
from .session_options import ExecutionMode, GraphOptimizationLevel, SessionOptions
from . import capi  # noqa: E402 (kiln.capi.onnxruntime_pybind11_state, as onnxruntime.capi)

__version__ = _kiln.__version__

__all__ = [
    "InferenceSession", "SessionOptions", "RunOptions", "GraphOptimizationLevel", "ExecutionMode", "NodeArg",
    "ModelMetadata", "OrtValue", "IOBinding", "get_all_providers", "get_available_providers", "get_device",
    "get_build_info", "get_version_string", "set_default_logger_severity", "set_default_logger_verbosity",
    "disable_telemetry_events", "enable_telemetry_events", "KilnError", "InvalidArgument", "InvalidModel",
    "InvalidGraph", "InvalidProtobuf", "NotImplemented", "Unsupported", "OutOfMemory", "Fail",
    "RuntimeException", "CompileError", "Cancelled", "FileError", "NoSuchFile", "EPFail", "EngineError", "NoModel",
    "ModelLoaded", "ModelLoadCanceled", "ModelRequiresCompilation", "NotFound",
]
