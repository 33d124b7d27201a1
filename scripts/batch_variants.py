"""Batch-size variants of the generated models (make_models.py --batch N, bench/peers.py).

The models of make_models.py have a fixed leading (batch) dimension: 1 for the CNNs and BERT, 4
for the mlp. `write_batched(name, out_dir, batch)` rewrites a written model for another batch:
every graph input and output gets `batch` as its leading dimension, and each Reshape whose
constant target shape starts with the old batch (BERT's head split and merge) starts with `batch`
instead; intermediate shapes are dropped and re-inferred. Written as
`<name>_b<batch>.onnx` + `<name>_b<batch>_inputs.npz` (seeded random inputs; integer inputs
draw from the values of the model's own inputs, so token ids stay in range).

The check (ONNX Runtime): row 0 of the new inputs is row 0 of the model's own inputs, and row 0
of every output of the rewritten model must match row 0 of the original model's output, so a
rewrite that mixed samples or missed a batch-carrying Reshape fails here, before a benchmark.
"""
from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import numpy_helper


def batched_name(name, batch):
    return f"{name}_b{batch}"


def _batched_model(model, batch):
    g = model.graph
    old = {v.type.tensor_type.shape.dim[0].dim_value for v in g.input}
    if len(old) != 1 or 0 in old:
        raise ValueError(f"{g.name}: inputs disagree on a fixed leading dim ({old})")
    old = old.pop()
    for v in list(g.input) + list(g.output):
        v.type.tensor_type.shape.dim[0].dim_value = batch
    del g.value_info[:]
    inits = {t.name: t for t in g.initializer}
    for node in g.node:
        if node.op_type != "Reshape" or node.input[1] not in inits:
            continue
        shape = numpy_helper.to_array(inits[node.input[1]])
        if shape.size and shape[0] == old:
            shape = shape.copy()
            shape[0] = batch
            inits[node.input[1]].CopyFrom(numpy_helper.from_array(shape, node.input[1]))
    return onnx.shape_inference.infer_shapes(model, strict_mode=True), old


def write_batched(name, out_dir, batch, make_base=None, check=True):
    """(model path, inputs path) of `name` at `batch`; `make_base(name, out_dir)` writes the
    base model when it is missing (make_models.write_test_model). A model already at `batch`
    is returned as it is."""
    base = os.path.join(out_dir, name + ".onnx")
    base_inputs = os.path.join(out_dir, name + "_inputs.npz")
    if not (os.path.exists(base) and os.path.exists(base_inputs)):
        make_base(name, out_dir)
    model = onnx.load(base)
    if model.graph.input[0].type.tensor_type.shape.dim[0].dim_value == batch:
        return base, base_inputs
    path = os.path.join(out_dir, batched_name(name, batch) + ".onnx")
    inputs = os.path.join(out_dir, batched_name(name, batch) + "_inputs.npz")
    if os.path.exists(path) and os.path.exists(inputs):
        return path, inputs
    model, _ = _batched_model(model, batch)
    with np.load(base_inputs) as z:
        feed0 = {k: z[k] for k in z.files}
    rng = np.random.default_rng(batch)
    feed = {}
    for k, a in feed0.items():
        shape = (batch,) + a.shape[1:]
        # Integer inputs (token ids) draw from the model's own values: they stay in range.
        b = (rng.standard_normal(shape).astype(a.dtype) if a.dtype.kind == "f"
             else rng.choice(a.ravel(), shape))
        b[0] = a[0]
        feed[k] = b
    tmp = path + ".tmp"
    onnx.save(model, tmp)
    if check:
        _check_row0(base, feed0, tmp, feed, name, batch)
    np.savez(inputs, **feed)
    os.replace(tmp, path)
    return path, inputs


def _check_row0(base, feed0, path, feed, name, batch):
    import onnxruntime as ort
    ref = ort.InferenceSession(base, providers=["CPUExecutionProvider"])
    new = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    want = ref.run(None, feed0)
    got = new.run(None, feed)
    for o, w, g in zip(new.get_outputs(), want, got):
        if g.shape[0] != batch or not np.allclose(g[0], w[0], rtol=1e-4, atol=1e-5):
            raise RuntimeError(f"{name} at batch {batch}: output {o.name} row 0 differs from the "
                               f"batch-{w.shape[0]} model's (shape {g.shape})")
