"""kiln.training: ONNX Runtime's on-device training API (onnxruntime.training.api) over Kiln's
TrainingSession (include/kiln/training.h).

    from kiln.training import CheckpointState, Module, Optimizer, LinearLRScheduler
    from kiln.training import DataParallel, PipelineParallel      # under mpirun

docs/training.md describes the API and how it differs from ONNX Runtime's.
"""
from . import artifacts
from .data_parallel import DataParallel
from .checkpoint_state import CheckpointState, Parameter, Parameters, Properties
from .lr_scheduler import CosineLRScheduler, LinearLRScheduler
from .module import Module
from .optimizer import Optimizer
from .pipeline_parallel import PipelineParallel

__all__ = ["artifacts", "CheckpointState", "DataParallel", "Parameter", "Parameters", "Properties", "Module", "Optimizer", "PipelineParallel",
           "LinearLRScheduler", "CosineLRScheduler"]
