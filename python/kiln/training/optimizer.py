"""Optimizer: ONNX Runtime's training Optimizer (onnxruntime.training.api.Optimizer).

ONNX Runtime reads the optimizer from generate_artifacts' optimizer model; Kiln compiles the
update into the training step from options given here (an optimizer is graph ops,
autodiff/optimizer.h): "sgd" (momentum, Nesterov), "adam", "adamw", with optional gradient
clipping by global norm and a compiled LrSchedule. Optimizer(path, module) also reads the
options from a JSON file that kiln.training.artifacts.generate_artifacts wrote.
"""
import json
import os

from .. import _kiln
from .._errors import InvalidArgument
from .module import Module

_KINDS = ("sgd", "adam", "adamw")


class Optimizer:
    """Updates the Module's parameters with the gradients its calls computed.

    Optimizer(module, "sgd", lr=0.1, momentum=0.9), Optimizer(module, "adamw", lr=1e-3,
    weight_decay=0.01), or ONNX Runtime's order Optimizer(optimizer_json_path, module).
    `schedule` (a kiln._kiln.LrSchedule) is applied inside the session, step by step, with no
    host call; set_learning_rate() overrides it."""

    def __init__(self, module_or_uri, kind_or_module="adamw", *, lr=1e-3, momentum=0.0, nesterov=False,
                 betas=(0.9, 0.999), eps=1e-8, weight_decay=None, clip_norm=0.0, schedule=None):
        if isinstance(module_or_uri, Module):
            module, kind = module_or_uri, kind_or_module
        elif isinstance(kind_or_module, Module):
            module = kind_or_module
            with open(os.fspath(module_or_uri)) as f:
                spec = json.load(f)
            kind = spec.pop("kind")
            lr = spec.pop("lr", lr)
            momentum = spec.pop("momentum", momentum)
            nesterov = spec.pop("nesterov", nesterov)
            betas = tuple(spec.pop("betas", betas))
            eps = spec.pop("eps", eps)
            weight_decay = spec.pop("weight_decay", weight_decay)
            clip_norm = spec.pop("clip_norm", clip_norm)
            if spec:
                raise InvalidArgument(f"optimizer file '{module_or_uri}': unknown keys {sorted(spec)}")
        else:
            raise InvalidArgument("Optimizer: expected Optimizer(module, kind, ...) or Optimizer(path, module)")
        o = self._native_options(kind, lr=lr, momentum=momentum, nesterov=nesterov, betas=betas, eps=eps,
                                 weight_decay=weight_decay, clip_norm=clip_norm)
        self._module = module
        self._options = o
        module._set_optimizer(self, o, schedule)

    @staticmethod
    def _native_options(kind, lr=1e-3, momentum=0.0, nesterov=False, betas=(0.9, 0.999), eps=1e-8,
                        weight_decay=None, clip_norm=0.0):
        if kind not in _KINDS:
            raise InvalidArgument(f"Optimizer: kind must be one of {list(_KINDS)}, got '{kind}'")
        o = _kiln.OptimizerOptions()
        o.kind = kind
        o.lr = float(lr)
        o.momentum = float(momentum)
        o.nesterov = bool(nesterov)
        o.beta1, o.beta2 = (float(b) for b in betas)
        o.eps = float(eps)
        # PyTorch's defaults: AdamW decays by 0.01, SGD and Adam not at all.
        o.weight_decay = float((0.01 if kind == "adamw" else 0.0) if weight_decay is None else weight_decay)
        o.clip_norm = float(clip_norm)
        return o

    def step(self):
        """Applies the gradients accumulated since the module's last lazy_reset_grad()."""
        self._module._apply()

    def set_learning_rate(self, learning_rate):
        """The learning rate of the following steps (replaces the compiled schedule's)."""
        self._module._set_learning_rate(learning_rate)

    def get_learning_rate(self):
        """The learning rate the next step uses."""
        return float(self._module._learning_rate())
