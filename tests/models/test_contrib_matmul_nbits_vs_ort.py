"""MatMulNBits (com.microsoft, block-wise weight-only quantized MatMul), which Kiln imports by
dequantizing the constant weight (src/frontend/onnx/matmul_nbits.cc): models built with
onnx.helper from random quantized values packed in numpy, run by `kiln run` and compared with
ONNX Runtime and with a numpy dequantize-then-matmul written from ORT's schema text."""
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from kiln_helpers import assert_matches_ort, kiln_run_model, ort_outputs, run_kiln

MS = "com.microsoft"


def pack(values, bits):
    """Packs the last axis of `values` (ints < 2^bits) lowest bits first, as ORT's schema says."""
    per = 8 // bits
    v = values.reshape(*values.shape[:-1], -1, per).astype(np.uint8)
    out = np.zeros(v.shape[:-1], np.uint8)
    for j in range(per):
        out |= v[..., j] << (j * bits)
    return out


def quantized(rng, k, n, bits, block):
    """Random q (N, k_blocks * block), scales (N, k_blocks), packed zero points and their values."""
    k_blocks = -(-k // block)
    q = rng.integers(0, 2 ** bits, (n, k_blocks * block))
    scales = rng.uniform(0.01, 0.1, (n, k_blocks)).astype(np.float32)
    zp = rng.integers(0, 2 ** bits, (n, k_blocks))
    zp_cols = -(-k_blocks * bits // 8) * (8 // bits)  # whole bytes per row
    zp_padded = np.zeros((n, zp_cols), np.int64)
    zp_padded[:, :k_blocks] = zp
    return q, scales, zp, pack(zp_padded, bits)


def reference(a, q, scales, zp, k, block, g_idx=None, bias=None):
    blk = np.arange(k) // block if g_idx is None else g_idx
    w = (q[:, :k] - zp[:, blk]) * scales[:, blk]  # (N, K)
    y = a.astype(np.float64) @ w.T.astype(np.float64)
    return (y if bias is None else y + bias).astype(np.float32)


def build(k, n, bits, block, q, scales, zp_tensor, g_idx, bias, a_shape, zp_name="zp"):
    k_blocks = scales.shape[1]
    inits = [numpy_helper.from_array(pack(q, bits).reshape(n, k_blocks, block * bits // 8), "B"),
             numpy_helper.from_array(scales, "scales")]
    ins = ["A", "B", "scales", "", "", ""]
    if zp_tensor is not None:
        inits.append(numpy_helper.from_array(zp_tensor, zp_name))
        ins[3] = zp_name
    if g_idx is not None:
        inits.append(numpy_helper.from_array(g_idx.astype(np.int32), "g_idx"))
        ins[4] = "g_idx"
    if bias is not None:
        inits.append(numpy_helper.from_array(bias, "bias"))
        ins[5] = "bias"
    while ins[-1] == "":
        ins.pop()
    node = helper.make_node("MatMulNBits", ins, ["Y"], domain=MS, K=k, N=n, bits=bits, block_size=block)
    graph = helper.make_graph([node], "nbits", [helper.make_tensor_value_info("A", TensorProto.FLOAT, a_shape)],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], initializer=inits)
    return helper.make_model(graph, ir_version=8, opset_imports=[helper.make_opsetid("", 17),
                                                                 helper.make_opsetid(MS, 1)])


def run(tmp_path, model, a):
    path = str(tmp_path / "nbits.onnx")
    onnx.save(model, path)
    npz = str(tmp_path / "in.npz")
    np.savez(npz, A=a)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    return path, kiln_run_model(path, npz, str(out))[0]["Y"]


@pytest.mark.parametrize("bits,k,n,block,zp_form,with_bias", [
    (4, 64, 24, 32, "packed", False),   # the common LLM form
    (4, 40, 8, 16, None, True),         # K not a multiple of the block; default zero point 8
    (8, 64, 16, 16, "packed", True),
    (2, 48, 8, 16, "packed", False),
    (4, 64, 8, 32, "float", False),     # zero points in A's type
])
def test_matmul_nbits(tmp_path, bits, k, n, block, zp_form, with_bias):
    rng = np.random.default_rng(bits * 100 + k)
    q, scales, zp, zp_packed = quantized(rng, k, n, bits, block)
    zp_tensor = {"packed": zp_packed, "float": zp.astype(np.float32), None: None}[zp_form]
    zp_used = zp if zp_form else np.full_like(zp, 2 ** (bits - 1))
    bias = rng.standard_normal(n).astype(np.float32) if with_bias else None
    a = rng.standard_normal((2, 3, k)).astype(np.float32)
    path, got = run(tmp_path, build(k, n, bits, block, q, scales, zp_tensor, None, bias, (2, 3, k)), a)
    want_np = reference(a, q, scales, zp_used, k, block, bias=bias)
    np.testing.assert_allclose(got, want_np, rtol=1e-4, atol=1e-4, err_msg="Kiln vs numpy")
    assert_matches_ort({"Y": got}, ort_outputs(path, {"A": a}), f"MatMulNBits bits={bits}", rtol=1e-4, atol=1e-4)


def test_matmul_nbits_g_idx(tmp_path):
    """g_idx (act-order): each k's scale and zero point come from block g_idx[k]."""
    rng = np.random.default_rng(7)
    k, n, bits, block = 64, 8, 4, 16
    q, scales, zp, zp_packed = quantized(rng, k, n, bits, block)
    g_idx = rng.permutation(np.arange(k) // block)
    a = rng.standard_normal((3, k)).astype(np.float32)
    _, got = run(tmp_path, build(k, n, bits, block, q, scales, zp_packed, g_idx, None, (3, k)), a)
    np.testing.assert_allclose(got, reference(a, q, scales, zp, k, block, g_idx=g_idx), rtol=1e-4, atol=1e-4)


def test_matmul_nbits_bad_size_is_a_clean_error(tmp_path):
    rng = np.random.default_rng(8)
    q, scales, _, _ = quantized(rng, 64, 8, 4, 32)
    model = build(64, 8, 4, 32, q, scales, None, None, None, (1, 64))
    model.graph.node[0].attribute[1].i = 9  # N=9: B holds 8 rows
    path = str(tmp_path / "bad.onnx")
    onnx.save(model, path)
    np.savez(str(tmp_path / "in.npz"), A=np.zeros((1, 64), np.float32))
    proc = run_kiln(["run", path, "--inputs", str(tmp_path / "in.npz"), "--output-dir", str(tmp_path)])
    assert proc.returncode != 0 and "MatMulNBits" in proc.stderr and "B must be uint8" in proc.stderr, proc.stderr
