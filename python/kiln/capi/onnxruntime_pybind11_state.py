"""ORT's native module's names that programs catch or pass: its exception classes (Kiln's classes
under ORT's names, kiln/_errors.py) and the option classes and enums."""
from .._errors import (EPFail, EngineError, Fail, InvalidArgument, InvalidGraph, InvalidProtobuf,  # noqa: F401
                       ModelLoadCanceled, ModelLoaded, ModelRequiresCompilation, NoModel, NoSuchFile, NotFound,
                       NotImplemented, RuntimeException)
from ..inference_session import NodeArg  # noqa: F401
from ..modelmeta import ModelMetadata  # noqa: F401
from ..ort_value import OrtValue  # noqa: F401
from ..run_options import RunOptions  # noqa: F401
from ..session_options import ExecutionMode, GraphOptimizationLevel, SessionOptions  # noqa: F401
