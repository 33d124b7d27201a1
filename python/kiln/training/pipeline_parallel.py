"""Pipeline-parallel training over MPI for a Module: the model split into stages, one per rank,
each step's batch into microbatches (GPipe's schedule, or 1F1B), activations and gradients sent
between the stages (kiln::PipelineTrainer underneath; docs/distributed.md, "Pipeline-parallel
training"). With data_parallel=True the job's ranks form ranks / pipeline_stages replicas of the
pipeline, each on its own part of the global batch, their stage gradients averaged.

    # mpirun -np 2 python3 train.py
    model = Module("model.onnx", CheckpointState(), loss="cross_entropy")
    Optimizer(model, "sgd", lr=0.1, momentum=0.9)
    pp = PipelineParallel(model, microbatches=4)
    for x, y in batches:                 # the same batch on every stage of a replica
        loss = pp(x, y)                  # the global batch's mean loss, on every rank
    pp.export_model_for_inferencing("trained.onnx")

The module gives the model, the loss and the optimizer (and a CheckpointState loaded from a
file its starting point); the pipeline holds the parameters from then on: the module itself
is not called. The step is compiled on the first call for that call's batch shapes; a later
call with other shapes is an error (a pipeline is split for one batch).
"""
import numpy as np

from .. import _kiln
from .._errors import InvalidArgument
from .data_parallel import _register_finalize

_SCHEDULES = ("gpipe", "1f1b")


class PipelineParallel:
    """Steps `module` (which an Optimizer must have taken) pipeline-parallel over the MPI job.
    `microbatches` must divide the batch; `stages`: {training-graph node name: stage} (the rest
    follows its inputs), None for the cost-balanced split; `rematerialize`: recompute each
    stage's forward in its backward instead of stashing it; `pipeline_stages` with
    `data_parallel=True`: stages per replica (the job's ranks / replicas); `bucket_mb`:
    megabytes of stage gradients per allreduce between replicas."""

    def __init__(self, module, microbatches=1, schedule="gpipe", stages=None, rematerialize=False,
                 pipeline_stages=None, data_parallel=False, bucket_mb=None):
        if module._optimizer is None:
            raise InvalidArgument("PipelineParallel: the module has no Optimizer (Optimizer(module, ...) first)")
        if module._native is not None or module._state._pending:
            raise InvalidArgument("PipelineParallel: the module has already been called or given parameters; "
                                  "start from a fresh Module (a CheckpointState loaded from a file is taken)")
        if schedule not in _SCHEDULES:
            raise InvalidArgument(f"PipelineParallel: schedule must be one of {list(_SCHEDULES)}, got '{schedule}'")
        if int(microbatches) < 1:
            raise InvalidArgument(f"PipelineParallel: microbatches must be positive, got {microbatches}")
        self._native = None
        _register_finalize(self)
        self._module = module
        o = _kiln.PipelineTrainerOptions()
        o.microbatches = int(microbatches)
        o.schedule = schedule
        o.stages = {str(k): int(v) for k, v in (stages or {}).items()}
        o.rematerialize = bool(rematerialize)
        o.pipeline_stages = 0 if pipeline_stages is None else int(pipeline_stages)
        o.data_parallel = bool(data_parallel)
        o.bucket_bytes = 0 if bucket_mb is None else int(float(bucket_mb) * (1 << 20))
        self._options = o
        self._dims = None
        self.rank, self.size = _kiln.mpi_rank(), _kiln.mpi_size()

    def __call__(self, *user_inputs):
        """One training step on the replica's batch; returns the global batch's mean loss."""
        native, batch = self._trainer(user_inputs)
        return np.array(native.step(batch), dtype=np.float32)

    def evaluate(self, *user_inputs):
        """Forward and loss only, through the stages: (loss on every rank, the output the loss
        reads on the last stage, None elsewhere). The loss is the replica's batch's."""
        native, batch = self._trainer(user_inputs)
        loss, outputs = native.eval_step(batch)
        return np.array(loss, dtype=np.float32), (outputs[0] if outputs else None)

    @property
    def stage(self):
        return self._require().stage

    @property
    def stages(self):
        return self._require().stages

    @property
    def replica(self):
        return self._require().replica

    @property
    def replicas(self):
        return self._require().replicas

    @property
    def step_count(self):
        return 0 if self._native is None else self._native.steps()

    def describe(self):
        """One line per stage: its rank, nodes, parameters and estimated cost."""
        return self._require().describe()

    def stage_parameter_names(self):
        return list(self._require().stage_parameter_names())

    def parameters(self):
        """Every stage's parameters ({name: array}) on the first stage of each replica, {} on the
        other ranks. Every rank must call it."""
        return self._require().gather_parameters()

    def export_model_for_inferencing(self, path):
        """The first rank writes the model with the trained parameters as ONNX. Every rank calls it."""
        self._require().export_onnx(str(path))

    def save_checkpoint(self, path, extra=None):
        """The first rank writes every stage's parameters and optimizer state (TrainingSession's
        format: a one-process Module or any other split loads it). Every rank calls it."""
        self._require().save_checkpoint(str(path), dict(extra or {}))

    def last_step_stats(self):
        """This rank's last step: step_s, forward_s, backward_s, apply_s (seconds) and peak_stashed."""
        return self._require().last_step_stats()

    def _release(self):
        """Drops the native trainer (its communicators) before MPI ends; the object is unusable after."""
        self._native = None

    def _require(self):
        if self._native is None:
            raise InvalidArgument("PipelineParallel: not compiled yet: call it on a batch first "
                                  "(the split depends on the batch's shapes)")
        return self._native

    def _trainer(self, user_inputs):
        """The native trainer (compiled on the first call) and the call's batch dict."""
        m = self._module
        batch = m._batch(user_inputs)
        dims = m._dims_of(batch)
        if self._native is None:
            self._native = _kiln.PipelineTrainer(m._path, m._native_options(dims), self._options)
            self._dims = dims
            if m._state._path is not None:
                m._state._load_extra(self._native.load_checkpoint(m._state._path))
        elif dims != self._dims:
            raise InvalidArgument(f"PipelineParallel: the pipeline was split for the batch dims {self._dims}, "
                                  f"got {dims}")
        return self._native, batch
