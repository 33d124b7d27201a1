"""Einsum against ONNX Runtime: the matrix-product equations lower-einsum turns into MatMul
(attention's bhqd,bhkd->bhqk and bhqk,bhkd->bhqd, a plain ij,jk->ik, a transposed output, several
contraction and row labels), and ones it leaves to the generic kernel (a label summed out of one
input, a diagonal, an ellipsis). `kiln inspect` shows which form ran."""
import os
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kiln_helpers import assert_matches_ort, kiln_run_model, ort_outputs, run_kiln  # noqa: E402

CASES = [  # equation, shape A, shape B, lowered to MatMul
    ("bhqd,bhkd->bhqk", (2, 3, 5, 8), (2, 3, 7, 8), True),
    ("bhqk,bhkd->bhqd", (2, 3, 5, 7), (2, 3, 7, 8), True),
    ("ij,jk->ik", (6, 9), (9, 4), True),
    ("ij,jk->ki", (6, 9), (9, 4), True),
    ("bij,bjk->bik", (3, 6, 9), (3, 9, 4), True),
    ("abcd,cdef->abef", (2, 3, 4, 5), (4, 5, 6, 2), True),
    ("ik,jk->ij", (6, 9), (5, 9), True),
    ("ij,kj->i", (6, 9), (5, 9), False),   # k summed out of B alone
    ("ii,ij->ij", (4, 4), (4, 5), False),  # a diagonal
    ("...ij,...jk->...ik", (2, 6, 9), (2, 9, 4), False),
]


@pytest.mark.parametrize("eq,sa,sb,lowered", CASES, ids=[c[0] for c in CASES])
def test_einsum_matches_ort(tmp_path, eq, sa, sb, lowered):
    node = helper.make_node("Einsum", ["a", "b"], ["y"], equation=eq)
    g = helper.make_graph([node], "einsum", [helper.make_tensor_value_info("a", TensorProto.FLOAT, sa),
                                             helper.make_tensor_value_info("b", TensorProto.FLOAT, sb)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    rng = np.random.default_rng(7)
    feed = {"a": rng.standard_normal(sa).astype(np.float32), "b": rng.standard_normal(sb).astype(np.float32)}
    npz = str(tmp_path / "in.npz")
    np.savez(npz, **feed)
    got, _ = kiln_run_model(path, npz, str(tmp_path))
    assert_matches_ort(got, ort_outputs(path, feed), eq, rtol=1e-5, atol=1e-5)
    ir = run_kiln(["inspect", path]).stdout.split("// ----")[0]
    assert ("Einsum(" not in ir) == lowered, f"{eq}: expected {'MatMul' if lowered else 'Einsum'}:\n{ir}"
