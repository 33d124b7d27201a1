"""What only Kiln's package has, or where Kiln's mapping of ORT's API needs its own check: the
error classes, "kiln.*" config entries, the executor and -O mapping, zero-copy outputs, the GIL
released during a run, strings/sequences/optionals (vs ONNX Runtime), `python -m kiln`."""
import gc
import os
import re
import subprocess
import sys
import threading
import time

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln
import small_models


def mlp_session(mlp_model, **config):
    so = kiln.SessionOptions()
    for k, v in config.items():
        so.add_session_config_entry(k, v)
    return kiln.InferenceSession(mlp_model[0], so)


def test_error_classes():
    for cls in (kiln.InvalidArgument, kiln.InvalidModel, kiln.NotImplemented, kiln.OutOfMemory, kiln.Fail,
                kiln.CompileError, kiln.Cancelled, kiln.FileError, kiln.NoSuchFile):
        assert issubclass(cls, kiln.KilnError) and issubclass(cls, RuntimeError), cls
    assert issubclass(kiln.InvalidArgument, ValueError)
    assert issubclass(kiln.OutOfMemory, MemoryError)
    assert kiln.InvalidGraph is kiln.InvalidProtobuf is kiln.InvalidModel
    assert kiln.RuntimeException is kiln.Fail


def test_error_message_is_kilns(mlp_model):
    sess = kiln.InferenceSession(mlp_model[0])
    with pytest.raises(kiln.InvalidArgument, match=r"input 'x': expected dtype f32, got f64"):
        sess.run(None, {"x": np.zeros((2, 16))})
    with pytest.raises(kiln.InvalidArgument, match=r"input 'x': expected shape f32\[batch,16\]"):
        sess.run(None, {"x": np.zeros((2, 15), np.float32)})


def test_invalid_model_bytes():
    with pytest.raises(kiln.InvalidModel):
        kiln.InferenceSession(b"this is not an ONNX model")
    with pytest.raises(onnxruntime.capi.onnxruntime_pybind11_state.InvalidProtobuf):
        onnxruntime.InferenceSession(b"this is not an ONNX model")


def test_unsupported_op(tmp_path):
    graph = helper.make_graph([helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.example", 1)])
    with pytest.raises(kiln.NotImplemented, match="Frobnicate"):
        kiln.InferenceSession(model.SerializeToString())


def test_type_error_for_other_sources():
    with pytest.raises(TypeError):
        kiln.InferenceSession(12)


def test_memory_limit_entry(mlp_model):
    sess = mlp_session(mlp_model, **{"kiln.memory_limit": "256"})
    with pytest.raises(kiln.OutOfMemory, match="budget|limit|memory"):
        sess.run(None, {"x": np.zeros((512, 16), np.float32)})
    # A budget that holds the run's tensors.
    sess = mlp_session(mlp_model, **{"kiln.memory_limit": str(64 << 20)})
    assert sess.run(["label"], {"x": np.zeros((512, 16), np.float32)})[0].shape == (512,)


def test_config_entries_are_checked():
    so = kiln.SessionOptions()
    with pytest.raises(kiln.InvalidArgument, match="kiln.kernels"):
        so.add_session_config_entry("kiln.kernels", "fastest")
    with pytest.raises(kiln.InvalidArgument, match="kiln.nope"):
        so.add_session_config_entry("kiln.nope", "1")
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")  # ORT's keys: kept, ignored
    assert so.get_session_config_entry("session.intra_op.allow_spinning") == "0"


@pytest.mark.parametrize("kernels", ["generated", "auto"])
def test_kernels_entry(mlp_model, kernels):
    path, _, reference = mlp_model
    sess = mlp_session(mlp_model, **{"kiln.kernels": kernels})
    x = np.random.default_rng(0).standard_normal((3, 16)).astype(np.float32)
    np.testing.assert_allclose(sess.run(["logits"], {"x": x})[0], reference(x)["logits"], rtol=1e-4, atol=1e-5)


def test_preemptible_entry_round_trips():
    """"kiln.preemptible" reaches kiln::SessionOptions::preemptible, and the native field reads
    back what was set; a value other than 0/1 is refused when added."""
    native = kiln._kiln.SessionOptions()
    assert native.preemptible is False
    native.preemptible = True
    assert native.preemptible is True
    so = kiln.SessionOptions()
    assert so._native()[0].preemptible is False
    so.add_session_config_entry("kiln.preemptible", "1")
    assert so.get_session_config_entry("kiln.preemptible") == "1"
    assert so._native()[0].preemptible is True
    so.add_session_config_entry("kiln.preemptible", "0")
    assert so._native()[0].preemptible is False
    with pytest.raises(kiln.InvalidArgument, match="kiln.preemptible"):
        so.add_session_config_entry("kiln.preemptible", "yes")


def _wide_matmul_model(rng, rows=512, inner=512, cols=1024):
    """y = relu(x @ W + b) with W [inner, cols]: one column tile of the matmul holds more than
    the ~4 M multiply-adds a preemptible kernel allows (docs/kernels.md, matmul.par), so
    kiln.preemptible compiles a different schedule for it."""
    w = (rng.standard_normal((inner, cols)) / np.sqrt(inner)).astype(np.float32)
    b = rng.standard_normal(cols).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
         helper.make_node("Relu", ["a"], ["y"])], "wide_matmul",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, inner])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, cols])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = small_models._model(graph)
    return model, lambda x: np.maximum(x.astype(np.float64) @ w.astype(np.float64) + b, 0.0)


