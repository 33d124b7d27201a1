#!/usr/bin/env python3
"""Builds the ONNX models Kiln ships and tests against ONNX Runtime.

Two kinds of models:

* The digits CNN (models/digits/, committed): a small CNN trained here, in plain numpy
  (hand-written forward and backward passes, Adam), on scikit-learn's 8x8 `load_digits`.
* Test models with seeded random weights (written to --out, default build/models, not
  committed): mlp, small_cnn, resnet_block, resnet18, two_input_mix, old_opsets, opset11,
  bert_tiny, inception, two_tower, mobilenetv2_96 (the default set, used by the tests).
  Each comes with `<name>_inputs.npz` holding seeded random inputs.
* Benchmark models, built only when named with --only: resnet50, mobilenetv2 (torchvision
  layouts, 224x224) and bert_base (12-layer BERT-base encoder, seq 128; ~340 MB of weights).

Test models are built with `EagerGraph`, which emits ONNX nodes and at the same time evaluates
every node in float64 numpy. The eager values give (1) an independent reference checked against
ONNX Runtime before a model is written, and (2) the activation statistics used to set the
BatchNormalization running mean/variance so activations of the deep nets stay O(1) while
scale/bias/mean/var remain non-trivial.

Everything is deterministic (fixed seeds) and runs in well under a minute on two cores.

    python3 scripts/make_models.py                 # digits model + test models
    python3 scripts/make_models.py --out DIR --skip-digits
    python3 scripts/make_models.py --only mlp,small_cnn
    python3 scripts/make_models.py --skip-digits --only resnet50,mobilenetv2,bert_base
    python3 scripts/make_models.py --skip-digits --only resnet18 --batch 8   # + resnet18_b8
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPSET = 17

# --------------------------------------------------------------------------------------------
# numpy reference ops (NCHW, float64 unless the caller passes float32)
# --------------------------------------------------------------------------------------------


def _patches(xp, kh, kw, sh, sw, oh, ow):
    """Returns [N, C, kh*kw, oh, ow]: the strided windows of an already padded input."""
    cols = []
    for i in range(kh):
        for j in range(kw):
            cols.append(xp[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw])
    return np.stack(cols, axis=2)


def np_conv(x, w, b=None, strides=(1, 1), pads=(0, 0, 0, 0), group=1):
    n, c, h, wd = x.shape
    o, ci, kh, kw = w.shape
    assert ci * group == c and o % group == 0, (ci, group, c, o)
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (h + pads[0] + pads[2] - kh) // strides[0] + 1
    ow = (wd + pads[1] + pads[3] - kw) // strides[1] + 1
    cols = _patches(xp, kh, kw, strides[0], strides[1], oh, ow).reshape(
        n, group, ci * kh * kw, oh * ow)
    y = np.einsum("gok,ngkp->ngop", w.reshape(group, o // group, -1), cols,
                  optimize=True).reshape(n, o, oh, ow)
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return y


def np_pool(x, kind, kernel, strides, pads=(0, 0, 0, 0)):
    n, c, h, w = x.shape
    kh, kw = kernel
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])),
                constant_values=fill)
    oh = (h + pads[0] + pads[2] - kh) // strides[0] + 1
    ow = (w + pads[1] + pads[3] - kw) // strides[1] + 1
    p = _patches(xp, kh, kw, strides[0], strides[1], oh, ow)
    if kind == "max":
        return p.max(axis=2)
    # AveragePool default count_include_pad=0: divide by the number of real (unpadded) cells.
    ones = np.pad(np.ones((1, 1, h, w)), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    cnt = _patches(ones, kh, kw, strides[0], strides[1], oh, ow).sum(axis=2)
    return p.sum(axis=2) / cnt


def np_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_softmax_2d(x, axis):
    """Softmax-1/11 semantics: coerce to 2-D [prod(dims[:axis]), prod(dims[axis:])]."""
    axis = axis % x.ndim
    flat = x.reshape(int(np.prod(x.shape[:axis])), -1)
    return np_softmax(flat, 1).reshape(x.shape)


def np_bn(x, scale, bias, mean, var, eps):
    sh = (1, -1) + (1,) * (x.ndim - 2)
    return (x - mean.reshape(sh)) / np.sqrt(var.reshape(sh) + eps) * scale.reshape(sh) + \
        bias.reshape(sh)


def np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


# --------------------------------------------------------------------------------------------
# EagerGraph: an onnx.helper graph builder that evaluates each node in numpy as it is added
# --------------------------------------------------------------------------------------------


class EagerGraph:
    def __init__(self, name):
        self.name = name
        self.nodes = []
        self.inits = []
        self.inputs = []
        self.outputs = []
        self.vals = {}          # value name -> float64/int64 numpy array
        self.feed = {}          # graph input name -> array fed to the model (its real dtype)
        self._n = 0

    def _fresh(self, prefix):
        self._n += 1
        return f"{prefix}_{self._n}"

    def input(self, name, arr, dims=None):
        """A graph input; `dims` may name symbolic dims (strings) in place of ints."""
        dims = list(arr.shape) if dims is None else dims
        elem = helper.np_dtype_to_tensor_dtype(arr.dtype)
        self.inputs.append(helper.make_tensor_value_info(name, elem, dims))
        self.feed[name] = arr
        self.vals[name] = arr.astype(np.float64) if arr.dtype.kind == "f" else arr
        return name

    def init(self, arr, prefix="w"):
        """A float32 (or int64) initializer; the eager value is the rounded float32 value."""
        name = self._fresh(prefix)
        arr = np.ascontiguousarray(arr.astype(np.float32) if arr.dtype.kind == "f" else arr)
        self.inits.append(numpy_helper.from_array(arr, name))
        self.vals[name] = arr.astype(np.float64) if arr.dtype.kind == "f" else arr
        return name

    def constant(self, arr, prefix="c"):
        """A Constant node (exercises the Constant op instead of an initializer)."""
        name = self._fresh(prefix)
        arr = arr.astype(np.float32) if arr.dtype.kind == "f" else arr
        self.nodes.append(helper.make_node("Constant", [], [name],
                                           value=numpy_helper.from_array(arr, name + "_v")))
        self.vals[name] = arr.astype(np.float64) if arr.dtype.kind == "f" else arr
        return name

    def op(self, op_type, ins, fn, out=None, **attrs):
        out = out or self._fresh(op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(ins), [out], name=out + "_node",
                                           **attrs))
        self.vals[out] = fn(*[self.vals[i] if i else None for i in ins])
        return out

    def output(self, name, dims=None, elem=TensorProto.FLOAT):
        dims = list(self.vals[name].shape) if dims is None else dims
        self.outputs.append(helper.make_tensor_value_info(name, elem, dims))

    def model(self, opset=OPSET):
        g = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="kiln-make_models")
        m.ir_version = 8
        onnx.checker.check_model(m, full_check=True)
        return m

    # ---- layers ---------------------------------------------------------------------------

    def conv(self, x, w, b=None, strides=(1, 1), pads=(0, 0, 0, 0), group=1):
        wn = self.init(w, "conv_w")
        ins = [x, wn] + ([self.init(b, "conv_b")] if b is not None else [])
        k = list(w.shape[2:])
        attrs = {"group": group} if group != 1 else {}
        return self.op("Conv", ins,
                       lambda a, ww, bb=None: np_conv(a, ww, bb, strides, pads, group),
                       kernel_shape=k, strides=list(strides), pads=list(pads), **attrs)

    def bn(self, x, scale, bias, mean, var, eps=1e-5):
        names = [self.init(a, "bn") for a in (scale, bias, mean, var)]
        return self.op("BatchNormalization", [x] + names,
                       lambda a, s, b, m, v: np_bn(a, s, b, m, v, eps), epsilon=eps)

    def relu(self, x):
        return self.op("Relu", [x], lambda a: np.maximum(a, 0.0))

    def relu6(self, x):
        """torch ReLU6 as exported at opset 11+: Clip with constant min 0 and max 6."""
        lo = self.init(np.array(0.0, np.float32), "relu6_min")
        hi = self.init(np.array(6.0, np.float32), "relu6_max")
        return self.op("Clip", [x, lo, hi], lambda a, l, h: np.clip(a, l, h))

    def add(self, a, b):
        return self.op("Add", [a, b], np.add)

    def matmul(self, a, b):
        return self.op("MatMul", [a, b], np.matmul)

    def linear(self, x, w, b):
        """torch Linear on a [.., in] tensor as exported for rank > 2: MatMul(x, W^T) + b."""
        return self.add(self.matmul(x, self.init(w.T.copy(), "lin_w")), self.init(b, "lin_b"))

    def layer_norm(self, x, gamma, beta, eps=1e-12):
        def f(a, s, b):
            mu = a.mean(axis=-1, keepdims=True)
            var = ((a - mu) ** 2).mean(axis=-1, keepdims=True)
            return (a - mu) / np.sqrt(var + eps) * s + b
        return self.op("LayerNormalization", [x, self.init(gamma, "ln_g"), self.init(beta, "ln_b")],
                       f, axis=-1, epsilon=eps)

    def gelu_erf(self, x):
        """torch's exact GELU as exported below opset 20: x * 0.5 * (1 + erf(x / sqrt 2))."""
        from scipy.special import erf as verf
        d = self.op("Div", [x, self.init(np.array(1.4142135381698608, np.float32), "sqrt2")],
                    np.divide)
        e = self.op("Erf", [d], verf)
        a = self.op("Add", [e, self.init(np.array(1.0, np.float32), "one")], np.add)
        m = self.op("Mul", [x, a], np.multiply)
        return self.op("Mul", [m, self.init(np.array(0.5, np.float32), "half")], np.multiply)

    def reshape(self, x, shape):
        return self.op("Reshape", [x, self.init(np.array(shape, np.int64), "shape")],
                       lambda a, sh: a.reshape(sh))

    def transpose(self, x, perm):
        return self.op("Transpose", [x], lambda a: a.transpose(perm), perm=list(perm))

    def concat(self, xs, axis):
        return self.op("Concat", xs, lambda *a: np.concatenate(a, axis), axis=axis)

    def maxpool(self, x, kernel, strides, pads=(0, 0, 0, 0)):
        return self.op("MaxPool", [x], lambda a: np_pool(a, "max", kernel, strides, pads),
                       kernel_shape=list(kernel), strides=list(strides), pads=list(pads))

    def avgpool(self, x, kernel, strides):
        return self.op("AveragePool", [x], lambda a: np_pool(a, "avg", kernel, strides),
                       kernel_shape=list(kernel), strides=list(strides))

    def gap(self, x):
        return self.op("GlobalAveragePool", [x], lambda a: a.mean(axis=(2, 3), keepdims=True))

    def flatten(self, x):
        return self.op("Flatten", [x], lambda a: a.reshape(a.shape[0], -1), axis=1)

    def gemm(self, x, w, b, out=None):
        """Y = X W^T + b with W [out, in] (transB=1, the torch Linear layout)."""
        return self.op("Gemm", [x, self.init(w, "fc_w"), self.init(b, "fc_b")],
                       lambda a, ww, bb: a @ ww.T + bb, out=out, transB=1)


