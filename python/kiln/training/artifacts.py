"""generate_artifacts: the files ONNX Runtime's training loop starts from, written for Kiln.

    from kiln.training import artifacts
    artifacts.generate_artifacts("model.onnx", loss=artifacts.LossType.CrossEntropyLoss,
                                 optimizer=artifacts.OptimType.AdamW, artifact_directory="art")
    state = CheckpointState.load_checkpoint("art/checkpoint")
    module = Module("art/training_model.onnx", state)
    optimizer = Optimizer("art/optimizer.json", module)

ONNX Runtime's generate_artifacts writes a training graph, an eval graph and an optimizer graph.
Kiln builds those itself when it compiles, so here the training model is the model unchanged
but for metadata naming the loss and the trained parameters (Module reads them), the optimizer
is a JSON file of its options, and the checkpoint is a Kiln checkpoint at step 0 (the model's
initial parameters, zero optimizer state).
"""
import enum
import json
import os
import tempfile

import onnx

from .. import _kiln
from .._errors import InvalidArgument
from .model_info import LOSS_KEY, model_inputs, read_loss_spec  # noqa: F401 (read_loss_spec: kept here too)
from .optimizer import Optimizer



class LossType(enum.Enum):
    MSELoss = "mse"
    CrossEntropyLoss = "cross_entropy"
    NLLLoss = "nll"
    Output = "output"  # the model's output already is the loss (Kiln's name; ORT takes a custom onnxblock)


class OptimType(enum.Enum):
    AdamW = "adamw"
    Adam = "adam"
    SGD = "sgd"


def _trainable(model, requires_grad, frozen_params):
    """The parameters: requires_grad, or every float initializer read as a differentiable input
    but the frozen ones (BatchNormalization's running statistics are state, never parameters)."""
    if requires_grad is not None:
        return list(requires_grad)
    stats = {n.input[i] for n in model.graph.node if n.op_type == "BatchNormalization" for i in (3, 4)
             if len(n.input) > i}
    floats = (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)
    frozen = set(frozen_params or [])
    unknown = frozen - {t.name for t in model.graph.initializer}
    if unknown:
        raise InvalidArgument(f"generate_artifacts: frozen_params {sorted(unknown)} are not initializers of the model")
    if not frozen:
        return []  # Kiln's default: every parameter
    return [t.name for t in model.graph.initializer
            if t.data_type in floats and t.name not in stats and t.name not in frozen]


def generate_artifacts(model, requires_grad=None, frozen_params=None, loss=LossType.CrossEntropyLoss,
                       optimizer=OptimType.AdamW, artifact_directory=None, prefix="", *, loss_output="",
                       labels="labels", **optimizer_options):
    """Writes <prefix>training_model.onnx, <prefix>optimizer.json and <prefix>checkpoint into
    artifact_directory (default: the current directory); returns their paths. optimizer_options
    are Optimizer's (lr, momentum, betas, eps, weight_decay, clip_norm)."""
    m = model if isinstance(model, onnx.ModelProto) else onnx.load(os.fspath(model))
    out = os.fspath(artifact_directory or os.getcwd())
    os.makedirs(out, exist_ok=True)
    loss = LossType(loss)
    optimizer = OptimType(optimizer)
    spec = {"kind": loss.value, "output": loss_output, "labels": labels,
            "trainable": _trainable(m, requires_grad, frozen_params)}
    m = onnx.ModelProto.FromString(m.SerializeToString())
    kept = [p for p in m.metadata_props if p.key != LOSS_KEY]
    del m.metadata_props[:]
    m.metadata_props.extend(kept)
    onnx.helper.set_model_props(m, {**{p.key: p.value for p in kept}, LOSS_KEY: json.dumps(spec)})
    train_path = os.path.join(out, prefix + "training_model.onnx")
    onnx.save(m, train_path)

    opt = {"kind": optimizer.value, **optimizer_options}
    opt_path = os.path.join(out, prefix + "optimizer.json")
    with open(opt_path, "w") as f:
        json.dump(opt, f, indent=1)

    # The step-0 checkpoint comes from a session with this optimizer (its state slots must match
    # the Module's); symbolic dims are bound to 1, the parameters do not depend on them.
    inputs, _ = model_inputs(train_path)
    opts = _kiln.TrainingOptions()
    opts.loss.kind, opts.loss.output, opts.loss.labels = spec["kind"], spec["output"], spec["labels"]
    opts.trainable = spec["trainable"]
    opts.optimizer = Optimizer._native_options(optimizer.value, **optimizer_options)
    opts.session.dims = {d: 1 for _, shape in inputs for d in shape if isinstance(d, str)}
    ckpt_path = os.path.join(out, prefix + "checkpoint")
    _kiln.TrainingSession.create(train_path, opts).save_checkpoint(ckpt_path)
    return {"training_model": train_path, "optimizer": opt_path, "checkpoint": ckpt_path}