def _checked_generated_session(model, reference, x, preemptible):
    """A 2-thread session of `model` with generated kernels, kiln.preemptible as given, whose
    output for x matched reference(x)."""
    so = kiln.SessionOptions()
    so.intra_op_num_threads = 2
    so.add_session_config_entry("kiln.preemptible", preemptible)
    so.add_session_config_entry("kiln.kernels", "generated")
    sess = kiln.InferenceSession(model.SerializeToString(), so)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], reference(x), rtol=1e-4, atol=1e-4)
    return sess


def test_preemptible_sessions_match_numpy(mlp_model):
    """A session compiled for preemption gives the results of one that is not, both against a
    numpy reference: the mlp, and a matmul wide enough that the preemptible schedule differs
    (its loop IR is not the default one, so the option reached the compile)."""
    x = np.random.default_rng(5).standard_normal((3, 16)).astype(np.float32)
    for preemptible in ("0", "1"):
        sess = mlp_session(mlp_model, **{"kiln.preemptible": preemptible, "kiln.kernels": "generated"})
        np.testing.assert_allclose(sess.run(["logits"], {"x": x})[0], mlp_model[2](x)["logits"],
                                   rtol=1e-4, atol=1e-5)
    model, reference = _wide_matmul_model(np.random.default_rng(11))
    x = np.random.default_rng(6).standard_normal((512, 512)).astype(np.float32)
    loop_ir = {}
    for preemptible in ("0", "1"):
        sess = _checked_generated_session(model, reference, x, preemptible)
        loop_ir[preemptible] = sess.inspect().partition("// loop IR:")[2]
    assert loop_ir["0"] and loop_ir["1"] and loop_ir["0"] != loop_ir["1"], "kiln.preemptible changed no kernel"


def test_preemptible_deep_matmul_packs_narrow_panels(tmp_path):
    """A 3072-deep product compiled for preemption packs B in 32-column panels (384 KB, so the
    iteration that first reads one stays short: op::preemptible_packed_block), 64 otherwise;
    both match numpy."""
    model, reference = _wide_matmul_model(np.random.default_rng(12), rows=16, inner=3072, cols=128)
    x = np.random.default_rng(7).standard_normal((16, 3072)).astype(np.float32)
    packed = {}
    for preemptible in ("0", "1"):
        ir = _checked_generated_session(model, reference, x, preemptible).inspect().partition("// loop IR:")[0]
        packed[preemptible] = [w for w in ("f32[2,3072,64]", "f32[4,3072,32]") if w in ir]
    assert packed == {"0": ["f32[2,3072,64]"], "1": ["f32[4,3072,32]"]}, packed