def he(rng, shape):
    fan_in = int(np.prod(shape[1:]))
    return rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)


def conv_bn(g, rng, x, cin, cout, k, stride, relu=True, gamma=(0.5, 1.5), group=1):
    """Conv (no bias) + BatchNormalization with running stats set near the real statistics of
    the eager activations (so the net stays O(1)), perturbed so they are not trivial.
    `relu`: True (Relu), False (none) or "relu6" (Clip(0, 6), how torch exports ReLU6)."""
    p = k // 2
    y = g.conv(x, he(rng, (cout, cin // group, k, k)), None, (stride, stride), (p, p, p, p),
               group)
    act = g.vals[y]
    mu = act.mean(axis=(0, 2, 3))
    sd = act.std(axis=(0, 2, 3)) + 1e-3
    mean = mu + 0.1 * sd * rng.standard_normal(cout)
    var = (sd * rng.uniform(0.8, 1.25, cout)) ** 2
    scale = rng.uniform(*gamma, cout) * rng.choice([-1.0, 1.0], cout, p=[0.1, 0.9])
    bias = 0.2 * rng.standard_normal(cout)
    y = g.bn(y, scale, bias, mean, var)
    if relu == "relu6":
        return g.relu6(y)
    return g.relu(y) if relu else y


def basic_block(g, rng, x, cin, cout, stride):
    """torchvision BasicBlock: conv3x3-bn-relu-conv3x3-bn (+ shortcut) -> relu. The shortcut is
    a strided 1x1 conv + bn when the shape changes."""
    y = conv_bn(g, rng, x, cin, cout, 3, stride)
    y = conv_bn(g, rng, y, cout, cout, 3, 1, relu=False, gamma=(0.3, 0.7))
    sc = x if (stride == 1 and cin == cout) else \
        conv_bn(g, rng, x, cin, cout, 1, stride, relu=False, gamma=(0.3, 0.7))
    return g.relu(g.add(y, sc))


# --------------------------------------------------------------------------------------------
# test models
# --------------------------------------------------------------------------------------------


def build_mlp(rng):
    g = EagerGraph("mlp")
    x = g.input("x", rng.standard_normal((4, 64)).astype(np.float32))
    h = x
    for i, (fi, fo) in enumerate([(64, 128), (128, 64), (64, 10)]):
        h = g.gemm(h, he(rng, (fo, fi)), 0.1 * rng.standard_normal(fo))
        if i < 2:
            h = g.relu(h)
    g.op("Softmax", [h], lambda a: np_softmax(a, 1), out="probs", axis=1)
    g.output("probs")
    return g


def build_small_cnn(rng):
    g = EagerGraph("small_cnn")
    x = g.input("input", rng.standard_normal((2, 3, 32, 32)).astype(np.float32))
    h = g.relu(g.conv(x, he(rng, (16, 3, 3, 3)), 0.1 * rng.standard_normal(16),
                      pads=(1, 1, 1, 1)))
    h = g.maxpool(h, (2, 2), (2, 2))
    h = g.relu(g.conv(h, he(rng, (32, 16, 3, 3)), 0.1 * rng.standard_normal(32),
                      pads=(1, 1, 1, 1)))
    h = g.avgpool(h, (2, 2), (2, 2))
    h = g.flatten(h)
    g.gemm(h, he(rng, (10, 32 * 8 * 8)), 0.1 * rng.standard_normal(10), out="logits")
    g.output("logits")
    return g


def build_resnet_block(rng):
    g = EagerGraph("resnet_block")
    x = g.input("input", rng.standard_normal((1, 3, 64, 64)).astype(np.float32))
    h = conv_bn(g, rng, x, 3, 16, 7, 2)                 # [1,16,32,32]
    h = g.maxpool(h, (3, 3), (2, 2), (1, 1, 1, 1))       # [1,16,16,16]
    h = basic_block(g, rng, h, 16, 16, 1)                # identity shortcut
    h = basic_block(g, rng, h, 16, 32, 2)                # strided 1x1 projection shortcut
    h = g.flatten(g.gap(h))
    g.gemm(h, he(rng, (10, 32)), 0.1 * rng.standard_normal(10), out="logits")
    g.output("logits")
    return g


def build_resnet18(rng):
    g = EagerGraph("resnet18")
    x = g.input("input", rng.standard_normal((1, 3, 224, 224)).astype(np.float32))
    h = conv_bn(g, rng, x, 3, 64, 7, 2)                  # conv1 -> [1,64,112,112]
    h = g.maxpool(h, (3, 3), (2, 2), (1, 1, 1, 1))       # -> [1,64,56,56]
    cin = 64
    for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:   # layer1..layer4
        h = basic_block(g, rng, h, cin, cout, stride)
        h = basic_block(g, rng, h, cout, cout, 1)
        cin = cout
    h = g.flatten(g.gap(h))                              # [1,512]
    g.gemm(h, rng.standard_normal((1000, 512)) / np.sqrt(512), 0.01 * rng.standard_normal(1000),
           out="logits")
    g.output("logits")
    return g


def build_two_input_mix(rng):
    """MatMul (batched, broadcasting batch dims), Transpose, Concat, Reshape (constant shape),
    Sub/Div/Mul broadcasting, Clip (opset-11+ inputs), Sigmoid, Tanh, Exp, Identity."""
    g = EagerGraph("two_input_mix")
    a = g.input("a", rng.standard_normal((2, 3, 4, 5)).astype(np.float32))
    b = g.input("b", rng.standard_normal((3, 5, 6)).astype(np.float32))
    m = g.op("MatMul", [a, b], np.matmul)                               # [2,3,4,6]
    s = g.op("Sigmoid", [m], np_sigmoid)
    t = g.op("Tanh", [m], np.tanh)
    c = g.op("Concat", [s, t], lambda p, q: np.concatenate([p, q], 3), axis=3)   # [2,3,4,12]
    shape = g.constant(np.array([2, 12, 12], np.int64), "shape")
    r = g.op("Reshape", [c, shape], lambda p, sh: p.reshape(sh))       # [2,12,12]
    mu = g.init(rng.standard_normal(12) * 0.3, "mu")                    # broadcast over last
    sd = g.init(rng.uniform(0.2, 0.6, (1, 12, 1)), "sd")                # broadcast middle
    z = g.op("Div", [g.op("Sub", [r, mu], np.subtract), sd], np.divide)
    lo = g.constant(np.array(-2.5, np.float32), "lo")
    hi = g.constant(np.array(2.0, np.float32), "hi")
    zc = g.op("Clip", [z, lo, hi], lambda p, l, h: np.clip(p, l, h))
    e = g.op("Exp", [zc], np.exp)
    et = g.op("Transpose", [e], lambda p: p.transpose(0, 2, 1), perm=[0, 2, 1])
    gram = g.op("MatMul", [et, e], np.matmul)                           # [2,12,12]
    scale = g.constant(np.array([0.05], np.float32), "scale")
    g.op("Identity", [g.op("Mul", [gram, scale], np.multiply)], lambda p: p, out="gram")
    # Second output: a 2-D @ 4-D broadcast MatMul on a transposed input.
    at = g.op("Transpose", [a], lambda p: p.transpose(1, 0, 3, 2), perm=[1, 0, 3, 2])  # [3,2,5,4]
    w = g.init(rng.standard_normal((7, 5)), "w")
    g.op("MatMul", [w, at], np.matmul, out="proj")                     # [3,2,7,4]
    g.output("gram")
    g.output("proj")
    return g


def build_old_opsets(rng):
    """Opset 10: Clip-6 with min/max attributes, Softmax-1 (2-D coercion at axis=1 of a 3-D
    tensor: softmax over the 12 trailing elements together), Reshape-5, Gemm-9."""
    g = EagerGraph("old_opsets")
    x = g.input("x", (2.0 * rng.standard_normal((2, 3, 4))).astype(np.float32))
    c = g.op("Clip", [x], lambda p: np.clip(p, -1.5, 1.25), min=-1.5, max=1.25)
    s = g.op("Softmax", [c], lambda p: np_softmax_2d(p, 1), out="softmax2d", axis=1)
    r = g.op("Reshape", [s, g.init(np.array([2, 12], np.int64), "shape")],
             lambda p, sh: p.reshape(sh))
    g.gemm(r, rng.standard_normal((5, 12)), 0.1 * rng.standard_normal(5), out="y")
    g.output("softmax2d")
    g.output("y")
    return g


def build_opset11(rng):
    """Opset 11: Clip-11 with only `min` given, Softmax-11 with a negative axis (2-D coercion
    at axis -2 of a 3-D tensor)."""
    g = EagerGraph("opset11")
    x = g.input("x", (2.0 * rng.standard_normal((2, 3, 4))).astype(np.float32))
    lo = g.init(np.array(-0.75, np.float32), "lo")
    c = g.op("Clip", [x, lo], lambda p, l: np.maximum(p, l))
    g.op("Softmax", [c], lambda p: np_softmax_2d(p, -2), out="y", axis=-2)
    g.output("y")
    return g


# ---- model-zoo nets (benchmarks) and their reduced-size variants (tests) -------------------


def bottleneck(g, rng, x, cin, width, stride):
    """torchvision Bottleneck (v1.5: stride on the 3x3): 1x1-bn-relu, 3x3-bn-relu, 1x1-bn
    (+ shortcut, a strided 1x1 conv + bn when the shape changes) -> relu. Expansion 4."""
    cout = 4 * width
    y = conv_bn(g, rng, x, cin, width, 1, 1)
    y = conv_bn(g, rng, y, width, width, 3, stride)
    y = conv_bn(g, rng, y, width, cout, 1, 1, relu=False, gamma=(0.3, 0.7))
    sc = x if (stride == 1 and cin == cout) else \
        conv_bn(g, rng, x, cin, cout, 1, stride, relu=False, gamma=(0.3, 0.7))
    return g.relu(g.add(y, sc))


def build_resnet50(rng):
    """torchvision resnet50: stem, layers of [3, 4, 6, 3] bottlenecks, GAP, fc 2048->1000."""
    g = EagerGraph("resnet50")
    x = g.input("input", rng.standard_normal((1, 3, 224, 224)).astype(np.float32))
    h = conv_bn(g, rng, x, 3, 64, 7, 2)
    h = g.maxpool(h, (3, 3), (2, 2), (1, 1, 1, 1))
    cin = 64
    for width, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
        for i in range(blocks):
            h = bottleneck(g, rng, h, cin, width, stride if i == 0 else 1)
            cin = 4 * width
    h = g.flatten(g.gap(h))
    g.gemm(h, he(rng, (1000, 2048)), 0.1 * rng.standard_normal(1000), out="logits")
    g.output("logits")
    return g


# (expansion t, output channels c, repeats n, first stride s) of torchvision's MobileNetV2.
MOBILENETV2_SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                        (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


def build_mobilenetv2(rng, size=224, name="mobilenetv2"):
    """torchvision mobilenet_v2 (width 1.0): conv-bn-relu6 stem, inverted residuals (1x1 expand
    -> 3x3 depthwise (group = channels) -> 1x1 linear project, residual add when the shape is
    kept), 1x1 conv to 1280, GAP, fc 1280->1000. ReLU6 is Clip(0, 6)."""
    g = EagerGraph(name)
    x = g.input("input", rng.standard_normal((1, 3, size, size)).astype(np.float32))
    h = conv_bn(g, rng, x, 3, 32, 3, 2, relu="relu6")
    cin = 32
    for t, c, n, s in MOBILENETV2_SETTINGS:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            y = h if t == 1 else conv_bn(g, rng, h, cin, hidden, 1, 1, relu="relu6")
            y = conv_bn(g, rng, y, hidden, hidden, 3, stride, relu="relu6", group=hidden)
            y = conv_bn(g, rng, y, hidden, c, 1, 1, relu=False, gamma=(0.3, 0.7))
            h = g.add(h, y) if (stride == 1 and cin == c) else y
            cin = c
    h = conv_bn(g, rng, h, cin, 1280, 1, 1, relu="relu6")
    h = g.flatten(g.gap(h))
    g.gemm(h, he(rng, (1000, 1280)) * 0.5, 0.1 * rng.standard_normal(1000), out="logits")
    g.output("logits")
    return g


def build_mobilenetv2_96(rng):
    return build_mobilenetv2(rng, 96, "mobilenetv2_96")


def inception_block(g, rng, x, cin, c1, c3r, c3, c5r, c5, cp):
    """GoogLeNet inception: 1x1 | 1x1->3x3 | 1x1->5x5 | maxpool 3x3/1->1x1, concatenated."""
    b1 = conv_bn(g, rng, x, cin, c1, 1, 1)
    b2 = conv_bn(g, rng, conv_bn(g, rng, x, cin, c3r, 1, 1), c3r, c3, 3, 1)
    b3 = conv_bn(g, rng, conv_bn(g, rng, x, cin, c5r, 1, 1), c5r, c5, 5, 1)
    b4 = conv_bn(g, rng, g.maxpool(x, (3, 3), (1, 1), (1, 1, 1, 1)), cin, cp, 1, 1)
    return g.concat([b1, b2, b3, b4], 1), c1 + c3 + c5 + cp


def build_inception(rng):
    """A GoogLeNet-style net on 112x112: stem (7x7/2, maxpool, 1x1, 3x3, maxpool), inception
    3a, 3b, maxpool, 4a (torchvision GoogLeNet widths; conv + bn + relu everywhere), GAP, fc."""
    g = EagerGraph("inception")
    x = g.input("input", rng.standard_normal((1, 3, 112, 112)).astype(np.float32))
    h = conv_bn(g, rng, x, 3, 64, 7, 2)                      # 56
    h = g.maxpool(h, (3, 3), (2, 2), (1, 1, 1, 1))            # 28
    h = conv_bn(g, rng, h, 64, 64, 1, 1)
    h = conv_bn(g, rng, h, 64, 192, 3, 1)
    h = g.maxpool(h, (3, 3), (2, 2), (1, 1, 1, 1))            # 14
    h, c = inception_block(g, rng, h, 192, 64, 96, 128, 16, 32, 32)     # 256
    h, c = inception_block(g, rng, h, c, 128, 128, 192, 32, 96, 64)     # 480
    h = g.maxpool(h, (3, 3), (2, 2), (1, 1, 1, 1))            # 7
    h, c = inception_block(g, rng, h, c, 192, 96, 208, 16, 48, 64)      # 512
    h = g.flatten(g.gap(h))
    g.gemm(h, he(rng, (100, c)), 0.1 * rng.standard_normal(100), out="logits")
    g.output("logits")
    return g


def build_two_tower(rng):
    """Two independent towers joined at the end: a conv tower on an image and an MLP tower on
    a feature vector, Concat + Gemm head. Batch 2."""
    g = EagerGraph("two_tower")
    img = g.input("image", rng.standard_normal((2, 3, 32, 32)).astype(np.float32))
    feat = g.input("features", rng.standard_normal((2, 48)).astype(np.float32))
    a = conv_bn(g, rng, img, 3, 16, 3, 1)
    a = g.maxpool(a, (2, 2), (2, 2))
    a = conv_bn(g, rng, a, 16, 32, 3, 2)
    a = g.flatten(g.gap(a))                                            # [2,32]
    b = g.relu(g.gemm(feat, he(rng, (64, 48)), 0.1 * rng.standard_normal(64)))
    b = g.relu(g.gemm(b, he(rng, (32, 64)), 0.1 * rng.standard_normal(32)))   # [2,32]
    j = g.concat([a, b], 1)
    g.gemm(j, he(rng, (10, 64)), 0.1 * rng.standard_normal(10), out="logits")
    g.output("logits")
    return g


def bert_layer(g, rng, x, seq, hidden, heads, ffn):
    """One BERT encoder layer as torch.onnx exports HF BertLayer at opset 17: Q/K/V linears
    (MatMul + Add), heads split by Reshape + Transpose, scores / sqrt(d), Softmax, context
    Transpose + Reshape, output linear, residual + LayerNormalization, FFN with erf GELU,
    residual + LayerNormalization."""
    d = hidden // heads
    wstd = 1.0 / np.sqrt(hidden)
    def lin(h, fi, fo, std):
        return g.linear(h, rng.standard_normal((fo, fi)) * std, 0.1 * rng.standard_normal(fo))
    def split_heads(h, perm):
        return g.transpose(g.reshape(h, [1, seq, heads, d]), perm)
    q = split_heads(lin(x, hidden, hidden, wstd), (0, 2, 1, 3))          # [1,h,S,d]
    k = split_heads(lin(x, hidden, hidden, wstd), (0, 2, 3, 1))          # [1,h,d,S]
    v = split_heads(lin(x, hidden, hidden, wstd), (0, 2, 1, 3))
    scores = g.op("Div", [g.matmul(q, k), g.init(np.array(np.sqrt(d), np.float32), "sqrt_d")],
                  np.divide)
    probs = g.op("Softmax", [scores], lambda a: np_softmax(a, -1), axis=-1)
    ctx = g.reshape(g.transpose(g.matmul(probs, v), (0, 2, 1, 3)), [1, seq, hidden])
    attn = lin(ctx, hidden, hidden, wstd)
    def ln(h):
        return g.layer_norm(h, rng.uniform(0.5, 1.5, hidden), 0.1 * rng.standard_normal(hidden))
    h1 = ln(g.add(attn, x))
    f = g.gelu_erf(lin(h1, hidden, ffn, wstd))
    f = lin(f, ffn, hidden, 1.0 / np.sqrt(ffn))
    return ln(g.add(f, h1))


def build_bert(rng, name, layers, hidden, heads, ffn, seq, vocab=None):
    """A BERT encoder. With `vocab`, the input is input_ids [1, S] (i64) looked up by Gather in
    word and position embedding tables (+ LayerNormalization); otherwise the input is the
    embeddings f32[1, S, hidden]. Output: last_hidden_state [1, S, hidden]."""
    g = EagerGraph(name)
    if vocab:
        ids = g.input("input_ids", rng.integers(0, vocab, (1, seq)).astype(np.int64))
        take = lambda table, i: table[i]  # noqa: E731
        words = g.op("Gather", [g.init(rng.standard_normal((vocab, hidden)), "word_emb"), ids],
                     take, axis=0)
        pos = g.op("Gather", [g.init(rng.standard_normal((512, hidden)) * 0.5, "pos_emb"),
                              g.init(np.arange(seq, dtype=np.int64)[None, :], "pos_ids")],
                   take, axis=0)
        h = g.layer_norm(g.add(words, pos), rng.uniform(0.5, 1.5, hidden),
                         0.1 * rng.standard_normal(hidden))
    else:
        h = g.input("embeddings", rng.standard_normal((1, seq, hidden)).astype(np.float32))
    for i in range(layers):
        h = bert_layer(g, rng, h, seq, hidden, heads, ffn)
    g.op("Identity", [h], lambda a: a, out="last_hidden_state")
    g.output("last_hidden_state")
    return g


def build_bert_base(rng):
    return build_bert(rng, "bert_base", 12, 768, 12, 3072, 128)


def build_bert_tiny(rng):
    return build_bert(rng, "bert_tiny", 2, 128, 2, 512, 32, vocab=1000)


TEST_MODELS = {
    "mlp": (build_mlp, OPSET),
    "small_cnn": (build_small_cnn, OPSET),
    "resnet_block": (build_resnet_block, OPSET),
    "resnet18": (build_resnet18, OPSET),
    "two_input_mix": (build_two_input_mix, OPSET),
    "old_opsets": (build_old_opsets, 10),
    "opset11": (build_opset11, 11),
    "bert_tiny": (build_bert_tiny, OPSET),
    "inception": (build_inception, OPSET),
    "two_tower": (build_two_tower, OPSET),
    "mobilenetv2_96": (build_mobilenetv2_96, OPSET),
}

# Benchmark-size models: built only when named (--only, bench/bench_models.py), never by the
# default set the tests use. bert_base's weights are ~340 MB: build/ only, never committed.
BIG_MODELS = {
    "resnet50": (build_resnet50, OPSET),
    "mobilenetv2": (build_mobilenetv2, OPSET),
    "bert_base": (build_bert_base, OPSET),
}
ALL_MODELS = {**TEST_MODELS, **BIG_MODELS}

# Fixed seeds (the first seven are the historical 1000 + sorted index) so adding a model never
# changes another model's weights.
SEEDS = {"mlp": 1000, "small_cnn": 1005, "resnet_block": 1004, "resnet18": 1003,
         "two_input_mix": 1006, "old_opsets": 1001, "opset11": 1002,
         "bert_tiny": 1010, "inception": 1011, "two_tower": 1012, "mobilenetv2_96": 1013,
         "resnet50": 1020, "mobilenetv2": 1021, "bert_base": 1022}


def ort_run(path_or_bytes, feed, threads=1):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path_or_bytes, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feed)))


