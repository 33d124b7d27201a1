"""The linear classifier the training API tests train (logits = x W^T + b, softmax
cross-entropy) and numpy's closed-form reference for it: d loss / d logits = (softmax -
onehot) / N, so dW = d^T x and db = the column sums of d."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save_linear_model(path, w, b):
    """Writes Gemm(x [N, in], W [out, in], b [out], transB=1) -> logits [N, out] to `path`."""
    out, inp = w.shape
    g = helper.make_graph(
        [helper.make_node("Gemm", ["x", "W", "b"], ["logits"], transB=1)], "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", inp])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", out])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def np_loss_grads(w, b, x, y):
    """(mean loss, dW, db) in float64."""
    logits = x.astype(np.float64) @ w.T + b
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    loss = -np.log(p[np.arange(len(y)), y]).mean()
    d = p.copy()
    d[np.arange(len(y)), y] -= 1
    d /= len(y)
    return loss, d.T @ x, d.sum(0)