def test_missing_tuning_log_is_invalid_argument(mlp_model, tmp_path):
    so = kiln.SessionOptions()
    so.add_session_config_entry("kiln.tuning_log", str(tmp_path / "absent.jsonl"))
    so.add_free_dimension_override_by_name("batch", 2)  # compiles at load
    with pytest.raises(kiln.InvalidArgument, match="absent.jsonl"):
        kiln.InferenceSession(mlp_model[0], so)


def test_execution_mode_and_threads_map_to_kiln(mlp_model):
    def stats(mode=None, intra=1, inter=0):
        so = kiln.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = intra, inter
        if mode is not None:
            so.execution_mode = mode
        so.add_free_dimension_override_by_name("batch", 2)
        return kiln.InferenceSession(mlp_model[0], so).stats()
    assert stats(kiln.ExecutionMode.ORT_SEQUENTIAL)["executor"] == "sequential"
    assert stats(kiln.ExecutionMode.ORT_PARALLEL, inter=2)["executor"] == "dataflow"
    assert stats(intra=2)["intra_op_threads"] == 2


def test_optimization_levels_map_to_kiln(mlp_model):
    kernels = {}
    for level in (kiln.GraphOptimizationLevel.ORT_DISABLE_ALL, kiln.GraphOptimizationLevel.ORT_ENABLE_ALL):
        so = kiln.SessionOptions()
        so.graph_optimization_level = level
        so.add_free_dimension_override_by_name("batch", 2)
        kernels[level] = kiln.InferenceSession(mlp_model[0], so).stats()["kernels"]
    # -O0 runs each of the 7 nodes as its own kernel; -O3 fuses.
    assert kernels[kiln.GraphOptimizationLevel.ORT_DISABLE_ALL] > kernels[kiln.GraphOptimizationLevel.ORT_ENABLE_ALL]


def test_free_dimension_compiles_at_load(mlp_model):
    so = kiln.SessionOptions()
    so.add_free_dimension_override_by_name("batch", 5)
    assert kiln.InferenceSession(mlp_model[0], so).stats()["kernels"] > 0
    per_shape = kiln.SessionOptions()
    per_shape.add_session_config_entry("kiln.symbolic_shapes", "0")
    assert kiln.InferenceSession(mlp_model[0], per_shape).stats()["kernels"] == 0  # compiles at first run


def _bytes_in_use(sess):
    m = re.search(r"allocator: (\d+) bytes in use", sess.memory_report())
    assert m, sess.memory_report()
    return int(m.group(1))


def test_outputs_are_not_copied(mlp_model):
    """An output array is a view of the session allocator's block: while it lives the allocator
    counts the block in use, and dropping the array gives it back."""
    sess = kiln.InferenceSession(mlp_model[0])
    x = np.ones((4096, 16), np.float32)
    logits, = sess.run(["logits"], {"x": x})
    assert logits.base is not None and not logits.flags.owndata
    in_use = _bytes_in_use(sess)
    assert in_use >= logits.nbytes
    logits[:] = 0  # writable, like ORT's outputs
    del logits
    gc.collect()
    assert _bytes_in_use(sess) <= in_use - 4096 * 4 * 4


