"""Tests of the conformance script's logic on synthetic inputs: op grouping, the random-test
exclusion, the per-group table, the kiln output parser, the ORT-side comparison rule, and the
worker pool surviving a crashing and a hanging test."""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import groups  # noqa: E402
import kiln_runner  # noqa: E402
import ort_runner  # noqa: E402
import report  # noqa: E402


def info(ops, opset=22, nodes=None, values=None):
    return {"ops": ops, "opset": opset, "values": values or {},
            "nodes": nodes or [{"op": op, "inputs": [], "attrs": {}} for op in ops]}


def dropout(inputs, values, opset=22, attrs=None):
    return info(["Dropout"], opset, [{"op": "Dropout", "inputs": inputs, "attrs": attrs or {}}],
                values)


# ---- grouping ---------------------------------------------------------------------------

def test_single_op_groups():
    assert groups.group_of_ops(["Add"]) == groups.ELEMENTWISE
    assert groups.group_of_ops(["ReduceSum"]) == groups.REDUCTION
    assert groups.group_of_ops(["Slice"]) == groups.SHAPE
    assert groups.group_of_ops(["Conv"]) == groups.NN
    assert groups.group_of_ops(["QLinearMatMul"]) == groups.QUANT
    assert groups.group_of_ops(["Loop"]) == groups.CONTROL
    assert groups.group_of_ops(["SequenceInsert"]) == groups.CONTROL
    assert groups.group_of_ops(["OptionalHasElement"]) == groups.CONTROL
    assert groups.group_of_ops(["SoftmaxCrossEntropyLoss"]) == groups.TRAINING
    assert groups.group_of_ops(["Adam"]) == groups.TRAINING
    assert groups.group_of_ops(["StringSplit"]) == groups.OTHER
    assert groups.group_of_ops(["NoSuchOp"]) == groups.OTHER


def test_multi_op_model_goes_to_highest_priority_group():
    assert groups.group_of_ops(["Conv", "Add"]) == groups.NN
    assert groups.group_of_ops(["Add", "If", "Conv"]) == groups.CONTROL
    assert groups.group_of_ops(["Reshape", "Mul"]) == groups.SHAPE
    # Constant feeding an op does not make it a shape test; alone it does.
    assert groups.group_of_ops(["Constant", "Relu"]) == groups.ELEMENTWISE
    assert groups.group_of_ops(["Constant"]) == groups.SHAPE


def test_expanded_stem():
    assert groups.expanded_stem("test_softmax_cross_entropy_mean_expanded") == \
        "test_softmax_cross_entropy_mean"
    assert groups.expanded_stem("test_reduce_l1_keep_dims_random_expanded_ver18") == \
        "test_reduce_l1_keep_dims_random"
    assert groups.expanded_stem("test_expanded_thing") is None
    assert groups.expanded_stem("test_add") is None


def test_expanded_test_takes_its_stems_group():
    infos = {
        "test_sce_mean": info(["SoftmaxCrossEntropyLoss"]),
        # the expansion is all elementwise/reduction/shape ops, but belongs with its op
        "test_sce_mean_expanded": info(["Shape", "LogSoftmax", "Mul", "ReduceSum"]),
        "test_mish_expanded_ver18": info(["Softplus", "Tanh", "Mul"]),
        "test_mish": info(["Mish"]),
        # no stem test present: grouped by its own ops
        "test_orphan_expanded": info(["Conv", "Relu"]),
    }
    g = groups.classify(infos)
    assert g["test_sce_mean_expanded"] == groups.TRAINING
    assert g["test_mish_expanded_ver18"] == groups.ELEMENTWISE
    assert g["test_orphan_expanded"] == groups.NN


# ---- random tests -----------------------------------------------------------------------

def test_random_ops_are_random():
    for op in ["Bernoulli", "RandomUniformLike", "RandomNormal", "Multinomial"]:
        assert groups.is_random(info([op]))
    assert not groups.is_random(info(["Add"]))


def test_dropout_training_with_ratio_is_random():
    one = np.array(True)
    assert groups.is_random(dropout(["x", "r", "t"], {"r": np.array(0.75), "t": one}))
    # ratio defaults to 0.5 when absent
    assert groups.is_random(dropout(["x", "", "t"], {"t": one}))
    # unknown training flag given as an input: cannot tell, so random
    assert groups.is_random(dropout(["x", "r", "t"], {"r": np.array(0.5)}))


