"""The same test functions against onnxruntime and kiln (the `rt` fixture picks the module):
kiln.InferenceSession must behave as onnxruntime.InferenceSession does, so that switching a
program from ONNX Runtime to Kiln is one import. Every numeric check is against numpy or
against ONNX Runtime itself."""
import json
import os
import threading
import time

import numpy as np
import onnx
import pytest

from small_models import DIGITS_IMAGES, DIGITS_MODEL

RTOL, ATOL = 1e-4, 1e-5


def check_mlp_outputs(outs, reference, x, names=("logits", "probs", "label")):
    ref = reference(x)
    assert len(outs) == len(names)
    for got, name in zip(outs, names):
        assert isinstance(got, np.ndarray), f"{name}: got a {type(got).__name__}"
        assert got.shape == ref[name].shape, f"{name}: expected shape {ref[name].shape}, got {got.shape}"
        if name == "label":
            assert got.dtype == np.int64
            np.testing.assert_array_equal(got, ref[name])
        else:
            assert got.dtype == np.float32
            np.testing.assert_allclose(got, ref[name], rtol=RTOL, atol=ATOL, err_msg=name)


def test_providers(rt):
    assert "CPUExecutionProvider" in rt.mod.get_available_providers()


def test_session_from_path_and_bytes(rt, mlp_model):
    path, model, reference = mlp_model
    x = np.random.default_rng(0).standard_normal((5, 16)).astype(np.float32)
    for source in (path, model.SerializeToString()):
        sess = rt.mod.InferenceSession(source, providers=["CPUExecutionProvider"])
        check_mlp_outputs(sess.run(None, {"x": x}), reference, x)
        assert sess.get_providers() == ["CPUExecutionProvider"]


def test_run_named_outputs(rt, mlp_model):
    path, _, reference = mlp_model
    sess = rt.mod.InferenceSession(path)
    x = np.random.default_rng(1).standard_normal((3, 16)).astype(np.float32)
    check_mlp_outputs(sess.run(["label", "logits"], {"x": x}), reference, x, names=("label", "logits"))
    check_mlp_outputs(sess.run(["probs"], {"x": x}), reference, x, names=("probs",))
    check_mlp_outputs(sess.run([], {"x": x}), reference, x)  # empty list = all, like None


def test_symbolic_batch_takes_any_size(rt, mlp_model):
    path, _, reference = mlp_model
    sess = rt.mod.InferenceSession(path)
    rng = np.random.default_rng(2)
    for batch in (1, 7, 2, 7):
        x = rng.standard_normal((batch, 16)).astype(np.float32)
        check_mlp_outputs(sess.run(None, {"x": x}), reference, x)


def test_non_contiguous_input(rt, mlp_model):
    path, _, reference = mlp_model
    sess = rt.mod.InferenceSession(path)
    big = np.random.default_rng(3).standard_normal((16, 8)).astype(np.float32)
    x = big.T  # a transposed view: Fortran order
    assert not x.flags.c_contiguous
    check_mlp_outputs(sess.run(None, {"x": x}), reference, np.ascontiguousarray(x))


def test_inputs_outputs_metadata(rt, mlp_model):
    sess = rt.mod.InferenceSession(mlp_model[0])
    got = [(a.name, a.type, a.shape) for a in sess.get_inputs() + sess.get_outputs()]
    assert got == [("x", "tensor(float)", ["batch", 16]),
                   ("logits", "tensor(float)", ["batch", 4]),
                   ("probs", "tensor(float)", ["batch", 4]),
                   ("label", "tensor(int64)", ["batch"])]


def test_modelmeta(rt, mlp_model):
    meta = rt.mod.InferenceSession(mlp_model[0]).get_modelmeta()
    assert meta.producer_name == "kiln-tests"
    assert meta.graph_name == "mlp"
    assert meta.domain == "ai.kiln.test"
    assert meta.description == "MLP of the Python API tests"
    assert meta.graph_description == "a two-layer perceptron"
    assert meta.version == 7
    assert meta.custom_metadata_map == {"author": "tests/python", "purpose": "parity"}


def test_missing_input(rt, mlp_model):
    sess = rt.mod.InferenceSession(mlp_model[0])
    with pytest.raises(ValueError, match="x"):  # ORT: ValueError; kiln.InvalidArgument is one
        sess.run(None, {})


def test_wrong_dtype(rt, mlp_model):
    sess = rt.mod.InferenceSession(mlp_model[0])
    with pytest.raises(rt.InvalidArgument, match="x"):
        sess.run(None, {"x": np.zeros((2, 16), np.float64)})


