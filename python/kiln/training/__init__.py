"""kiln.training: ONNX Runtime's on-device training API (onnxruntime.training.api) over Kiln's
TrainingSession (include/kiln/training.h).

    from kiln.training import CheckpointState, Module, Optimizer, LinearLRScheduler

docs/training.md describes the API and how it differs from ONNX Runtime's.
"""
from . import artifacts
from .data_parallel import DataParallel
from .checkpoint_state import CheckpointState, Parameter, Parameters, Properties
from .lr_scheduler import CosineLRScheduler, LinearLRScheduler
from .module import Module
from .optimizer import Optimizer

__all__ = ["artifacts", "CheckpointState", "DataParallel", "Parameter", "Parameters", "Properties", "Module", "Optimizer",
           "LinearLRScheduler", "CosineLRScheduler"]
