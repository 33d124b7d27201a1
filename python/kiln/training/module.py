"""Module: ONNX Runtime's training Module (onnxruntime.training.api.Module) over kiln's native
TrainingSession.

    state = CheckpointState()                      # or CheckpointState.load_checkpoint(path)
    module = Module("model.onnx", state, loss="cross_entropy")
    optimizer = Optimizer(module, "adamw", lr=1e-3)
    for x, y in batches:
        module.train()
        loss = module(x, y)
        optimizer.step()
        module.lazy_reset_grad()

Differences from ONNX Runtime (docs/training.md): the Module takes the plain ONNX model and the
loss options (no generate_artifacts step: Kiln appends the loss, the backward pass and the
optimizer itself); the eval model is the same model with BatchNormalization in inference mode
(eval_model_uri is not needed); the training step is compiled on the first call, for the batch
shapes that call has (a later call with other shapes recompiles, carrying the state over).

Gradients: a call in training mode computes the loss's gradients (TrainingSession.gradients)
and adds them to those accumulated since the last lazy_reset_grad(); Optimizer.step() applies
the sum (apply_gradients). With fused_step=True a call instead runs the whole step (forward,
backward and update in one compiled graph, TrainingSession.train_step) and Optimizer.step()
only acknowledges it: faster, and the same numbers, for the loop of exactly one call per step
— the loop above. Patterns that need the update deferred (a second call before step(), a reset
or eval() before step()) are errors in that mode rather than silently different results.
"""
import os
import tempfile
import warnings

import numpy as np

from .. import _kiln
from .._errors import InvalidArgument, Unsupported
from ..session_options import SessionOptions
from .model_info import model_inputs, read_loss_spec