def test_an_output_asked_for_twice_is_copied(mlp_model):
    """(ORT returns two arrays over one buffer here; Kiln's are independent.)"""
    sess = kiln.InferenceSession(mlp_model[0])
    x = np.ones((2, 16), np.float32)
    a, b = sess.run(["logits", "logits"], {"x": x})
    assert not np.shares_memory(a, b)
    np.testing.assert_allclose(a, mlp_model[2](x)["logits"], rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(a, b)


def test_run_releases_the_gil(chain_model):
    """While a long run executes on another thread, this thread keeps running Python code."""
    so = kiln.SessionOptions()
    so.intra_op_num_threads = 1
    sess = kiln.InferenceSession(chain_model, so)
    x = np.zeros((256, 256), np.float32)
    sess.run(None, {"x": x})  # compile first
    done = threading.Event()
    ticks = 0

    def run():
        sess.run(None, {"x": x})
        done.set()

    t = threading.Thread(target=run)
    t0 = time.perf_counter()
    t.start()
    while not done.is_set():
        ticks += 1
    t.join()
    elapsed = time.perf_counter() - t0
    # The GIL switch interval is 5 ms: a run holding the GIL would allow a handful of ticks.
    assert elapsed > 0.02 and ticks > 10000, f"{ticks} ticks in {elapsed:.3f} s"


def test_bytes_model_temp_file_is_removed(mlp_model):
    sess = kiln.InferenceSession(mlp_model[1].SerializeToString())
    tmp = os.path.dirname(sess._model_path)
    assert os.path.isdir(tmp)
    assert sess.get_modelmeta().graph_name == "mlp"
    del sess
    gc.collect()
    assert not os.path.exists(tmp)


def _compare(kiln_outs, ort_outs):
    assert len(kiln_outs) == len(ort_outs)
    for got, ref in zip(kiln_outs, ort_outs):
        if isinstance(ref, list):
            assert isinstance(got, list) and len(got) == len(ref)
            for g, r in zip(got, ref):
                np.testing.assert_array_equal(g, r)
        elif ref is None:
            assert got is None
        else:
            assert isinstance(got, np.ndarray) and got.dtype == ref.dtype and got.shape == ref.shape, (got, ref)
            np.testing.assert_array_equal(got, ref)


def test_strings_and_sequences_match_ort():
    model = small_models.strings_and_sequences().SerializeToString()
    rng = np.random.default_rng(9)
    feed = {"text": np.array(["kiln", "Onnx", "runtime ü"], dtype=object),
            "a": rng.standard_normal((2, 3)).astype(np.float32),
            "b": rng.standard_normal((2, 3)).astype(np.float32)}
    ref = onnxruntime.InferenceSession(model).run(None, feed)
    sess = kiln.InferenceSession(model)
    _compare(sess.run(None, feed), ref)
    assert [a.type for a in sess.get_outputs()] == ["tensor(string)", "seq(tensor(float))", "tensor(int64)",
                                                  "tensor(float)"]
    # numpy str arrays (dtype '<U') are strings too
    feed["text"] = np.array(["a", "Bc"])
    _compare(sess.run(["tagged"], feed), onnxruntime.InferenceSession(model).run(["tagged"], feed))


@pytest.mark.parametrize("opt", [None, "present"])
def test_sequence_and_optional_inputs_match_ort(opt):
    model = small_models.sequence_input().SerializeToString()
    rng = np.random.default_rng(10)
    feed = {"seq": [rng.standard_normal((n, 3)).astype(np.float32) for n in (1, 4, 2)],
            "opt": None if opt is None else np.ones(3, np.float32)}
    sess = kiln.InferenceSession(model)
    assert [(a.name, a.type) for a in sess.get_inputs()] == [("seq", "seq(tensor(float))"),
                                                             ("opt", "optional(tensor(float))")]
    _compare(sess.run(None, feed), onnxruntime.InferenceSession(model).run(None, feed))


def test_profile_summary(mlp_model, tmp_path):
    so = kiln.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "p")
    sess = kiln.InferenceSession(mlp_model[0], so)
    sess.run(None, {"x": np.ones((2, 16), np.float32)})
    assert sess.profile_summary().strip()


def test_python_m_kiln_runs_the_cli():
    proc = subprocess.run([sys.executable, "-m", "kiln", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"kiln {kiln.__version__}")
    proc = subprocess.run([sys.executable, "-m", "kiln", "ops"], capture_output=True, text=True)
    assert proc.returncode == 0 and "MatMul" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "kiln", "run"], capture_output=True, text=True)
    assert proc.returncode == 2  # the CLI's usage error, passed through


