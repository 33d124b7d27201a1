"""Transposes that move the contiguous axis, against numpy, exactly: the 16 x 16 tiles the C
emitter prints as one shuffle network (codegen/transpose_tiles.h; a dim of 28 tiles its first 16
and leaves the rest to loops) and the ones it leaves as loops (two dims of 37 and 40, a last axis
that stays). Single Transposes, and the attention's head split (a Reshape joins the Transpose in
one kernel, which then takes the Transpose's schedule) and merge (the Transpose stays a kernel of
its own, pass/fuse_operators.cc). Tiled ones must show the tile helper
in `kiln inspect`; float32 and int32 (the tile moves 4-byte words), NaNs kept bit for bit; at
1 and 2 threads."""
import os
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kiln_helpers import kiln_run_model, run_kiln  # noqa: E402

# name -> (input shape, reshape before (or None), perm, reshape after (or None), tiled)
CASES = {
    "batched_2d": ([4, 96, 64], None, [0, 2, 1], None, True),
    "scores_transposed": ([2, 3, 128, 128], None, [0, 1, 3, 2], None, True),
    "heads_split_keys": ([256, 192], [2, 128, 3, 64], [0, 2, 3, 1], None, True),
    "heads_merge_from_keys": ([2, 3, 64, 128], None, [0, 3, 1, 2], [256, 192], True),
    "heads_split_values": ([256, 192], [2, 128, 3, 64], [0, 2, 1, 3], None, False),
    "ragged_tiles": ([3, 40, 37], None, [0, 2, 1], None, False),
    "nchw_to_nhwc": ([1, 64, 28, 28], None, [0, 2, 3, 1], None, True),
    "nhwc_to_nchw": ([1, 28, 32, 48], None, [0, 3, 1, 2], None, True),
}
DTYPES = {"f32": (TensorProto.FLOAT, np.float32), "i32": (TensorProto.INT32, np.int32)}


def _model(path, shape, before, perm, after, onnx_type):
    nodes, inits, src = [], [], "x"
    if before:
        inits.append(numpy_helper.from_array(np.array(before, np.int64), "before"))
        nodes.append(helper.make_node("Reshape", ["x", "before"], ["r"]))
        src = "r"
    nodes.append(helper.make_node("Transpose", [src], ["t" if after else "y"], perm=perm))
    if after:
        inits.append(numpy_helper.from_array(np.array(after, np.int64), "after"))
        nodes.append(helper.make_node("Reshape", ["t", "after"], ["y"]))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx_type, shape)],
                          [helper.make_tensor_value_info("y", onnx_type, None)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(CASES))
def test_transpose_matches_numpy(tmp_path, name, dtype):
    shape, before, perm, after, tiled = CASES[name]
    onnx_type, np_type = DTYPES[dtype]
    rng = np.random.default_rng(sum(map(ord, name + dtype)))
    if np_type == np.float32:
        x = rng.standard_normal(shape).astype(np.float32)
        x.reshape(-1)[::97] = np.nan
    else:
        x = rng.integers(-2**31, 2**31 - 1, size=shape, dtype=np.int64).astype(np.int32)
    want = np.transpose(x.reshape(before) if before else x, perm)
    if after:
        want = want.reshape(after)
    path = str(tmp_path / "m.onnx")
    _model(path, shape, before, perm, after, onnx_type)
    np.savez(tmp_path / "in.npz", x=x)
    source = run_kiln(["inspect", path]).stdout
    assert ("kiln_transpose_16x16_4b(&" in source) == tiled, source[-3000:]
    for threads in ("1", "2"):
        outs, _ = kiln_run_model(path, str(tmp_path / "in.npz"), str(tmp_path / f"t{threads}"),
                                 extra=["--threads", threads])
        got = next(iter(outs.values()))
        assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype)
        assert np.array_equal(got.view(np.uint32), np.ascontiguousarray(want).view(np.uint32)), f"{name} {dtype} x{threads}"