class Module:
    """Trains an ONNX model: call it on a batch (the model's inputs, then the labels) for the loss."""

    training: bool

    def __init__(self, train_model_uri, state, eval_model_uri=None, device="cpu", session_options=None, *,
                 loss=None, loss_output=None, labels=None, trainable=None, seed=0,
                 recompute="none", fused_step=False, additional_outputs=False):
        if device != "cpu":
            raise InvalidArgument(f"Module: Kiln trains on the CPU, got device '{device}'")
        if state._module is not None:
            raise InvalidArgument("Module: this CheckpointState is already trained by another Module")
        self._path = os.fspath(train_model_uri)
        if not os.path.isfile(self._path):
            from .._errors import NoSuchFile
            raise NoSuchFile(f"Module: model '{self._path}': no such file")
        if eval_model_uri is not None and os.fspath(eval_model_uri) != self._path:
            warnings.warn("Module: eval_model_uri is ignored: Kiln evaluates the training model itself "
                          "(BatchNormalization in inference mode, no update)", stacklevel=2)
        # A model from artifacts.generate_artifacts names its loss and parameters; arguments win.
        try:
            spec = read_loss_spec(self._path) or {}
        except ImportError:  # no onnx package: no metadata to read
            spec = {}
        loss = loss if loss is not None else spec.get("kind", "cross_entropy")
        loss_output = loss_output if loss_output is not None else spec.get("output", "")
        labels = labels if labels is not None else spec.get("labels", "labels")
        trainable = trainable if trainable is not None else spec.get("trainable")
        info = model_inputs(self._path)
        self._inputs, self._outputs = info if info else (None, None)
        self._opts = _kiln.TrainingOptions()
        self._opts.loss.kind = loss
        self._opts.loss.output = loss_output
        self._opts.loss.labels = labels
        self._opts.trainable = list(trainable or [])
        self._opts.seed = int(seed)
        self._opts.recompute = recompute
        self._opts.optimizer.lr = 0.0  # until an Optimizer takes the module: gradients and eval only
        self._session_options = session_options if session_options is not None else SessionOptions()
        self._state = state
        self._native = None
        self._dims = None
        self._grads = None  # accumulated gradients, by parameter name
        self._reset = False  # lazy_reset_grad() was called: the next call starts from zero
        self._fused = bool(fused_step)
        self._fused_applied = False  # a fused step ran since the last Optimizer.step()
        self._additional_outputs = bool(additional_outputs)
        self._optimizer = None
        self._lr_override = None
        self.training = True
        state._module = self

    # ONNX Runtime's Module API.
    def train(self, mode=True):
        if not mode:
            return self.eval()
        self.training = True
        return self

    def eval(self):
        self._check_no_fused_update("eval()")
        self.training = False
        return self

    def __call__(self, *user_inputs):
        batch = self._batch(user_inputs)
        native = self._session(batch)
        if not self.training:
            loss, outputs = native.eval_step(batch)
        elif self._fused and self._optimizer is not None and (self._grads is None or self._reset):
            if self._fused_applied:
                raise InvalidArgument("Module (fused_step=True): a second call before Optimizer.step(); "
                                      "gradient accumulation needs fused_step=False")
            self._grads, self._reset = None, False
            loss, outputs = native.train_step(batch)
            self._fused_applied = True
        else:
            if self._reset:
                self._grads, self._reset = None, False
            loss, grads = native.gradients(batch)
            outputs = None
            if self._grads is None:
                self._grads = grads
            else:
                for k, g in grads.items():
                    self._grads[k] += g
        loss = np.array(loss, dtype=np.float32)
        if not self._additional_outputs:
            return loss
        if outputs is None:
            raise InvalidArgument("Module(additional_outputs=True): the gradient-accumulating step returns "
                                  "no model outputs; use fused_step=True or eval()")
        return [loss, *outputs]

    def lazy_reset_grad(self):
        """The next call starts its gradients from zero (ONNX Runtime's lazy reset)."""
        self._check_no_fused_update("lazy_reset_grad()")
        self._reset = True

    def input_names(self):
        names = [n for n, _ in self._inputs] if self._inputs is not None else \
            [i.name for i in self._require_native().batch_inputs()]
        if self._opts.loss.kind != "output" and self._opts.loss.labels not in names:
            names.append(self._opts.loss.labels)
        return names

    def output_names(self):
        return ["loss"] + (list(self._outputs or []) if self._additional_outputs else [])

    def get_parameters_size(self, trainable_only=True):
        del trainable_only  # Kiln's state holds the trained parameters only
        return int(sum(self._parameter(n).size for n in self._parameter_names()))

    def get_contiguous_parameters(self, trainable_only=False):
        """The parameters flattened into one float array, in model order (ORT returns an OrtValue)."""
        del trainable_only
        return np.concatenate([self._parameter(n).ravel() for n in self._parameter_names()])

    def copy_buffer_to_parameters(self, buffer, trainable_only=True):
        del trainable_only
        buffer = np.asarray(buffer).ravel()
        if buffer.size != self.get_parameters_size():
            raise InvalidArgument(f"copy_buffer_to_parameters: expected {self.get_parameters_size()} elements, "
                                  f"got {buffer.size}")
        pos = 0
        for n in self._parameter_names():
            p = self._parameter(n)
            self._set_parameter(n, buffer[pos:pos + p.size].reshape(p.shape).astype(p.dtype))
            pos += p.size

    def export_model_for_inferencing(self, inference_model_uri, graph_output_names=None):
        """Writes the model with the trained parameters (and running statistics) as ONNX; with
        graph_output_names, only those of the model's outputs."""
        path = os.fspath(inference_model_uri)
        self._require_native().export_onnx(path)
        if graph_output_names is not None and list(graph_output_names) != list(self._outputs or []):
            import onnx
            m = onnx.load(path)
            by_name = {o.name: o for o in m.graph.output}
            missing = [n for n in graph_output_names if n not in by_name]
            if missing:
                raise InvalidArgument(f"export_model_for_inferencing: {missing} are not outputs of the model "
                                      f"(it has {list(by_name)})")
            keep = [by_name[n] for n in graph_output_names]
            del m.graph.output[:]
            m.graph.output.extend(keep)
            onnx.save(m, path)

    # Kiln's extras.
    @property
    def step_count(self):
        """Optimizer steps taken (the native session's step counter)."""
        return 0 if self._native is None else self._native.step()

    def memory_report(self):
        return self._require_native().memory_report()

    # Internals shared with Optimizer and CheckpointState.
    def _check_no_fused_update(self, what):
        if self._fused_applied:
            raise InvalidArgument(f"Module (fused_step=True): {what} between a call and Optimizer.step(): the "
                                  "fused step has already updated the parameters; use fused_step=False")

    def _batch(self, user_inputs):
        names = self.input_names()
        if len(user_inputs) != len(names):
            raise InvalidArgument(f"Module: expected {len(names)} inputs {names}"
                                  f"{' (the labels are only read by the loss)' if self._opts.loss.kind != 'output' else ''}"
                                  f", got {len(user_inputs)}")
        return {n: np.ascontiguousarray(v) for n, v in zip(names, user_inputs)}

    def _dims_of(self, batch):
        dims = {}
        for name, shape in self._inputs or []:
            got = batch[name].shape
            for d, size in zip(shape, got):
                if isinstance(d, str):
                    dims[d] = int(size)
        return dims

    def _native_options(self, dims):
        self._opts.session, _ = self._session_options._native()
        opts = self._opts
        s = opts.session
        s.dims = {**s.dims, **dims}
        opts.session = s
        return opts

    def _session(self, batch):
        dims = self._dims_of(batch)
        if self._native is None:
            self._native = _kiln.TrainingSession.create(self._path, self._native_options(dims))
            self._dims = dims
            self._take_state()
        elif dims != self._dims:
            self._rebuild(dims)
        return self._native

    def _require_native(self):
        """The native session, created before any batch when something needs it (parameters,
        a checkpoint): symbolic dims are bound to 1 then, and the first batch rebuilds it for its
        shapes, the state carried over."""
        if self._native is None:
            dims = {d: 1 for _, shape in self._inputs or [] for d in shape if isinstance(d, str)}
            self._native = _kiln.TrainingSession.create(self._path, self._native_options(dims))
            self._dims = dims
            self._take_state()
        return self._native

    def _take_state(self):
        """Loads what the CheckpointState holds into a fresh native session."""
        st = self._state
        if st._path is not None:
            st._load_extra(self._native.load_checkpoint(st._path))
        for name, value in st._pending.items():
            self._native.set_parameter(name, value)
        st._pending = {}
        if self._lr_override is not None:
            self._set_native_lr(self._lr_override)

    def _rebuild(self, dims=None, keep_optimizer_state=True):
        """A new native session (other batch shapes or optimizer), the state carried over."""
        old = self._native
        dims = self._dims if dims is None else dims
        new = _kiln.TrainingSession.create(self._path, self._native_options(dims))
        if keep_optimizer_state:
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "state.ckpt")
                old.save_checkpoint(path)
                new.load_checkpoint(path)
        else:
            for n in old.parameter_names():
                new.set_parameter(n, old.parameter(n))
            if old.step() > 0:
                warnings.warn("Module: the optimizer changed after training steps: parameters are kept, the "
                              "optimizer state and running statistics start anew", stacklevel=3)
        self._native, self._dims = new, dims
        if self._lr_override is not None:
            self._set_native_lr(self._lr_override)

    def _set_optimizer(self, optimizer, options, schedule):
        self._optimizer = optimizer
        self._opts.optimizer = options
        if schedule is not None:
            self._opts.schedule = schedule
        if self._native is not None:
            self._rebuild(keep_optimizer_state=False)

    def _set_native_lr(self, lr):
        try:
            self._native.set_learning_rate(lr)
            return True
        except Unsupported:
            return False

    def _set_learning_rate(self, lr):
        self._lr_override = float(lr)
        if self._native is not None and not self._set_native_lr(self._lr_override):
            # A native session without set_learning_rate: recompile at the new base rate.
            self._opts.optimizer.lr = self._lr_override
            self._opts.schedule = _kiln.LrSchedule()
            self._rebuild()

    def _learning_rate(self):
        if self._lr_override is not None:
            return self._lr_override
        if self._native is not None:
            try:
                return self._native.learning_rate()
            except Unsupported:
                pass
        return self._opts.schedule.at(self.step_count, self._opts.optimizer.lr)

    def _apply(self):
        if self._fused_applied:
            self._fused_applied = False
            return
        if self._grads is None or self._reset:
            raise InvalidArgument("Optimizer.step(): no gradients: call the Module in training mode first")
        self._native.apply_gradients(self._grads)

    def _parameter_names(self):
        return list(self._require_native().parameter_names())

    def _parameter(self, name):
        return self._require_native().parameter(name)

    def _set_parameter(self, name, value):
        self._require_native().set_parameter(name, np.ascontiguousarray(value))

    def _save_checkpoint(self, path, extra):
        self._require_native().save_checkpoint(path, extra)