@pytest.mark.parametrize("shape", [(2, 15), (2, 16, 1)])
def test_wrong_shape(rt, mlp_model, shape):
    sess = rt.mod.InferenceSession(mlp_model[0])
    with pytest.raises(rt.InvalidArgument, match="x"):
        sess.run(None, {"x": np.zeros(shape, np.float32)})


def test_unknown_input_and_output_names(rt, mlp_model):
    sess = rt.mod.InferenceSession(mlp_model[0])
    x = np.zeros((2, 16), np.float32)
    with pytest.raises(rt.InvalidArgument, match="nope"):
        sess.run(None, {"x": x, "nope": x})
    with pytest.raises(rt.InvalidArgument, match="nope"):
        sess.run(["nope"], {"x": x})


def test_missing_model_file(rt, tmp_path):
    with pytest.raises(rt.NoSuchFile):
        rt.mod.InferenceSession(str(tmp_path / "absent.onnx"))


def test_session_options(rt, mlp_model):
    path, _, reference = mlp_model
    x = np.random.default_rng(4).standard_normal((6, 16)).astype(np.float32)
    GOL, EM = rt.mod.GraphOptimizationLevel, rt.mod.ExecutionMode
    for level in (GOL.ORT_DISABLE_ALL, GOL.ORT_ENABLE_BASIC, GOL.ORT_ENABLE_EXTENDED, GOL.ORT_ENABLE_ALL):
        for mode in (EM.ORT_SEQUENTIAL, EM.ORT_PARALLEL):
            so = rt.mod.SessionOptions()
            so.graph_optimization_level = level
            so.execution_mode = mode
            so.intra_op_num_threads = 2
            so.inter_op_num_threads = 2
            sess = rt.mod.InferenceSession(path, so)
            check_mlp_outputs(sess.run(None, {"x": x}), reference, x)
            assert sess.get_session_options().graph_optimization_level == level


def test_free_dimension_override(rt, mlp_model):
    path, _, reference = mlp_model
    so = rt.mod.SessionOptions()
    so.add_free_dimension_override_by_name("batch", 3)
    sess = rt.mod.InferenceSession(path, so)
    x = np.random.default_rng(5).standard_normal((3, 16)).astype(np.float32)
    check_mlp_outputs(sess.run(None, {"x": x}), reference, x)
    with pytest.raises(rt.InvalidArgument):
        sess.run(None, {"x": np.zeros((4, 16), np.float32)})


def test_threads_share_one_session(rt, mlp_model):
    """8 threads x 25 runs on one session, each with its own inputs (two batch sizes); every
    result is checked against numpy."""
    path, _, reference = mlp_model
    sess = rt.mod.InferenceSession(path)
    errors = []

    def worker(seed):
        rng = np.random.default_rng(100 + seed)
        try:
            for i in range(25):
                x = rng.standard_normal((4 if (seed + i) % 2 else 9, 16)).astype(np.float32)
                check_mlp_outputs(sess.run(None, {"x": x}), reference, x)
        except Exception as e:  # noqa: BLE001 (reported below with the thread's seed)
            errors.append(f"thread {seed}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, "\n".join(errors)


def test_threads_match_single_thread_run_digits(rt):
    """The digits CNN from 8 threads at once: each thread's outputs equal the same runtime's
    single-threaded run of the same images."""
    images = np.load(DIGITS_IMAGES)["image"]
    sess = rt.mod.InferenceSession(DIGITS_MODEL)
    batches = [images[i * 20:(i + 1) * 20] for i in range(8)]
    expected = [sess.run(None, {"image": b}) for b in batches]
    got = [None] * 8

    def worker(i):
        got[i] = [sess.run(None, {"image": batches[i]}) for _ in range(5)]

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(8):
        for run in got[i]:
            np.testing.assert_array_equal(run[1], expected[i][1])
            np.testing.assert_allclose(run[0], expected[i][0], rtol=1e-5, atol=1e-6)


def test_digits_matches_labels(rt):
    feed = dict(np.load(DIGITS_IMAGES))
    labels = np.load(os.path.join(os.path.dirname(DIGITS_MODEL), "test_labels.npy"))
    probs, digit = rt.mod.InferenceSession(DIGITS_MODEL).run(None, feed)
    assert probs.shape == (360, 10) and digit.shape == (360,)
    assert (digit == labels).mean() >= 0.9
    np.testing.assert_array_equal(digit, probs.argmax(1))


def test_profiling(rt, mlp_model, tmp_path):
    so = rt.mod.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "trace")
    sess = rt.mod.InferenceSession(mlp_model[0], so)
    for _ in range(3):
        sess.run(None, {"x": np.ones((2, 16), np.float32)})
    path = sess.end_profiling()
    assert os.path.isfile(path) and os.path.basename(path).startswith("trace")
    with open(path) as f:
        trace = json.load(f)
    events = trace if isinstance(trace, list) else trace["traceEvents"]
    complete = [e for e in events if e.get("ph") == "X"]
    assert complete, f"no complete ('X') events in {path}"
    assert all(e["dur"] >= 0 and "name" in e for e in complete)


