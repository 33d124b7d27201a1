"""Data-parallel training over MPI for a Module, as PyTorch's DistributedDataParallel and Horovod
do it (kiln::distributed::DataParallel underneath; docs/distributed.md, "Data-parallel training").

    # mpirun -np 2 python3 train.py
    model = Module("model.onnx", CheckpointState(...))
    opt = Optimizer(model, "sgd", lr=0.1, momentum=0.9)
    dp = DataParallel(model)
    for x, y in my_shard_of_the_batches:      # each rank its own part of every global batch
        loss = dp(x, y)                       # the global batch's mean loss, the same on every rank

A call is one training step: this rank's gradients, averaged over the ranks in buckets whose
allreduces start while the backward pass still runs, then the optimizer's update. N ranks with
batch B each step as one process with the ranks' batches concatenated (batch N*B) does, except
that BatchNormalization normalizes with each rank's own batch statistics unless
sync_batch_norm=True (PyTorch's SyncBatchNorm: the global batch's statistics). Rank 0's
parameters are copied to every rank before the first step (and after the module rebuilds its
session for new shapes). MPI starts with the first DataParallel and is finalized at exit.
"""
import atexit
import weakref

import numpy as np

from .. import _kiln
from .._errors import InvalidArgument

_finalize_registered = False
# Wrappers whose native objects hold MPI communicators: released before MPI ends (the exit hook
# runs before the interpreter collects them, and MPI forbids freeing a communicator after it).
_holders = weakref.WeakSet()


def _finalize():
    for holder in list(_holders):
        holder._release()
    _kiln.mpi_finalize()


def _register_finalize(holder=None):
    global _finalize_registered
    if holder is not None:
        _holders.add(holder)
    if not _finalize_registered:
        atexit.register(_finalize)
        _finalize_registered = True


def rank():
    """This process's rank in the MPI job (0 outside mpirun)."""
    _register_finalize()
    return _kiln.mpi_rank()


def size():
    """The number of ranks of the MPI job (1 outside mpirun)."""
    _register_finalize()
    return _kiln.mpi_size()


class DataParallel:
    """Steps `module` (which an Optimizer must have taken) data-parallel over the MPI job's ranks.
    `bucket_mb`: megabytes of gradients per allreduce (DDP's bucket_cap_mb; 4 by default, or
    KILN_DIST_BUCKET_MB). `sync_batch_norm`: BatchNormalization's batch mean and variance over
    every rank's batch, and the running statistics from them (as torch.nn.SyncBatchNorm); every
    rank must pass the same value."""

    def __init__(self, module, bucket_mb=None, sync_batch_norm=False):
        if module._optimizer is None:
            raise InvalidArgument("DataParallel: the module has no Optimizer (Optimizer(module, ...) first)")
        if module._fused:
            raise InvalidArgument("DataParallel: a Module with fused_step=True updates inside its own step; "
                                  "make it with fused_step=False")
        _register_finalize()
        self._module = module
        self._bucket_bytes = 0 if bucket_mb is None else int(float(bucket_mb) * (1 << 20))
        self.sync_batch_norm = bool(sync_batch_norm)
        self._native = None  # the module's session the native DataParallel is bound to
        self._dp = None
        self.rank, self.size = _kiln.mpi_rank(), _kiln.mpi_size()

    def __call__(self, *user_inputs):
        m = self._module
        if not m.training:
            raise InvalidArgument("DataParallel: the module is in eval() mode; call module(...) to evaluate")
        batch = m._batch(user_inputs)
        native = m._session(batch)
        if native is not self._native:  # first step, or the module rebuilt its session
            self._dp = _kiln.DataParallel(native, self._bucket_bytes, self.sync_batch_norm)
            self._dp.broadcast_parameters()
            self._native = native
        m._grads, m._reset = None, False
        return np.array(self._dp.step(batch), dtype=np.float32)

    @property
    def buckets(self):
        """How many allreduce buckets a step makes (after the first step)."""
        return self._dp.buckets if self._dp is not None else 0

    @property
    def synchronized_batch_norms(self):
        """How many BatchNormalization nodes the last step normalized with the global batch's
        statistics (0 with sync_batch_norm off or in a model without BatchNormalization)."""
        return self._dp.synchronized_batch_norms if self._dp is not None else 0
