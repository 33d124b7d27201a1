"""EagerGraph: an onnx.helper graph builder that evaluates every node in float64 numpy as it is
added, and the numpy reference ops it evaluates with (NCHW). The eager values are the test
models' independent reference (checked against ONNX Runtime before a model is written: ort_run)
and their activation statistics (BatchNormalization's running mean and variance).
scripts/make_models.py builds the models with it."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

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


def ort_run(path_or_bytes, feed, threads=1):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path_or_bytes, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feed)))