def write_test_model(name, out_dir, check=True):
    """Builds test model `name` into out_dir/<name>.onnx and out_dir/<name>_inputs.npz.
    With `check`, runs it under ONNX Runtime and compares to the float64 eager reference."""
    builder, opset = ALL_MODELS[name]
    g = builder(np.random.default_rng(SEEDS[name]))
    model = g.model(opset)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name + ".onnx")
    onnx.save(model, path)
    np.savez(os.path.join(out_dir, name + "_inputs.npz"), **g.feed)
    if check:
        got = ort_run(path, g.feed)
        for o in g.outputs:
            ref = g.vals[o.name]
            err = np.abs(got[o.name] - ref).max()
            scale = np.abs(ref).max()
            if not np.allclose(got[o.name], ref, rtol=1e-3, atol=1e-4 * max(1.0, scale)):
                raise RuntimeError(f"{name}/{o.name}: ORT differs from numpy reference, "
                                   f"max abs err {err:g} (max |ref| {scale:g})")
    return path


def write_test_models(out_dir, names=None, check=True, verbose=False):
    paths = {}
    for name in names or TEST_MODELS:
        t0 = time.time()
        paths[name] = write_test_model(name, out_dir, check)
        if verbose:
            print(f"  {name:14s} {os.path.getsize(paths[name]) / 1e6:8.2f} MB  "
                  f"{time.time() - t0:5.2f} s")
    return paths