def test_dropout_inference_or_zero_ratio_is_not_random():
    assert not groups.is_random(dropout(["x"], {}))
    assert not groups.is_random(dropout(["x", "r"], {"r": np.array(0.1)}))
    assert not groups.is_random(dropout(["x", "r", "t"],
                                        {"r": np.array(0.5), "t": np.array(False)}))
    assert not groups.is_random(dropout(["x", "r", "t"],
                                        {"r": np.array(0.0), "t": np.array(True)}))
    # opsets 7-11 have no training mode; opset < 7 trains when is_test = 0
    assert not groups.is_random(dropout(["x"], {}, opset=11, attrs={"ratio": 0.2}))
    assert groups.is_random(dropout(["x"], {}, opset=6, attrs={"is_test": 0, "ratio": 0.2}))
    assert not groups.is_random(dropout(["x"], {}, opset=6, attrs={"is_test": 1}))


def test_expanded_random_test_stays_random_and_stem_random_propagates():
    infos = {
        "test_bernoulli": info(["Bernoulli"]),
        "test_bernoulli_expanded": info(["RandomUniformLike", "Less", "Cast"]),
        "test_drop_expanded": info(["Identity"]),
        "test_drop": dropout(["x", "r", "t"], {"r": np.array(0.5), "t": np.array(True)}),
    }
    g = groups.classify(infos)
    assert g == {n: groups.RANDOM_GROUP for n in infos}


# ---- the table ---------------------------------------------------------------------------

def test_table_counts_and_random_exclusion():
    g = {"test_add": groups.ELEMENTWISE, "test_mul": groups.ELEMENTWISE,
         "test_conv": groups.NN, "test_bernoulli": groups.RANDOM_GROUP,
         "test_drop_train": groups.RANDOM_GROUP}
    kiln = {"test_add": {"status": "PASS", "reason": ""},
            "test_mul": {"status": "UNSUPPORTED", "reason": "unsupported dtype"},
            "test_conv": {"status": "FAIL", "reason": "mismatch"},
            "test_bernoulli": {"status": "PASS", "reason": ""},
            "test_drop_train": {"status": "FAIL", "reason": "x"}}
    ort = {"test_add": {"status": "PASS"}, "test_mul": {"status": "PASS"},
           "test_conv": {"status": "FAIL"}, "test_bernoulli": {"status": "PASS"},
           "test_drop_train": {"status": "PASS"}}
    s = report.build(g, kiln, ort)
    rows = {r["group"]: r for r in s["rows"]}
    assert [r["group"] for r in s["rows"]] == [groups.ELEMENTWISE, groups.NN, "total"]
    assert rows[groups.ELEMENTWISE] == {"group": groups.ELEMENTWISE, "tests": 2, "kiln_pass": 1,
                                        "ort_pass": 2, "kiln_fail_ort_pass": 1}
    assert rows[groups.NN]["kiln_fail_ort_pass"] == 0  # both fail: not a Kiln gap
    # random tests count for neither runtime, even where one of them "passes"
    assert rows["total"] == {"group": "total", "tests": 3, "kiln_pass": 1, "ort_pass": 2,
                             "kiln_fail_ort_pass": 1}
    assert s["kiln_fail_ort_pass"] == [{"name": "test_mul", "group": groups.ELEMENTWISE,
                                        "kiln_status": "UNSUPPORTED",
                                        "kiln_reason": "unsupported dtype"}]
    assert [r["name"] for r in s["random"]] == ["test_bernoulli", "test_drop_train"]
    text = report.format_report(s)
    assert "test_mul [elementwise] UNSUPPORTED: unsupported dtype" in text
    assert "2 tests with random expected output" in text
    md = report.format_table(s, markdown=True)
    assert md.splitlines()[0].startswith("| group | tests |")
    assert "| **total** | **3** | **1** | **2** | **1** |" in md


def test_table_without_ort():
    s = report.build({"test_add": groups.ELEMENTWISE},
                     {"test_add": {"status": "PASS", "reason": ""}}, None)
    assert s["rows"][-1] == {"group": "total", "tests": 1, "kiln_pass": 1, "ort_pass": None,
                             "kiln_fail_ort_pass": None}
    assert s["kiln_fail_ort_pass"] == []
    assert "fail in Kiln and pass in ONNX Runtime" not in report.format_report(s)