def test_profiling_off_returns_empty_path(rt, mlp_model):
    assert rt.mod.InferenceSession(mlp_model[0]).end_profiling() == ""


def test_terminate_before_run(rt, mlp_model):
    sess = rt.mod.InferenceSession(mlp_model[0])
    ro = rt.mod.RunOptions()
    ro.terminate = True
    x = np.ones((2, 16), np.float32)
    with pytest.raises(rt.Terminated):
        sess.run(None, {"x": x}, ro)
    ro.terminate = False
    assert sess.run(["label"], {"x": x}, ro)[0].shape == (2,)


def test_terminate_stops_a_running_run(rt, chain_model):
    """A run of a 600-node chain is stopped from another thread shortly after it starts; the
    session then runs normally."""
    so = rt.mod.SessionOptions()
    so.intra_op_num_threads = 1
    sess = rt.mod.InferenceSession(chain_model, so)
    x = np.random.default_rng(6).standard_normal((256, 256)).astype(np.float32)
    t0 = time.perf_counter()
    full = sess.run(None, {"x": x})[0]
    full_s = time.perf_counter() - t0
    ro = rt.mod.RunOptions()
    timer = threading.Timer(min(0.02, full_s / 10), lambda: setattr(ro, "terminate", True))
    timer.start()
    t0 = time.perf_counter()
    with pytest.raises(rt.Terminated):
        sess.run(None, {"x": x}, ro)
    stopped_s = time.perf_counter() - t0
    timer.join()
    assert stopped_s < full_s, f"terminated run took {stopped_s:.3f} s, a full run {full_s:.3f} s"
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], full)


def test_switching_is_one_import(rt, mlp_model):
    """A typical ONNX Runtime program, run with the module bound to `ort`."""
    program = """
so = ort.SessionOptions()
so.intra_op_num_threads = 1
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
sess = ort.InferenceSession(model_path, sess_options=so, providers=ort.get_available_providers())
name = sess.get_inputs()[0].name
result = sess.run([o.name for o in sess.get_outputs()], {name: x}, ort.RunOptions())
"""
    x = np.random.default_rng(8).standard_normal((2, 16)).astype(np.float32)
    scope = {"ort": rt.mod, "model_path": mlp_model[0], "x": x}
    exec(program, scope)  # noqa: S102 (a fixed program text)
    check_mlp_outputs(scope["result"], mlp_model[2], x)


def test_unnamed_dims_are_none(rt):
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["x"], ["y"])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", None])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", None])])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    model.ir_version = 8
    sess = rt.mod.InferenceSession(model.SerializeToString())
    assert [a.shape for a in sess.get_inputs() + sess.get_outputs()] == [["N", None], ["N", None]]
    x = np.random.default_rng(11).standard_normal((2, 5)).astype(np.float32)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], np.maximum(x, 0))


def test_outputs_sharing_a_value_are_independent(rt):
    """y1 and y2 compute the same value (Kiln's CSE makes them one buffer) and `x` passes
    through as an output: each returned array is the caller's own."""
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["x"], ["y1"]), onnx.helper.make_node("Relu", ["x"], ["y2"]),
         onnx.helper.make_node("Identity", ["x"], ["x_out"])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3, 4])],
        [onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [3, 4]) for n in ("y1", "y2", "x_out")])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    model.ir_version = 8
    sess = rt.mod.InferenceSession(model.SerializeToString())
    x = np.random.default_rng(12).standard_normal((3, 4)).astype(np.float32)
    x_before = x.copy()
    for _ in range(2):
        y1, y2, x_out = sess.run(None, {"x": x})
        y1[:] = -7
        x_out[:] = -7
        np.testing.assert_array_equal(y2, np.maximum(x, 0))
        np.testing.assert_array_equal(x, x_before)


# -- module functions, exception names, input conversions, enums (issue 28) ----------------------

