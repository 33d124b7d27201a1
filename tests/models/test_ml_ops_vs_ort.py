"""The classic ai.onnx.ml ops scikit-learn converters emit (TreeEnsembleRegressor/Classifier,
LinearRegressor/Classifier, Scaler, Normalizer, Imputer, CategoryMapper), as one-node and small
multi-node models on random inputs, run through `kiln run` (the graph interpreter's host kernels)
and compared with ONNX Runtime on the same inputs.

The tree ensembles are random: several trees of depth 3-4 with random features, thresholds and
modes (BRANCH_LEQ/LT/GTE/GT/EQ/NEQ), shuffled node ids, NaN inputs with random
missing-value flags. Inputs are multiples of 0.25 so thresholds are hit exactly (LEQ vs LT,
EQ/NEQ matter). PROBIT is left out of the random cases (it needs scores in [0, 1]; ONNX Runtime's
binary PROBIT output is malformed). ZipMap / DictVectorizer (maps are not a Kiln type) must be a
clean error."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from kiln_helpers import assert_matches_ort, kiln_run_model, ort_outputs, run_kiln

MODES = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]
N, F = 40, 5


def random_x(rng, n=N, f=F, nan=True):
    x = (rng.integers(-8, 9, (n, f)) * 0.25).astype(np.float32)
    if nan:
        x[rng.random((n, f)) < 0.05] = np.nan
    return x


def random_trees(rng, n_trees, n_out, prefix, f=F):
    """nodes_* and <prefix>_* attributes of n_trees random trees; leaves weigh random outputs."""
    a = {k: [] for k in ["nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes",
                         "nodes_values", "nodes_truenodeids", "nodes_falsenodeids",
                         "nodes_missing_value_tracks_true"]}
    w = {k: [] for k in [prefix + "_treeids", prefix + "_nodeids", prefix + "_ids",
                         prefix + "_weights"]}
    for t in range(n_trees):
        depth = int(rng.integers(3, 5))
        rows = []  # (slot, is_leaf, depth); children appended later

        def grow(d):
            slot = len(rows)
            leaf = d == depth or (d >= 2 and rng.random() < 0.2)
            rows.append({"leaf": leaf})
            if not leaf:
                rows[slot]["true"] = grow(d + 1)
                rows[slot]["false"] = grow(d + 1)
            return slot

        grow(0)
        ids = rng.permutation(len(rows)) + 3 * t  # shuffled, tree-local node ids
        for slot, r in enumerate(rows):
            a["nodes_treeids"].append(t)
            a["nodes_nodeids"].append(int(ids[slot]))
            if r["leaf"]:
                a["nodes_featureids"].append(0)
                a["nodes_modes"].append("LEAF")
                a["nodes_values"].append(0.0)
                a["nodes_truenodeids"].append(0)
                a["nodes_falsenodeids"].append(0)
                a["nodes_missing_value_tracks_true"].append(0)
                k = int(rng.integers(1, n_out + 1))
                for out in sorted(rng.choice(n_out, k, replace=False)):
                    w[prefix + "_treeids"].append(t)
                    w[prefix + "_nodeids"].append(int(ids[slot]))
                    w[prefix + "_ids"].append(int(out))
                    w[prefix + "_weights"].append(float(np.float32(rng.normal())))
            else:
                a["nodes_featureids"].append(int(rng.integers(0, f)))
                a["nodes_modes"].append(MODES[int(rng.integers(0, len(MODES)))])
                a["nodes_values"].append(float(rng.integers(-6, 7) * 0.25))
                a["nodes_truenodeids"].append(int(ids[r["true"]]))
                a["nodes_falsenodeids"].append(int(ids[r["false"]]))
                a["nodes_missing_value_tracks_true"].append(int(rng.integers(0, 2)))
    a.update(w)
    return a


def ml_model(nodes, inputs, outputs, ml_opset=3):
    graph = helper.make_graph(nodes, "ml", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid("ai.onnx.ml", ml_opset)])


def run_and_compare(tmp_path, model, feed, label):
    path = str(tmp_path / "model.onnx")
    onnx.save(model, path)
    npz = str(tmp_path / "inputs.npz")
    np.savez(npz, **feed)
    out_dir = tmp_path / "out"
    out_dir.mkdir(exist_ok=True)
    got, _ = kiln_run_model(path, npz, str(out_dir))
    want = ort_outputs(path, feed)
    strings = {k: v for k, v in want.items() if v.dtype == object}
    numeric = {k: v for k, v in want.items() if v.dtype != object}
    assert_matches_ort(got, numeric, label)
    for k, v in strings.items():  # string outputs: every one must be there and equal
        assert k in got, f"{label}: Kiln wrote no output '{k}' (has {sorted(got)})"
        assert got[k].astype(str).tolist() == v.astype(str).tolist(), f"{label}/{k}"
    return got, want


def info(name, elem, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


X_INFO = info("X", TensorProto.FLOAT, [None, F])


@pytest.mark.parametrize("seed,n_targets,agg,post,base,ml_opset", [
    (0, 1, "SUM", "NONE", True, 1),
    (1, 3, "SUM", "NONE", True, 3),
    (2, 3, "AVERAGE", "LOGISTIC", False, 3),
    (3, 3, "MIN", "NONE", True, 1),
    (4, 3, "MAX", "SOFTMAX", False, 3),
    (5, 2, "SUM", "SOFTMAX_ZERO", False, 3),
    (6, 1, "AVERAGE", "LOGISTIC", True, 3),
])
def test_tree_ensemble_regressor(tmp_path, seed, n_targets, agg, post, base, ml_opset):
    rng = np.random.default_rng(seed)
    attrs = random_trees(rng, int(rng.integers(3, 7)), n_targets, "target")
    attrs.update(n_targets=n_targets, aggregate_function=agg, post_transform=post)
    if base:
        attrs["base_values"] = [float(v) for v in rng.normal(size=n_targets).astype(np.float32)]
    node = helper.make_node("TreeEnsembleRegressor", ["X"], ["Y"], domain="ai.onnx.ml", **attrs)
    model = ml_model([node], [X_INFO], [info("Y", TensorProto.FLOAT, [None, n_targets])],
                     ml_opset)
    run_and_compare(tmp_path, model, {"X": random_x(rng)}, f"regressor seed {seed}")


def classifier_node(rng, n_classes, post, base, strings=False, binary=False, inp="X"):
    attrs = random_trees(rng, int(rng.integers(3, 7)), 1 if binary else n_classes, "class")
    if strings:
        attrs["classlabels_strings"] = [f"c{i}" for i in range(n_classes)]
    else:
        attrs["classlabels_int64s"] = list(range(n_classes)) if n_classes == 2 else \
            [int(v) for v in rng.choice(100, n_classes, replace=False)]
    attrs["post_transform"] = post
    if base:
        nb = 1 if binary else n_classes
        attrs["base_values"] = [float(v) for v in rng.normal(size=nb).astype(np.float32)]
    return helper.make_node("TreeEnsembleClassifier", [inp], ["Y", "Z"], domain="ai.onnx.ml",
                            **attrs)


@pytest.mark.parametrize("seed,n_classes,post,base,strings,binary", [
    (10, 3, "NONE", False, False, False),
    (11, 4, "SOFTMAX", True, False, False),
    (12, 3, "LOGISTIC", True, True, False),
    (13, 2, "NONE", False, False, False),      # both class ids weighted (random-forest like)
    (14, 2, "LOGISTIC", True, False, True),    # one weighted class, one base (boosting like)
    (15, 2, "NONE", False, False, True),
    (16, 2, "LOGISTIC", False, True, True),
])
def test_tree_ensemble_classifier(tmp_path, seed, n_classes, post, base, strings, binary):
    rng = np.random.default_rng(seed)
    node = classifier_node(rng, n_classes, post, base, strings, binary)
    y_type = TensorProto.STRING if strings else TensorProto.INT64
    model = ml_model([node], [X_INFO], [info("Y", y_type, [None]),
                                        info("Z", TensorProto.FLOAT, [None, n_classes])])
    run_and_compare(tmp_path, model, {"X": random_x(rng)}, f"classifier seed {seed}")


def test_binary_classifier_all_positive_weights(tmp_path):
    rng = np.random.default_rng(17)
    node = classifier_node(rng, 2, "NONE", False, binary=True)
    for a in node.attribute:
        if a.name == "class_weights":
            a.floats[:] = [abs(v) for v in a.floats]
    model = ml_model([node], [X_INFO], [info("Y", TensorProto.INT64, [None]),
                                        info("Z", TensorProto.FLOAT, [None, 2])])
    run_and_compare(tmp_path, model, {"X": random_x(rng)}, "binary all positive")


def test_scaler_then_tree_classifier(tmp_path):
    rng = np.random.default_rng(20)
    scaler = helper.make_node("Scaler", ["X"], ["S"], domain="ai.onnx.ml",
                              offset=[0.25, -0.5, 0.0, 0.5, 1.0], scale=[2.0, 1.0, 0.5, 4.0, 1.0])
    clf = classifier_node(rng, 3, "SOFTMAX", True, inp="S")
    model = ml_model([scaler, clf], [X_INFO], [info("Y", TensorProto.INT64, [None]),
                                                info("Z", TensorProto.FLOAT, [None, 3])])
    run_and_compare(tmp_path, model, {"X": random_x(rng)}, "scaler -> classifier")


def test_imputer_normalizer_linear_classifier(tmp_path):
    rng = np.random.default_rng(21)
    e = 4
    nodes = [
        helper.make_node("Imputer", ["X"], ["I"], domain="ai.onnx.ml",
                         imputed_value_floats=[float(v) for v in rng.normal(size=F)],
                         replaced_value_float=float("nan")),
        helper.make_node("Normalizer", ["I"], ["N"], domain="ai.onnx.ml", norm="L2"),
        helper.make_node("LinearClassifier", ["N"], ["Y", "Z"], domain="ai.onnx.ml",
                         coefficients=[float(v) for v in rng.normal(size=e * F)],
                         intercepts=[float(v) for v in rng.normal(size=e)],
                         classlabels_ints=[5, 6, 7, 8], post_transform="SOFTMAX"),
    ]
    model = ml_model(nodes, [X_INFO], [info("Y", TensorProto.INT64, [None]),
                                       info("Z", TensorProto.FLOAT, [None, e])], 1)
    run_and_compare(tmp_path, model, {"X": random_x(rng)}, "imputer -> normalizer -> linear")


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC"])
def test_linear_classifier_binary(tmp_path, post):
    rng = np.random.default_rng(22)
    node = helper.make_node("LinearClassifier", ["X"], ["Y", "Z"], domain="ai.onnx.ml",
                            coefficients=[float(v) for v in rng.normal(size=F)],
                            intercepts=[0.1], classlabels_ints=[0, 1], post_transform=post)
    model = ml_model([node], [X_INFO], [info("Y", TensorProto.INT64, [None]),
                                        info("Z", TensorProto.FLOAT, [None, 2])], 1)
    run_and_compare(tmp_path, model, {"X": random_x(rng, nan=False)}, f"linear binary {post}")


@pytest.mark.parametrize("targets,post", [(1, "NONE"), (3, "NONE"), (3, "SOFTMAX"),
                                          (2, "LOGISTIC")])
def test_linear_regressor(tmp_path, targets, post):
    rng = np.random.default_rng(23 + targets)
    node = helper.make_node("LinearRegressor", ["X"], ["Y"], domain="ai.onnx.ml",
                            coefficients=[float(v) for v in rng.normal(size=targets * F)],
                            intercepts=[float(v) for v in rng.normal(size=targets)],
                            targets=targets, post_transform=post)
    model = ml_model([node], [X_INFO], [info("Y", TensorProto.FLOAT, [None, targets])], 1)
    run_and_compare(tmp_path, model, {"X": random_x(rng, nan=False)}, f"linear {targets}")


@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
def test_normalizer(tmp_path, norm):
    rng = np.random.default_rng(30)
    node = helper.make_node("Normalizer", ["X"], ["Y"], domain="ai.onnx.ml", norm=norm)
    model = ml_model([node], [X_INFO], [info("Y", TensorProto.FLOAT, [None, F])], 1)
    x = random_x(rng, nan=False)
    x[x == 0] = 0.5  # a zero row's norm: ONNX Runtime and Kiln agree only on nonzero norms
    run_and_compare(tmp_path, model, {"X": x}, f"normalizer {norm}")


def test_imputer_int64_and_scaler_broadcast(tmp_path):
    rng = np.random.default_rng(31)
    nodes = [
        helper.make_node("Imputer", ["X"], ["I"], domain="ai.onnx.ml",
                         imputed_value_int64s=[9], replaced_value_int64=2),
        helper.make_node("Scaler", ["I"], ["Y"], domain="ai.onnx.ml", offset=[1.5], scale=[0.5]),
    ]
    model = ml_model(nodes, [info("X", TensorProto.INT64, [None, 3])],
                     [info("I", TensorProto.INT64, [None, 3]),
                      info("Y", TensorProto.FLOAT, [None, 3])], 1)
    x = rng.integers(0, 4, (10, 3)).astype(np.int64)
    run_and_compare(tmp_path, model, {"X": x}, "imputer int64 -> scaler")


def test_category_mapper_round_trip(tmp_path):
    nodes = [
        helper.make_node("CategoryMapper", ["X"], ["S"], domain="ai.onnx.ml",
                         cats_int64s=[1, 2, 3, 4], cats_strings=["a", "b", "c", "d"],
                         default_string="zz"),
        helper.make_node("CategoryMapper", ["S"], ["Y"], domain="ai.onnx.ml",
                         cats_int64s=[10, 20, 40], cats_strings=["a", "b", "d"],
                         default_int64=-7),
    ]
    model = ml_model(nodes, [info("X", TensorProto.INT64, [None])],
                     [info("Y", TensorProto.INT64, [None])], 1)
    x = np.array([1, 2, 3, 4, 5, 0, 2, 4], np.int64)
    got, _ = run_and_compare(tmp_path, model, {"X": x}, "category mapper")
    np.testing.assert_array_equal(got["Y"], [10, 20, -7, 40, -7, -7, 20, 40])


@pytest.mark.parametrize("op", ["ZipMap", "DictVectorizer"])
def test_map_ops_are_clean_errors(tmp_path, op):
    if op == "ZipMap":
        node = helper.make_node("ZipMap", ["X"], ["Y"], domain="ai.onnx.ml",
                                classlabels_int64s=[0, 1])
        x_info = info("X", TensorProto.FLOAT, [None, 2])
        y_info = helper.make_value_info(
            "Y", helper.make_sequence_type_proto(
                helper.make_map_type_proto(TensorProto.INT64,
                                           helper.make_tensor_type_proto(TensorProto.FLOAT, []))))
    else:
        node = helper.make_node("DictVectorizer", ["X"], ["Y"], domain="ai.onnx.ml",
                                int64_vocabulary=[1, 2])
        x_info = helper.make_value_info(
            "X", helper.make_map_type_proto(TensorProto.INT64,
                                            helper.make_tensor_type_proto(TensorProto.FLOAT, [])))
        y_info = info("Y", TensorProto.FLOAT, [None, 2])
    model = ml_model([node], [x_info], [y_info], 1)
    path = str(tmp_path / "model.onnx")
    onnx.save(model, path)
    npz = str(tmp_path / "in.npz")
    np.savez(npz, X=np.zeros((1, 2), np.float32))
    proc = run_kiln(["run", path, "--inputs", npz, "--output-dir", str(tmp_path)])
    assert proc.returncode > 0 and proc.returncode < 128, (proc.returncode, proc.stderr)
    assert "error" in proc.stderr.lower(), proc.stderr
    assert "Traceback" not in proc.stderr and "terminate" not in proc.stderr
