"""Host-kernel ops with data-dependent output shapes (NonZero, Unique, NonMaxSuppression) and the
ai.onnx.ml ops (ArrayFeatureExtractor, Binarizer, TreeEnsemble), each as a one-node model on
random inputs, run through `kiln run` (the graph interpreter) and compared with the ONNX
reference implementation (onnx.reference.ReferenceEvaluator) on the same inputs.

Cases avoid the reference's known departures from the spec: Unique with sorted=0 and an axis
other than 0 (it re-gathers along axis 0), TreeEnsemble post transforms (it ignores them) and
BRANCH_MEMBER sets holding 0.0 (its set parser stops at a falsy value)."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from kiln_helpers import kiln_run_model

OPSET = 21
ML_OPSET = 5


def info(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def one_node_model(node, inputs, outputs, ml=False):
    graph = helper.make_graph([node], "host_op", inputs, outputs)
    opsets = [helper.make_opsetid("", OPSET)]
    if ml:
        opsets.append(helper.make_opsetid("ai.onnx.ml", ML_OPSET))
    return helper.make_model(graph, opset_imports=opsets)


def run_both(tmp_path, model, feed):
    path = str(tmp_path / "model.onnx")
    onnx.save(model, path)
    npz = str(tmp_path / "inputs.npz")
    np.savez(npz, **feed)
    out_dir = tmp_path / "out"
    out_dir.mkdir(exist_ok=True)
    got, _ = kiln_run_model(path, npz, str(out_dir), extra=["--repeat", "1"])
    names = [o.name for o in model.graph.output]
    want = ReferenceEvaluator(model).run(None, feed)
    return [got[n] for n in names], want


def assert_same(got, want, what, rtol=1e-5, atol=1e-6):
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.dtype == w.dtype, f"{what}: dtype {g.dtype} vs reference {w.dtype}"
        assert g.shape == w.shape, f"{what}: shape {g.shape} vs reference {w.shape}"
        if g.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=what)
        else:
            np.testing.assert_array_equal(g, w, err_msg=what)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_nonzero(tmp_path, dtype):
    rng = np.random.default_rng(1)
    x = (rng.integers(0, 3, (3, 4, 5)) * (rng.random((3, 4, 5)) > 0.5)).astype(dtype)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    model = one_node_model(helper.make_node("NonZero", ["x"], ["y"]), [info("x", elem, [3, 4, 5])],
                           [info("y", TensorProto.INT64, [3, None])])
    got, want = run_both(tmp_path, model, {"x": x})
    assert_same(got, want, f"NonZero {dtype}")


UNIQUE_CASES = {
    "ints_sorted": (np.int64, (30,), None, 1),
    "ints_first_occurrence": (np.int64, (30,), None, 0),
    "floats_flattened": (np.float32, (4, 6), None, 1),
    "rows_axis0": (np.float32, (12, 3), 0, 1),
    "rows_axis0_unsorted": (np.int32, (12, 3), 0, 0),
    "cols_axis1": (np.float64, (3, 10), 1, 1),
    "axis_minus1_3d": (np.int64, (2, 3, 8), -1, 1),
}


@pytest.mark.parametrize("case", list(UNIQUE_CASES))
def test_unique(tmp_path, case):
    dtype, shape, axis, sorted_ = UNIQUE_CASES[case]
    rng = np.random.default_rng(2)
    x = rng.integers(-2, 2, shape).astype(dtype)
    if axis is not None:  # few distinct slices: repeat some
        x = np.take(x, rng.integers(0, 3, x.shape[axis]), axis=axis)
    attrs = {"sorted": sorted_}
    if axis is not None:
        attrs["axis"] = axis
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    node = helper.make_node("Unique", ["x"], ["y", "indices", "inverse", "counts"], **attrs)
    i64 = TensorProto.INT64
    model = one_node_model(node, [info("x", elem, list(shape))],
                           [info("y", elem, None), info("indices", i64, [None]),
                            info("inverse", i64, [None]), info("counts", i64, [None])])
    got, want = run_both(tmp_path, model, {"x": x})
    assert_same(got, want, f"Unique {case}")


@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize("with_score_threshold", [False, True])
def test_non_max_suppression(tmp_path, center, with_score_threshold):
    rng = np.random.default_rng(3 + center)
    b, c, n = 2, 3, 24
    lo = rng.uniform(0, 10, (b, n, 2))
    size = rng.uniform(0.5, 4, (b, n, 2))
    if center:
        boxes = np.concatenate([lo, size], axis=2)
    else:
        corners = np.concatenate([lo, lo + size], axis=2)
        flip = rng.random((b, n)) > 0.5  # some boxes given with swapped corners
        corners[flip] = corners[flip][:, [2, 3, 0, 1]]
        boxes = corners
    feed = {"boxes": boxes.astype(np.float32),
            "scores": rng.random((b, c, n)).astype(np.float32),
            "max_out": np.array([5], np.int64),
            "iou": np.array([0.3], np.float32)}
    ins = ["boxes", "scores", "max_out", "iou"]
    infos = [info("boxes", TensorProto.FLOAT, [b, n, 4]), info("scores", TensorProto.FLOAT, [b, c, n]),
             info("max_out", TensorProto.INT64, [1]), info("iou", TensorProto.FLOAT, [1])]
    if with_score_threshold:
        feed["score_thr"] = np.array([0.4], np.float32)
        ins.append("score_thr")
        infos.append(info("score_thr", TensorProto.FLOAT, [1]))
    node = helper.make_node("NonMaxSuppression", ins, ["selected"], center_point_box=center)
    model = one_node_model(node, infos, [info("selected", TensorProto.INT64, [None, 3])])
    got, want = run_both(tmp_path, model, feed)
    assert_same(got, want, f"NonMaxSuppression center={center} score_threshold={with_score_threshold}")


@pytest.mark.parametrize("x_shape,indices", [((3, 5), [4, 0, 2]), ((2, 3, 4), [[1, 3]]), ((6,), [5, 1])])
def test_array_feature_extractor(tmp_path, x_shape, indices):
    rng = np.random.default_rng(4)
    x = rng.standard_normal(x_shape).astype(np.float32)
    idx = np.array(indices, np.int64)
    node = helper.make_node("ArrayFeatureExtractor", ["x", "idx"], ["z"], domain="ai.onnx.ml")
    model = one_node_model(node, [info("x", TensorProto.FLOAT, list(x_shape)),
                                  info("idx", TensorProto.INT64, list(idx.shape))],
                           [info("z", TensorProto.FLOAT, None)], ml=True)
    got, want = run_both(tmp_path, model, {"x": x, "idx": idx})
    assert_same(got, want, f"ArrayFeatureExtractor {x_shape}")


def test_binarizer(tmp_path):
    x = np.random.default_rng(5).standard_normal((4, 5)).astype(np.float32)
    node = helper.make_node("Binarizer", ["x"], ["y"], domain="ai.onnx.ml", threshold=0.3)
    model = one_node_model(node, [info("x", TensorProto.FLOAT, [4, 5])], [info("y", TensorProto.FLOAT, [4, 5])],
                           ml=True)
    got, want = run_both(tmp_path, model, {"x": x})
    assert_same(got, want, "Binarizer")


def random_ensemble(rng, num_trees, depth, num_features, n_targets, with_members):
    """Complete binary trees of the given depth: random features, modes (LEQ..NEQ, and
    BRANCH_MEMBER on some nodes when with_members) and splits; random leaf weights/targets."""
    nodes = {k: [] for k in ("splits", "features", "modes", "true_ids", "false_ids", "true_leaf", "false_leaf")}
    leaf_w, leaf_t, roots, members = [], [], [], []

    def add_leaf():
        leaf_w.append(float(rng.standard_normal()))
        leaf_t.append(int(rng.integers(0, n_targets)))
        return len(leaf_w) - 1

    def add_node(level):
        i = len(nodes["splits"])
        for k in nodes:
            nodes[k].append(0)
        mode = int(rng.integers(0, 7 if with_members else 6))
        nodes["modes"][i] = mode
        nodes["features"][i] = int(rng.integers(0, num_features))
        # Features take values in {1, ..., 6}: EQ/NEQ/MEMBER tests hit both branches.
        nodes["splits"][i] = float(rng.integers(1, 7)) + (0.5 if mode < 4 else 0.0)
        if mode == 6:
            members.extend([float(v) for v in rng.choice(np.arange(1, 7), 3, replace=False)] + [np.nan])
        for side in ("true", "false"):
            if level + 1 == depth:
                nodes[f"{side}_leaf"][i] = 1
                nodes[f"{side}_ids"][i] = add_leaf()
            else:
                nodes[f"{side}_ids"][i] = add_node(level + 1)
        return i

    for _ in range(num_trees):
        roots.append(add_node(0))
    attrs = dict(
        nodes_splits=numpy_helper.from_array(np.array(nodes["splits"], np.float64), "nodes_splits"),
        nodes_featureids=nodes["features"],
        nodes_modes=numpy_helper.from_array(np.array(nodes["modes"], np.uint8), "nodes_modes"),
        nodes_truenodeids=nodes["true_ids"], nodes_falsenodeids=nodes["false_ids"],
        nodes_trueleafs=nodes["true_leaf"], nodes_falseleafs=nodes["false_leaf"],
        leaf_weights=numpy_helper.from_array(np.array(leaf_w, np.float32), "leaf_weights"),
        leaf_targetids=leaf_t, tree_roots=roots, n_targets=n_targets)
    if members:
        attrs["membership_values"] = numpy_helper.from_array(np.array(members, np.float32), "membership_values")
    return attrs


@pytest.mark.parametrize("aggregate", [0, 1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tree_ensemble(tmp_path, aggregate, dtype):
    rng = np.random.default_rng(10 + aggregate)
    attrs = random_ensemble(rng, num_trees=5, depth=3, num_features=4, n_targets=3, with_members=aggregate != 2)
    node = helper.make_node("TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml", aggregate_function=aggregate,
                            post_transform=0, **attrs)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    model = one_node_model(node, [info("x", elem, [16, 4])], [info("y", elem, [16, 3])], ml=True)
    x = rng.integers(1, 7, (16, 4)).astype(dtype)
    x[rng.random((16, 4)) > 0.7] += 0.5  # some values between the integer splits
    got, want = run_both(tmp_path, model, {"x": x})
    assert_same(got, want, f"TreeEnsemble aggregate={aggregate} {np.dtype(dtype)}", rtol=1e-5, atol=1e-5)