def test_module_functions(rt):
    all_providers = rt.mod.get_all_providers()
    assert "CPUExecutionProvider" in all_providers and "CUDAExecutionProvider" in all_providers
    assert set(rt.mod.get_available_providers()) <= set(all_providers)
    assert rt.mod.get_device() == "CPU"
    info = rt.mod.get_build_info()
    assert isinstance(info, str) and "Build Info" in info
    assert rt.mod.disable_telemetry_events() is None and rt.mod.enable_telemetry_events() is None
    rt.mod.set_default_logger_verbosity(1)
    rt.mod.set_default_logger_verbosity(0)
    for bad in (5, -1):
        with pytest.raises(RuntimeError, match="severity"):
            rt.mod.set_default_logger_severity(bad)
    rt.mod.set_default_logger_severity(3)
    rt.mod.set_default_logger_severity(2)  # ORT's default back


@pytest.mark.parametrize("name", ["InvalidArgument", "Fail", "NoSuchFile", "InvalidGraph", "InvalidProtobuf",
                                  "RuntimeException", "NotImplemented", "EPFail", "EngineError", "NoModel",
                                  "ModelLoaded", "ModelLoadCanceled", "ModelRequiresCompilation", "NotFound"])
def test_capi_exception_names(rt, name):
    """`except onnxruntime.capi.onnxruntime_pybind11_state.X` ports by changing the package name."""
    import importlib
    state = importlib.import_module(f"{rt.name}.capi.onnxruntime_pybind11_state")
    assert rt.mod.capi.onnxruntime_pybind11_state is state  # an attribute once the package is imported
    assert issubclass(getattr(state, name), Exception)
    assert getattr(importlib.import_module(f"{rt.name}.capi._pybind_state"), name) is getattr(state, name)


def test_capi_exceptions_are_what_runs_raise(rt, mlp_model, tmp_path):
    import importlib
    state = importlib.import_module(f"{rt.name}.capi.onnxruntime_pybind11_state")
    sess = rt.mod.InferenceSession(mlp_model[0])
    with pytest.raises(state.InvalidArgument, match="x"):
        sess.run(None, {"x": np.zeros((2, 16), np.float64)})
    with pytest.raises(state.NoSuchFile):
        rt.mod.InferenceSession(str(tmp_path / "absent.onnx"))
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises((state.InvalidProtobuf, state.InvalidGraph, state.Fail)):
        rt.mod.InferenceSession(str(bad))


def test_list_inputs_convert_to_the_input_type(rt, mlp_model):
    """ORT converts a (nested) list with numpy to the input's element type: ints, bools and
    numeric strings into a float input."""
    path, _, reference = mlp_model
    sess = rt.mod.InferenceSession(path)
    rows = [[(i * 3 + j) % 5 - 2 for j in range(16)] for i in range(3)]
    x = np.array(rows, np.float32)
    check_mlp_outputs(sess.run(None, {"x": rows}), reference, x)
    mixed = [[True, 2] + [str(v) for v in range(14)]]
    check_mlp_outputs(sess.run(None, {"x": mixed}), reference, np.array(mixed, np.float32))
    with pytest.raises(rt.InvalidArgument, match="x"):  # the list's shape is checked as an array's
        sess.run(None, {"x": [rows]})


def test_python_scalars_are_refused(rt, mlp_model):
    sess = rt.mod.InferenceSession(mlp_model[0])
    for scalar in (2.0, 3):
        with pytest.raises(RuntimeError):
            sess.run(None, {"x": scalar})


def test_option_enums_round_trip(rt, mlp_model):
    GOL, EM = rt.mod.GraphOptimizationLevel, rt.mod.ExecutionMode
    sess = rt.mod.InferenceSession(mlp_model[0])
    got = sess.get_session_options()
    assert isinstance(got.graph_optimization_level, GOL)
    assert got.graph_optimization_level == GOL.ORT_ENABLE_ALL
    assert isinstance(got.execution_mode, EM) and got.execution_mode == EM.ORT_SEQUENTIAL
    so = rt.mod.SessionOptions()
    so.graph_optimization_level = GOL.ORT_ENABLE_EXTENDED
    so.execution_mode = EM.ORT_PARALLEL
    got = rt.mod.InferenceSession(mlp_model[0], so).get_session_options()
    assert isinstance(got.graph_optimization_level, GOL) and got.graph_optimization_level == GOL.ORT_ENABLE_EXTENDED
    assert got.graph_optimization_level.name == "ORT_ENABLE_EXTENDED"
    assert got.execution_mode == EM.ORT_PARALLEL


def test_profiling_start_time(rt, mlp_model, tmp_path):
    import time
    assert rt.mod.InferenceSession(mlp_model[0]).get_profiling_start_time_ns() == 0
    so = rt.mod.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "trace")
    before = time.time_ns()
    sess = rt.mod.InferenceSession(mlp_model[0], so)
    after = time.time_ns()
    assert before <= sess.get_profiling_start_time_ns() <= after
    sess.end_profiling()
