"""The digits CNN shipped in models/digits/: trained here in plain numpy (hand-written forward
and backward passes, Adam) on scikit-learn's 8x8 `load_digits`, exported to ONNX and checked
against ONNX Runtime (scripts/make_models.py runs it)."""
from __future__ import annotations

import os
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from eager_graph import OPSET, _patches, np_softmax, ort_run
from model_builders import he

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