# --------------------------------------------------------------------------------------------
# digits CNN: numpy training
# --------------------------------------------------------------------------------------------

DIGITS_SEED = 0


def load_digits_split():
    """Stratified 1437/360 split of scikit-learn's digits; pixels scaled to [0, 1] (x / 16)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None, :, :]
    y = d.target.astype(np.int64)
    return train_test_split(x, y, test_size=360, stratify=y, random_state=DIGITS_SEED)


def _im2col3(x):
    """3x3, stride 1, pad 1 patches: [N, C, H, W] -> [N, C*9, H*W]."""
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    return _patches(xp, 3, 3, 1, 1, h, w).reshape(n, c * 9, h * w)


def _col2im3(cols, shape):
    """Adjoint of _im2col3: scatters-adds [N, C*9, H*W] back to [N, C, H, W]."""
    n, c, h, w = shape
    cols = cols.reshape(n, c, 3, 3, h, w)
    xp = np.zeros((n, c, h + 2, w + 2), cols.dtype)
    for i in range(3):
        for j in range(3):
            xp[:, :, i:i + h, j:j + w] += cols[:, :, i, j]
    return xp[:, :, 1:-1, 1:-1]


def _conv_fwd(x, w, b):
    cols = _im2col3(x)
    n, _, h, wd = x.shape
    y = np.einsum("ok,nkp->nop", w.reshape(w.shape[0], -1), cols, optimize=True)
    return y.reshape(n, w.shape[0], h, wd) + b.reshape(1, -1, 1, 1), cols


def _conv_bwd(dy, cols, w, xshape):
    n, o = dy.shape[:2]
    dy2 = dy.reshape(n, o, -1)
    dw = np.einsum("nop,nkp->ok", dy2, cols, optimize=True).reshape(w.shape)
    db = dy2.sum(axis=(0, 2))
    dcols = np.einsum("ok,nop->nkp", w.reshape(o, -1), dy2, optimize=True)
    return _col2im3(dcols, xshape), dw, db


def _pool_fwd(x):
    """2x2/2 max pool; returns the output and the argmax of each window (first max wins)."""
    n, c, h, w = x.shape
    win = x.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(
        n, c, h // 2, w // 2, 4)
    idx = win.argmax(axis=-1)
    return np.take_along_axis(win, idx[..., None], -1)[..., 0], idx


def _pool_bwd(dy, idx, xshape):
    n, c, h, w = xshape
    dwin = np.zeros((n, c, h // 2, w // 2, 4), dy.dtype)
    np.put_along_axis(dwin, idx[..., None], dy[..., None], -1)
    return dwin.reshape(n, c, h // 2, w // 2, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(xshape)


def digits_forward(p, x, cache=None):
    """Conv(1->8,3x3,p1)-Relu-MaxPool2 -> Conv(8->16,3x3,p1)-Relu-MaxPool2 -> Flatten -> Gemm."""
    z1, c1 = _conv_fwd(x, p["w1"], p["b1"])
    a1 = np.maximum(z1, 0)
    p1, i1 = _pool_fwd(a1)
    z2, c2 = _conv_fwd(p1, p["w2"], p["b2"])
    a2 = np.maximum(z2, 0)
    p2, i2 = _pool_fwd(a2)
    f = p2.reshape(x.shape[0], -1)
    logits = f @ p["w3"].T + p["b3"]
    if cache is not None:
        cache.update(x=x, z1=z1, c1=c1, p1=p1, i1=i1, z2=z2, c2=c2, i2=i2, p2=p2, f=f)
    return logits


def digits_backward(p, cache, dlogits):
    g = {}
    g["w3"] = dlogits.T @ cache["f"]
    g["b3"] = dlogits.sum(axis=0)
    dp2 = (dlogits @ p["w3"]).reshape(cache["p2"].shape)
    dz2 = _pool_bwd(dp2, cache["i2"], cache["z2"].shape) * (cache["z2"] > 0)
    dp1, g["w2"], g["b2"] = _conv_bwd(dz2, cache["c2"], p["w2"], cache["p1"].shape)
    dz1 = _pool_bwd(dp1, cache["i1"], cache["z1"].shape) * (cache["z1"] > 0)
    _, g["w1"], g["b1"] = _conv_bwd(dz1, cache["c1"], p["w1"], cache["x"].shape)
    return g


def train_digits(x_tr, y_tr, epochs=30, batch=32, lr=3e-3, verbose=False):
    """Adam on softmax cross-entropy; all float32 numpy, fixed seed."""
    rng = np.random.default_rng(DIGITS_SEED)
    f32 = np.float32
    p = {"w1": he(rng, (8, 1, 3, 3)).astype(f32), "b1": np.zeros(8, f32),
         "w2": he(rng, (16, 8, 3, 3)).astype(f32), "b2": np.zeros(16, f32),
         "w3": (rng.standard_normal((10, 64)) / 8.0).astype(f32), "b3": np.zeros(10, f32)}
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v = {k: np.zeros_like(v) for k, v in p.items()}
    b1, b2, eps, step = 0.9, 0.999, 1e-8, 0
    n = len(x_tr)
    for ep in range(epochs):
        perm = rng.permutation(n)
        lr_ep = lr * (0.5 * (1 + np.cos(np.pi * ep / epochs)))   # cosine decay
        loss_sum = 0.0
        for s in range(0, n, batch):
            idx = perm[s:s + batch]
            cache = {}
            logits = digits_forward(p, x_tr[idx], cache)
            prob = np_softmax(logits, 1)
            loss_sum += -np.log(prob[np.arange(len(idx)), y_tr[idx]] + 1e-12).sum()
            dl = prob
            dl[np.arange(len(idx)), y_tr[idx]] -= 1
            grads = digits_backward(p, cache, (dl / len(idx)).astype(f32))
            step += 1
            for k in p:
                m[k] = b1 * m[k] + (1 - b1) * grads[k]
                v[k] = b2 * v[k] + (1 - b2) * grads[k] ** 2
                mh = m[k] / (1 - b1 ** step)
                vh = v[k] / (1 - b2 ** step)
                p[k] = (p[k] - lr_ep * mh / (np.sqrt(vh) + eps)).astype(f32)
        if verbose and (ep % 5 == 4 or ep == epochs - 1):
            acc = (digits_forward(p, x_tr).argmax(1) == y_tr).mean()
            print(f"  epoch {ep + 1:2d}: loss {loss_sum / n:.4f}  train acc {acc:.4f}")
    return p


def export_digits(p, path):
    f32 = np.float32
    inits = [numpy_helper.from_array(p[k].astype(f32), k) for k in
             ("w1", "b1", "w2", "b2", "w3", "b3")]
    nodes = [
        helper.make_node("Conv", ["image", "w1", "b1"], ["conv1"], name="conv1",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv1"], ["relu1"], name="relu1"),
        helper.make_node("MaxPool", ["relu1"], ["pool1"], name="pool1",
                         kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["pool1", "w2", "b2"], ["conv2"], name="conv2",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv2"], ["relu2"], name="relu2"),
        helper.make_node("MaxPool", ["relu2"], ["pool2"], name="pool2",
                         kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["pool2"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "w3", "b3"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probabilities"], name="softmax", axis=1),
        helper.make_node("ArgMax", ["logits"], ["digit"], name="argmax", axis=1, keepdims=0),
    ]
    graph = helper.make_graph(
        nodes, "digits_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 1, 8, 8])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 10]),
         helper.make_tensor_value_info("digit", TensorProto.INT64, ["N"])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="kiln-make_models")
    model.ir_version = 8
    model.doc_string = ("Digits CNN trained with numpy on scikit-learn load_digits; input: 8x8 "
                        "grayscale scaled to [0,1] (pixel/16). See models/digits/README.md.")
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)


def make_digits(out_dir, verbose=True):
    t0 = time.time()
    x_tr, x_te, y_tr, y_te = load_digits_split()
    p = train_digits(x_tr, y_tr, verbose=verbose)
    pred = digits_forward(p, x_te).argmax(1)
    acc = (pred == y_te).mean()
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "digits_cnn.onnx")
    export_digits(p, path)
    np.savez(os.path.join(out_dir, "test_images.npz"), image=x_te.astype(np.float32))
    np.save(os.path.join(out_dir, "test_labels.npy"), y_te.astype(np.int64))
    # The exported model must reproduce the numpy model.
    got = ort_run(path, {"image": x_te})
    if not np.array_equal(got["digit"], pred):
        raise RuntimeError("digits: ORT predictions differ from numpy predictions")
    ref_prob = np_softmax(digits_forward(p, x_te).astype(np.float64), 1)
    if not np.allclose(got["probabilities"], ref_prob, rtol=1e-4, atol=1e-5):
        raise RuntimeError("digits: ORT probabilities differ from numpy")
    if verbose:
        print(f"  digits: held-out accuracy {acc * 100:.2f}% ({int((pred == y_te).sum())}/"
              f"{len(y_te)}), {time.time() - t0:.1f} s, ORT agrees")
    return acc


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "build", "models"),
                    help="directory for the random-weight test models (default build/models)")
    ap.add_argument("--digits-dir", default=os.path.join(REPO, "models", "digits"))
    ap.add_argument("--skip-digits", action="store_true", help="do not retrain the digits CNN")
    ap.add_argument("--skip-tests", action="store_true", help="do not write the test models")
    ap.add_argument("--only", default="", help="comma-separated test model names")
    ap.add_argument("--batch", type=int, default=0,
                    help="also write <name>_b<N> variants at batch N (scripts/batch_variants.py)")
    args = ap.parse_args(argv)
    if not args.skip_digits:
        print(f"digits CNN -> {args.digits_dir}")
        make_digits(args.digits_dir)
    if not args.skip_tests:
        names = [n for n in args.only.split(",") if n] or list(TEST_MODELS)
        unknown = [n for n in names if n not in ALL_MODELS]
        if unknown:
            ap.error(f"unknown model(s) {unknown}; known: {sorted(ALL_MODELS)}")
        print(f"test models -> {args.out}")
        write_test_models(args.out, names, verbose=True)
        if args.batch:
            from batch_variants import write_batched
            for n in names:
                print(f"  {n} at batch {args.batch}: {write_batched(n, args.out, args.batch)[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
