"""Kiln: an ahead-of-time compiler and runtime for ONNX models, with ONNX Runtime's Python API.

    import kiln as ort            # the one line that switches from onnxruntime
    sess = ort.InferenceSession("model.onnx")
    probs, = sess.run(None, {"x": x})

docs/python.md describes the API, threading, errors and the differences from ONNX Runtime.
"""
from . import _kiln
from ._errors import (Cancelled, CompileError, Fail, FileError, InvalidArgument, InvalidGraph, InvalidModel,
                      InvalidProtobuf, KilnError, NoSuchFile, NotImplemented, OutOfMemory, RuntimeException,
                      Unsupported)
from .inference_session import InferenceSession, NodeArg, get_available_providers, get_device
from .modelmeta import ModelMetadata
from .run_options import RunOptions
from .session_options import ExecutionMode, GraphOptimizationLevel, SessionOptions

__version__ = _kiln.__version__

__all__ = [
    "InferenceSession", "SessionOptions", "RunOptions", "GraphOptimizationLevel", "ExecutionMode", "NodeArg",
    "ModelMetadata", "get_available_providers", "get_device", "KilnError", "InvalidArgument", "InvalidModel",
    "InvalidGraph", "InvalidProtobuf", "NotImplemented", "Unsupported", "OutOfMemory", "Fail",
    "RuntimeException", "CompileError", "Cancelled", "FileError", "NoSuchFile",
]
