"""FLOPs of an ONNX model: 2 x the multiply-accumulates of its Conv, ConvTranspose, MatMul,
Gemm and LSTM/GRU/RNN nodes (everything else -- activations, norms, pooling, softmax -- is left out, as is usual
for GFLOP/s figures), with shapes from ONNX shape inference. Also lists the distinct conv
workloads of a model (bench/kernels.py).

    python3 bench/flops.py MODEL.onnx...
"""
from __future__ import annotations

import sys
from collections import namedtuple

import numpy as np
import onnx

ConvWorkload = namedtuple("ConvWorkload", "n c m h w kh kw stride pad group")


def _shapes(model):
    """{value name: static shape (list of ints)} of every value shape inference knows."""
    # data_prop: shapes computed by Shape -> Gather -> Concat -> Reshape chains (channel shuffle)
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    g = inferred.graph
    shapes = {t.name: list(t.dims) for t in g.initializer}
    for v in list(g.input) + list(g.value_info) + list(g.output):
        t = v.type.tensor_type
        if t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
            shapes[v.name] = [d.dim_value for d in t.shape.dim]
    return shapes


def _attr(node, name, default):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def node_flops(node, shapes):
    """2 x MACs of one node (0 for ops that are not counted); raises when a shape is unknown."""
    def shape(i):
        name = node.input[i] if i >= 0 else node.output[0]
        if name not in shapes:
            raise ValueError(f"{node.op_type} {node.name}: shape of {name} unknown")
        return shapes[name]
    if node.op_type == "Conv":
        w, y = shape(1), shape(-1)            # w: [M, C/group, kh, kw]; y: [N, M, oh, ow]
        return 2 * int(np.prod(y)) * int(np.prod(w[1:]))
    if node.op_type == "ConvTranspose":
        x, w = shape(0), shape(1)             # w: [C, M/group, kh, kw]; every input pixel
        return 2 * int(np.prod(x)) * int(np.prod(w[1:]))
    if node.op_type == "MatMul":
        a, y = shape(0), shape(-1)
        return 2 * int(np.prod(y)) * a[-1]
    if node.op_type == "Gemm":
        a, y = shape(0), shape(-1)
        k = a[0] if _attr(node, "transA", 0) else a[1]
        return 2 * int(np.prod(y)) * k
    if node.op_type in ("LSTM", "GRU", "RNN"):  # the input and recurrent products of every step
        x, w, r = shape(0), shape(1), shape(2)  # w: [D, G*H, I]; r: [D, G*H, H]
        steps_x_batch = x[0] * x[1]             # [T, B, I] or (layout 1) [B, T, I]
        return 2 * steps_x_batch * w[0] * w[1] * (w[2] + r[2])
    return 0


COUNTED = ("Conv", "ConvTranspose", "MatMul", "Gemm", "LSTM", "GRU", "RNN")


def _shapes_by_running(model, names):
    """Shapes of `names` from one ONNX Runtime run (zeros as inputs): for values that shape
    inference leaves open (reshape targets computed from shapes, as PyTorch exports them)."""
    import onnxruntime as ort
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.graph.output.extend([onnx.ValueInfoProto(name=n) for n in names])
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    np_types = {"tensor(float)": np.float32, "tensor(int64)": np.int64, "tensor(int32)": np.int32}
    feed = {i.name: np.zeros(i.shape, np_types.get(i.type, np.float32)) for i in sess.get_inputs()}
    return {n: list(v.shape) for n, v in zip(names, sess.run(names, feed))}


def model_flops(model):
    """Total counted FLOPs of a model (an onnx.ModelProto or a path)."""
    if isinstance(model, str):
        model = onnx.load(model)
    shapes = _shapes(model)
    missing = sorted({v for n in model.graph.node if n.op_type in COUNTED
                      for v in list(n.input[:3]) + [n.output[0]] if v and v not in shapes})
    if missing:
        shapes.update(_shapes_by_running(model, missing))
    return sum(node_flops(n, shapes) for n in model.graph.node)


def conv_workloads(model):
    """{ConvWorkload: count} of a model's Conv nodes, in first-seen order."""
    if isinstance(model, str):
        model = onnx.load(model)
    shapes = _shapes(model)
    out = {}
    for node in model.graph.node:
        if node.op_type != "Conv":
            continue
        x, w = shapes[node.input[0]], shapes[node.input[1]]
        strides = _attr(node, "strides", [1, 1])
        pads = _attr(node, "pads", [0, 0, 0, 0])
        if len(set(strides)) != 1 or len(set(pads)) != 1:
            raise ValueError(f"{node.name}: non-square stride/pad {strides} {pads}")
        wl = ConvWorkload(x[0], x[1], w[0], x[2], x[3], w[2], w[3], strides[0], pads[0],
                          _attr(node, "group", 1))
        out[wl] = out.get(wl, 0) + 1
    return out


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print(f"{path}: {model_flops(path) / 1e9:.3f} GFLOP")
