"""Importer cases that the PyPI models (tests/models/test_pypi_models.py) hit, each reduced to a
small model built with onnx.helper, run through `kiln run` and compared with ONNX Runtime:

* Softmax / LogSoftmax / Hardmax at opset 11-12 (the input coerced to 2-D at `axis`) whose
  input's rank is unknown at import: it comes from a Reshape to a computed shape, as in
  paddle2onnx's PP-OCRv4 recogniser. Both the last axis and an inner one, where the coercion
  flattens several dims.
* An op whose input's type is unknown at import must not get a type guessed from it
  (Add(unknown, bias[5]) taken for rank 1 made the Softmax after it fail).
* A graph input declared [-1, 3, "?", "?"] (the PP-OCR direction classifier): -1 and "?" are
  unknown dims, each its own (H and W differ), at two batch sizes.
"""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from kiln_helpers import assert_matches_ort, kiln_run_model, ort_outputs


def ints(name, values):
    return helper.make_tensor(name, TensorProto.INT64, [len(values)], values)


def softmax_of_computed_reshape(op, opset, axis, bias=False):
    """x: f32[N,12,5] -> Reshape to concat(shape(x)[0:1], [3,4,5]) [-> Add bias[5]] -> op(axis)
    -> y: [N,3,4,5]. The Reshape's target is computed, so the importer does not know the op
    input's rank (nor, with the bias, may it take the broadcast's rank-1 guess for it)."""
    nodes = [
        helper.make_node("Shape", ["x"], ["xs"]),
        helper.make_node("Slice", ["xs", "zero", "one"], ["n"]),
        helper.make_node("Concat", ["n", "rest"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["r"]),
    ]
    if bias:
        nodes.append(helper.make_node("Add", ["r", "bias"], ["rb"]))
    nodes.append(helper.make_node(op, ["rb" if bias else "r"], ["y"], axis=axis))
    graph = helper.make_graph(
        nodes, f"{op.lower()}_unknown_rank",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 12, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 4, 5])],
        [ints("zero", [0]), ints("one", [1]), ints("rest", [3, 4, 5]),
         helper.make_tensor("bias", TensorProto.FLOAT, [5], [0.5, -1.0, 0.0, 2.0, 1.0])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def run_vs_ort(tmp_path, model, label):
    onnx.checker.check_model(model)
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    rng = np.random.default_rng(7)
    for n in (2, 3):
        feed = {"x": rng.standard_normal((n, 12, 5)).astype(np.float32)}
        np.savez(tmp_path / "in.npz", **feed)
        got, _ = kiln_run_model(path, tmp_path / "in.npz", str(tmp_path / f"out{n}"),
                                extra=["--repeat", "1"])
        assert_matches_ort(got, ort_outputs(str(path), feed), f"{label} N={n}")


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("opset,axis", [(12, 3), (12, 1), (11, -2)])
def test_legacy_softmax_with_unknown_rank(tmp_path, op, opset, axis):
    run_vs_ort(tmp_path, softmax_of_computed_reshape(op, opset, axis), f"{op}-{opset} axis {axis}")


@pytest.mark.parametrize("axis", [2, 3])
def test_no_type_guessed_from_an_unknown_input(tmp_path, axis):
    """Add(unknown rank, bias[5]) -> Softmax-12: the importer once took the Add for rank 1."""
    run_vs_ort(tmp_path, softmax_of_computed_reshape("Softmax", 12, axis, bias=True),
               f"Softmax-12 after a bias, axis {axis}")


def classifier_with_minus_one_batch():
    """x: f32[-1,3,?,?] -> ReduceMean over H,W -> MatMul [3,2] -> Softmax-11: [-1,2]."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 3, "?", "?"])
    assert x.type.tensor_type.shape.dim[0].dim_value == -1
    w = helper.make_tensor("w", TensorProto.FLOAT, [3, 2], [0.5, -1.0, 2.0, 0.25, -0.75, 1.5])
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["m"], axes=[2, 3], keepdims=0),
        helper.make_node("MatMul", ["m", "w"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["y"], axis=1),
    ]
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [-1, 2])
    graph = helper.make_graph(nodes, "cls_like", [x], [y], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=7)


def test_minus_one_and_question_mark_input_dims(tmp_path):
    path = tmp_path / "cls.onnx"
    onnx.save(classifier_with_minus_one_batch(), path)
    rng = np.random.default_rng(3)
    for shape in [(6, 3, 48, 192), (1, 3, 32, 20)]:
        feed = {"x": rng.standard_normal(shape).astype(np.float32)}
        np.savez(tmp_path / "in.npz", **feed)
        got, _ = kiln_run_model(path, tmp_path / "in.npz", str(tmp_path / f"out{shape[0]}"),
                                extra=["--repeat", "1"])
        assert_matches_ort(got, ort_outputs(str(path), feed), f"cls-like {shape}")
