"""Model repositories (Triton's layout) for the serving benchmarks.

The generated models (scripts/make_models.py) have a fixed leading dimension of 1. A server can
only batch requests along a batch dimension the model leaves free, so `dynamic_batch_model()`
rewrites a model with a symbolic leading dimension "batch" on every graph input and output; each
Reshape whose constant target starts with the fixed batch (BERT's head split and merge) gets 0
there instead (ONNX: copy that dimension from the input), which is the batch again. The rewrite
is checked with ONNX Runtime before use: batch 2 of the model's own input, twice, must give the
original model's output twice.

`write_repository(dir, entries)` lays out DIR/<model>/1/model.onnx (a hard link to the
rewritten file, so a repository costs no disk) and DIR/<model>/config.pbtxt with the fields
both servers read: max_batch_size, dynamic_batching, instance_group, parameters.
"""
from __future__ import annotations

import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "scripts"))


def model_inputs(models_dir, name):
    """The model's own seeded inputs {name: array} (batch 1), from make_models.py."""
    with np.load(os.path.join(models_dir, name + "_inputs.npz")) as z:
        return {k: z[k] for k in z.files}


def ensure_base_model(models_dir, name):
    path = os.path.join(models_dir, name + ".onnx")
    if not (os.path.exists(path) and os.path.exists(os.path.join(models_dir, name + "_inputs.npz"))):
        import make_models
        os.makedirs(models_dir, exist_ok=True)
        make_models.write_test_model(name, models_dir)
    return path


def dynamic_batch_model(models_dir, name):
    """Path of `name` with a symbolic batch dimension (written next to the model once)."""
    import onnx
    from onnx import numpy_helper
    src = ensure_base_model(models_dir, name)
    dst = os.path.join(models_dir, name + "_dynbatch.onnx")
    if os.path.exists(dst) and os.path.getmtime(dst) >= os.path.getmtime(src):
        return dst
    model = onnx.load(src)
    g = model.graph
    old = {v.type.tensor_type.shape.dim[0].dim_value for v in g.input}
    if old != {1}:
        raise ValueError(f"{name}: expected a fixed leading dimension of 1, got {old}")
    for v in list(g.input) + list(g.output):
        v.type.tensor_type.shape.dim[0].dim_param = "batch"
    del g.value_info[:]
    inits = {t.name: t for t in g.initializer}
    for node in g.node:
        if node.op_type != "Reshape" or node.input[1] not in inits:
            continue
        shape = numpy_helper.to_array(inits[node.input[1]])
        if shape.size > 1 and shape[0] == 1:
            shape = shape.copy()
            shape[0] = 0
            inits[node.input[1]].CopyFrom(numpy_helper.from_array(shape, node.input[1]))
    tmp = dst + ".tmp"
    onnx.save(model, tmp)
    _check_rewrite(src, tmp, model_inputs(models_dir, name))
    os.replace(tmp, dst)
    return dst


def _check_rewrite(src, dst, feed):
    import onnxruntime as ort
    ref = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, feed)
    two = {k: np.concatenate([v, v]) for k, v in feed.items()}
    got = ort.InferenceSession(dst, providers=["CPUExecutionProvider"]).run(None, two)
    for r, g in zip(ref, got):
        if g.shape[0] != 2 or not (np.allclose(g[:1], r, rtol=1e-4, atol=1e-5)
                                   and np.allclose(g[1:], r, rtol=1e-4, atol=1e-5)):
            raise RuntimeError(f"{dst}: the batch rewrite changed the outputs")


class Entry:
    """One model of a repository: `source` (a make_models name) served as `name`."""

    def __init__(self, name, source, max_batch_size=0, preferred=(), queue_delay_us=None,
                 instances=None, priority=None, threads=None):
        self.name, self.source = name, source
        self.max_batch_size, self.preferred = max_batch_size, tuple(preferred)
        self.queue_delay_us, self.instances = queue_delay_us, instances
        self.priority, self.threads = priority, threads

    def config(self):
        lines = [f'name: "{self.name}"', 'platform: "onnxruntime_onnx"',
                 f"max_batch_size: {self.max_batch_size}"]
        if self.queue_delay_us is not None:
            pref = ", ".join(str(p) for p in self.preferred)
            lines.append("dynamic_batching {" + (f" preferred_batch_size: [ {pref} ]" if pref else "")
                         + f" max_queue_delay_microseconds: {self.queue_delay_us} }}")
        if self.instances:
            lines.append(f"instance_group [ {{ count: {self.instances} kind: KIND_CPU }} ]")
        params = {}
        if self.priority:
            params["priority"] = self.priority
        if self.threads:
            params["threads"] = str(self.threads)
        for k, v in params.items():
            lines.append(f'parameters {{ key: "{k}" value {{ string_value: "{v}" }} }}')
        return "\n".join(lines) + "\n"


def write_repository(repo_dir, entries, models_dir):
    """Writes (replaces) a repository at repo_dir with `entries`; returns repo_dir."""
    shutil.rmtree(repo_dir, ignore_errors=True)
    for e in entries:
        src = dynamic_batch_model(models_dir, e.source) if e.max_batch_size > 0 \
            else ensure_base_model(models_dir, e.source)
        vdir = os.path.join(repo_dir, e.name, "1")
        os.makedirs(vdir)
        dst = os.path.join(vdir, "model.onnx")
        try:
            os.link(src, dst)
        except OSError:  # another file system
            shutil.copyfile(src, dst)
        with open(os.path.join(repo_dir, e.name, "config.pbtxt"), "w") as f:
            f.write(e.config())
    return repo_dir


def batch_feed(models_dir, name, batch, seed=0):
    """{input: array} of `batch` rows: row 0 is the model's own input, the others seeded random
    values of the same dtype and scale (integer inputs draw from the model's own values), so
    rows differ and a server that mixed rows up answers wrong."""
    base = model_inputs(models_dir, name)
    rng = np.random.default_rng(seed)
    feed = {}
    for k, v in base.items():
        if np.issubdtype(v.dtype, np.integer):
            rest = rng.choice(v.reshape(-1), size=(batch - 1,) + v.shape[1:])
        else:
            std = float(v.std()) or 1.0
            rest = rng.normal(float(v.mean()), std, (batch - 1,) + v.shape[1:])
        feed[k] = np.concatenate([v, rest.astype(v.dtype)])
    return feed