def test_missing_kiln_result_counts_as_not_passed():
    s = report.build({"test_a": groups.NN}, {}, {"test_a": {"status": "PASS"}})
    assert s["kiln_fail_ort_pass"][0]["kiln_status"] == "MISSING"


# ---- kiln output parsing ------------------------------------------------------------------

def test_parse_kiln_output():
    out = ("PASS test_abs\nFAIL test_x: output 'y' element 0: expected 1, got 2\n"
           "UNSUPPORTED test_y: unsupported op 'Foo' (node #0, opset 20)\n"
           "    time: 0.1 s\n1 passed, 1 failed, 1 unsupported\n")
    r = kiln_runner.parse(out)
    assert r == {"test_abs": {"status": "PASS", "reason": ""},
                 "test_x": {"status": "FAIL", "reason": "output 'y' element 0: expected 1, got 2"},
                 "test_y": {"status": "UNSUPPORTED",
                            "reason": "unsupported op 'Foo' (node #0, opset 20)"}}


# ---- the ORT-side comparison rule (must match tools/kiln/output_compare.cc) ----------------

def test_compare_float_tolerance():
    e = np.array([1.0, 100.0, 0.0], np.float32)
    assert ort_runner.compare_tensor("y", e, e + np.float32([9e-4, 0.09, 9e-6])) is None
    assert "element 1" in ort_runner.compare_tensor("y", e, e + np.float32([0, 0.2, 0]))
    assert "element 2" in ort_runner.compare_tensor("y", e, e + np.float32([0, 0, 2e-5]))


def test_compare_nan_inf_int_bool_string():
    nan_inf = np.array([np.nan, np.inf, -np.inf])
    assert ort_runner.compare_tensor("y", nan_inf, nan_inf.copy()) is None
    assert ort_runner.compare_tensor("y", nan_inf, np.array([0.0, np.inf, -np.inf])) is not None
    assert ort_runner.compare_tensor("y", np.array([np.inf]), np.array([np.nan])) is not None
    assert ort_runner.compare_tensor("y", np.array([5], np.int64), np.array([6], np.int64))
    assert ort_runner.compare_tensor("y", np.array([True]), np.array([False]))
    assert ort_runner.compare_tensor("y", np.array([b"ab"], object), np.array(["ab"], object)) \
        is None
    assert ort_runner.compare_tensor("y", np.array(["ab"], object), np.array(["ac"], object))


def test_compare_dtype_shape_sequence_optional():
    assert "dtype" in ort_runner.compare_tensor("y", np.zeros(2, np.float32), np.zeros(2))
    assert "shape" in ort_runner.compare_tensor("y", np.zeros(2), np.zeros((1, 2)))
    seq = [np.ones(2), np.zeros(3)]
    assert ort_runner.compare_value("s", seq, [np.ones(2), np.zeros(3)]) is None
    assert "length" in ort_runner.compare_value("s", seq, seq[:1])
    assert ort_runner.compare_value("o", None, None) is None
    assert "optional" in ort_runner.compare_value("o", None, np.ones(1))


def test_classify_error():
    assert ort_runner.classify_error(
        "[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation") == \
        "UNSUPPORTED"
    assert ort_runner.classify_error("[ONNXRuntimeError] : 1 : FAIL : shape mismatch") == "FAIL"


# ---- the worker pool survives crashes and hangs ------------------------------------------

def fake_runner(test_dir, rtol, atol):
    name = os.path.basename(test_dir)
    if name == "crash":
        os._exit(7)
    if name == "hang":
        time.sleep(60)
    return ("PASS", "") if name.startswith("ok") else ("FAIL", "wrong")


def test_pool_survives_crash_and_timeout():
    tests = {n: f"/nowhere/{n}" for n in ["ok1", "crash", "ok2", "hang", "bad", "ok3"]}
    t0 = time.monotonic()
    r = ort_runner.run_tests(tests, jobs=2, timeout=2.0, runner=fake_runner)
    assert time.monotonic() - t0 < 30
    assert {n: v["status"] for n, v in r.items()} == {
        "ok1": "PASS", "ok2": "PASS", "ok3": "PASS", "crash": "FAIL", "hang": "FAIL",
        "bad": "FAIL"}
    assert "died (exit code 7)" in r["crash"]["reason"]
    assert "timed out" in r["hang"]["reason"]
    assert r["bad"]["reason"] == "wrong"
