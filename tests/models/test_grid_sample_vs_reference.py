"""GridSample from per-tap tables (op/defs/grid_sample.cc: each tap combination's flat offset and
weight computed once per grid position, read per channel), against ONNX's reference evaluator
(onnx.reference, independent of Kiln and of ONNX Runtime, whose linear coordinates round
differently in places).

Every mode (linear, nearest, cubic) with every padding (zeros, border, reflection), both
align_corners, on grids that reach far outside X (+-1e6: the tables clamp a coordinate a few
cells past the axis before the int32 cast) and land exactly on borders; X holds an infinity so
that a tap outside X must contribute exactly 0 under zeros padding, never inf * 0. Also a 3-D
(volumetric) case and a batch of 2. One model holds every case (one compile, one `kiln run`)."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kiln_helpers import kiln_run_model  # noqa: E402

MODES = ["linear", "nearest", "cubic"]
PADS = ["zeros", "border", "reflection"]


def _grid(rng, shape):
    g = rng.uniform(-1.6, 1.6, shape).astype(np.float32)
    flat = g.reshape(-1)
    special = np.array([1e6, -1e6, 1.0, -1.0, 0.0, 3.5, -2.25, 1.0 + 1e-7], np.float32)
    flat[: len(special)] = special
    flat[-len(special):] = special[::-1]
    return g


def _model(path, cases):
    nodes, inputs, outputs = [], [], []
    for name, x_shape, g_shape, attrs in cases:
        nodes.append(helper.make_node("GridSample", [f"{name}_x", f"{name}_g"], [f"{name}_y"], **attrs))
        inputs += [helper.make_tensor_value_info(f"{name}_x", TensorProto.FLOAT, x_shape),
                   helper.make_tensor_value_info(f"{name}_g", TensorProto.FLOAT, g_shape)]
        outputs.append(helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, "grid_sample_cases", inputs, outputs)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)]), path)


def test_grid_sample_matches_onnx_reference(tmp_path):
    rng = np.random.default_rng(0)
    cases = []
    for mode in MODES:
        for pad in PADS:
            for align in (0, 1):
                name = f"{mode}_{pad}_{align}"
                cases.append((name, [1, 3, 7, 9], [1, 5, 11, 2],
                              {"mode": mode, "padding_mode": pad, "align_corners": align}))
    cases.append(("linear_3d_zeros", [1, 2, 4, 5, 6], [1, 3, 4, 5, 3], {"mode": "linear", "padding_mode": "zeros"}))
    cases.append(("cubic_batch2_border", [2, 4, 6, 8], [2, 6, 7, 2], {"mode": "cubic", "padding_mode": "border"}))
    feed = {}
    for name, x_shape, g_shape, _ in cases:
        x = rng.standard_normal(x_shape).astype(np.float32)
        x.reshape(-1)[0] = np.inf  # the corner a clamped outside tap would read
        feed[f"{name}_x"] = x
        feed[f"{name}_g"] = _grid(rng, g_shape)
    model = str(tmp_path / "grid_sample.onnx")
    _model(model, cases)
    inputs = str(tmp_path / "in.npz")
    np.savez(inputs, **feed)
    ref = ReferenceEvaluator(model)
    want = dict(zip([o.name for o in onnx.load(model).graph.output], ref.run(None, feed)))
    for threads in (1, 2):
        out_dir = tmp_path / f"out{threads}"
        out_dir.mkdir()
        got, _ = kiln_run_model(model, inputs, str(out_dir), extra=["--threads", str(threads)])
        for name, *_ in cases:
            np.testing.assert_allclose(got[f"{name}_y"], want[f"{name}_y"], rtol=1e-5, atol=1e-5,
                                       err_msg=f"{name} at {threads} threads")
