"""Learning-rate schedulers driven from the host, as ONNX Runtime's LinearLRScheduler: each
step() sets the optimizer's rate for the next training step (Optimizer.set_learning_rate, which
feeds the compiled step's learning-rate input: no recompile). A schedule known up front can
instead be compiled in: Optimizer(..., schedule=kiln._kiln.LrSchedule()).
"""
import math

from .._errors import InvalidArgument


class _Scheduler:
    def __init__(self, optimizer):
        self._optimizer = optimizer
        self._step = 0
        optimizer.set_learning_rate(self.lr_at(0))

    def step(self):
        """Advances one training step and sets that step's learning rate."""
        self._step += 1
        self._optimizer.set_learning_rate(self.lr_at(self._step))

    def lr_at(self, step):
        raise NotImplementedError


class LinearLRScheduler(_Scheduler):
    """ONNX Runtime's LinearLRScheduler: from 0 up to initial_lr over warmup_step_count steps,
    then linearly down to 0 at total_step_count."""

    def __init__(self, optimizer, warmup_step_count, total_step_count, initial_lr):
        if not 0 <= warmup_step_count <= total_step_count:
            raise InvalidArgument(f"LinearLRScheduler: need 0 <= warmup_step_count <= total_step_count, got "
                                  f"{warmup_step_count} and {total_step_count}")
        self.warmup, self.total, self.initial_lr = int(warmup_step_count), int(total_step_count), float(initial_lr)
        super().__init__(optimizer)

    def lr_at(self, step):
        if step < self.warmup:
            return self.initial_lr * step / self.warmup
        if self.total == self.warmup:
            return self.initial_lr if step < self.total else 0.0
        return self.initial_lr * max(0.0, (self.total - step) / (self.total - self.warmup))


class CosineLRScheduler(_Scheduler):
    """Cosine decay from initial_lr to min_lr over total_step_count steps, after an optional linear
    warm-up (as Kiln's compiled "cosine" LrSchedule)."""

    def __init__(self, optimizer, total_step_count, initial_lr, min_lr=0.0, warmup_step_count=0):
        if total_step_count <= 0:
            raise InvalidArgument(f"CosineLRScheduler: total_step_count must be > 0, got {total_step_count}")
        self.total, self.initial_lr, self.min_lr = int(total_step_count), float(initial_lr), float(min_lr)
        self.warmup = int(warmup_step_count)
        super().__init__(optimizer)

    def lr_at(self, step):
        if step < self.warmup:
            return self.initial_lr * step / self.warmup
        t = min(1.0, (step - self.warmup) / max(1, self.total - self.warmup))
        return self.min_lr + (self.initial_lr - self.min_lr) * 0.5 * (1 + math.cos(math.pi * t))