def test_bound_outputs_take_no_block_of_the_allocator(mlp_model):
    """IOBinding's preallocated outputs are written by the kernels in place: while the caller
    holds them, the session allocator holds no block for them (a run that returned fresh
    outputs holds one per output, test_outputs_are_not_copied)."""
    sess = kiln.InferenceSession(mlp_model[0])
    x = np.random.default_rng(3).standard_normal((4096, 16)).astype(np.float32)
    sess.run(None, {"x": x})  # compile, and let the allocator cache blocks
    gc.collect()
    idle = _bytes_in_use(sess)
    io = sess.io_binding()
    io.bind_cpu_input("x", x)
    bufs = {n: np.empty((4096, 4), np.float32) for n in ("logits", "probs")}
    for name, buf in bufs.items():
        io.bind_output(name, "cpu", 0, np.float32, buf.shape, buf.ctypes.data)
    sess.run_with_iobinding(io)
    outs = io.get_outputs()
    assert [o.data_ptr() for o in outs] == [b.ctypes.data for b in bufs.values()]
    assert _bytes_in_use(sess) == idle
    ref = mlp_model[2](x)
    for name, buf in bufs.items():
        np.testing.assert_allclose(buf, ref[name], rtol=1e-4, atol=1e-5)


def test_bound_output_of_an_interpreted_model_is_copied_in():
    """A model run by the graph interpreter computes its outputs first; a bound one is then
    copied into the caller's buffer (the same buffer comes back), matching ORT."""
    model = small_models.strings_and_sequences().SerializeToString()
    rng = np.random.default_rng(11)
    feed = {"text": np.array(["kiln", "ort"], dtype=object), "a": rng.standard_normal((2, 3)).astype(np.float32),
            "b": rng.standard_normal((2, 3)).astype(np.float32)}
    ref = onnxruntime.InferenceSession(model).run(["back", "n"], feed)
    sess = kiln.InferenceSession(model)
    assert sess.stats()["interpreted"] or sess.stats()["executor"] == "vm"
    io = sess.io_binding()
    for k, v in feed.items():
        io.bind_cpu_input(k, v)
    back = np.full((2, 3), np.nan, np.float32)
    io.bind_output("back", "cpu", 0, np.float32, [2, 3], back.ctypes.data)
    io.bind_output("n")
    sess.run_with_iobinding(io)
    assert io.get_outputs()[0].data_ptr() == back.ctypes.data
    np.testing.assert_array_equal(back, ref[0])
    np.testing.assert_array_equal(io.get_outputs()[1].numpy(), ref[1])
    io.bind_output("seq")  # a sequence output can be returned, not bound to memory
    sess.run_with_iobinding(io)
    wrong = np.empty((2, 2), np.float32)
    io.bind_output("back", "cpu", 0, np.float32, [2, 2], wrong.ctypes.data)
    with pytest.raises(kiln.InvalidArgument, match=r"output 'back'.*\[2,3\].*\[2,2\]"):
        sess.run_with_iobinding(io)


def test_logger_severity_gates_kilns_own_warnings(mlp_model):
    so = kiln.SessionOptions()
    so.optimized_model_filepath = "ignored.onnx"
    with pytest.warns(UserWarning, match="optimized_model_filepath"):
        kiln.InferenceSession(mlp_model[0], so)
    kiln.set_default_logger_severity(3)
    try:
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            kiln.InferenceSession(mlp_model[0], so)
    finally:
        kiln.set_default_logger_severity(2)


def test_capi_state_classes_are_kilns():
    from kiln.capi import onnxruntime_pybind11_state as state
    assert state.InvalidArgument is kiln.InvalidArgument and state.Fail is kiln.Fail
    assert state.InvalidGraph is kiln.InvalidModel and state.RuntimeException is kiln.Fail
    assert issubclass(state.EPFail, kiln.Fail) and issubclass(state.NotFound, kiln.KilnError)
    assert state.SessionOptions is kiln.SessionOptions and state.OrtValue is kiln.OrtValue
