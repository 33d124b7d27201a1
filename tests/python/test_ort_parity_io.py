"""ORT parity of values and bindings (the `rt` fixture runs each test against onnxruntime and
kiln): OrtValue, run_with_ort_values, IOBinding (inputs and outputs bound to memory, outputs
written into preallocated buffers), run_async. Numbers are checked against numpy (small_models'
references) and ORT itself."""
import threading

import numpy as np
import pytest

from test_ort_parity import check_mlp_outputs


def _x(rows=3, seed=0):
    return np.random.default_rng(seed).standard_normal((rows, 16)).astype(np.float32)


# -- OrtValue --------------------------------------------------------------------------------------

def test_ortvalue_from_numpy_shares_memory(rt):
    a = np.arange(32, dtype=np.float32).reshape(2, 16)
    v = rt.mod.OrtValue.ortvalue_from_numpy(a)
    assert (v.shape(), v.data_type(), v.element_type()) == ([2, 16], "tensor(float)", 1)
    assert v.is_tensor() and v.has_value() and not v.is_tensor_sequence() and not v.is_sparse_tensor()
    assert v.device_name() == "cpu"
    assert v.tensor_size_in_bytes() == 128
    assert v.data_ptr() == a.ctypes.data
    n = v.numpy()
    n[0, 0] = 42  # numpy() is a view of the same memory
    assert a[0, 0] == 42
    np.testing.assert_array_equal(np.asarray(v), a)


@pytest.mark.parametrize("element_type, type_string, onnx_type", [
    (np.int64, "tensor(int64)", 7), (np.float64, "tensor(double)", 11), (np.bool_, "tensor(bool)", 9),
    (np.uint8, "tensor(uint8)", 2), (np.float16, "tensor(float16)", 10)])
def test_ortvalue_from_shape_and_type(rt, element_type, type_string, onnx_type):
    for et in (element_type, onnx_type):  # a numpy type or ONNX's integer
        v = rt.mod.OrtValue.ortvalue_from_shape_and_type([3, 4], et)
        assert (v.shape(), v.data_type(), v.element_type()) == ([3, 4], type_string, onnx_type)
        assert v.numpy().dtype == np.dtype(element_type) and v.numpy().shape == (3, 4)


def test_ortvalue_with_onnx_type_reinterprets_memory(rt):
    """uint16 bits as bfloat16 (ONNX type 16), no copy. (ORT's numpy() then refuses bfloat16;
    Kiln's gives ml_dtypes' bfloat16.)"""
    bits = np.array([0x3F80, 0x4000, 0xC040], np.uint16)  # 1.0, 2.0, -3.0
    v = rt.mod.OrtValue.ortvalue_from_numpy_with_onnx_type(bits, 16)
    assert (v.data_type(), v.element_type(), v.shape()) == ("tensor(bfloat16)", 16, [3])
    assert v.data_ptr() == bits.ctypes.data


def test_ortvalue_update_inplace(rt):
    v = rt.mod.OrtValue.ortvalue_from_shape_and_type([2, 3], np.float32)
    ptr = v.data_ptr()
    src = np.arange(6, dtype=np.float32).reshape(2, 3)
    v.update_inplace(src)
    assert v.data_ptr() == ptr
    np.testing.assert_array_equal(v.numpy(), src)


def test_run_with_ort_values(rt, mlp_model):
    path, _, reference = mlp_model
    sess = rt.mod.InferenceSession(path)
    x = _x()
    outs = sess.run_with_ort_values(["probs", "label"], {"x": rt.mod.OrtValue.ortvalue_from_numpy(x)})
    assert all(isinstance(o, rt.mod.OrtValue) for o in outs)
    assert [o.data_type() for o in outs] == ["tensor(float)", "tensor(int64)"]
    check_mlp_outputs([o.numpy() for o in outs], reference, x, names=("probs", "label"))
    all_outs = sess.run_with_ort_values(None, {"x": rt.mod.OrtValue.ortvalue_from_numpy(x)})
    assert [o.shape() for o in all_outs] == [[3, 4], [3, 4], [3]]


# -- IOBinding -------------------------------------------------------------------------------------

def test_iobinding_writes_into_preallocated_buffers(rt, mlp_model):
    """An output bound to a numpy buffer (by address) or an OrtValue is written there: the
    result's OrtValue is over that memory and holds the right numbers; an output bound by name
    only is allocated by the runtime."""
    path, _, reference = mlp_model
    sess = rt.mod.InferenceSession(path)
    x = _x(5, 1)
    io = sess.io_binding()
    io.bind_cpu_input("x", x)
    probs = np.full((5, 4), np.nan, np.float32)
    io.bind_output("probs", "cpu", 0, np.float32, list(probs.shape), probs.ctypes.data)
    logits = rt.mod.OrtValue.ortvalue_from_shape_and_type([5, 4], np.float32)
    io.bind_ortvalue_output("logits", logits)
    io.bind_output("label")
    sess.run_with_iobinding(io)
    io.synchronize_outputs()
    outs = io.get_outputs()
    assert [o.shape() for o in outs] == [[5, 4], [5, 4], [5]]  # in binding order
    assert outs[0].data_ptr() == probs.ctypes.data
    assert outs[1].data_ptr() == logits.data_ptr()
    check_mlp_outputs([probs, logits.numpy(), outs[2].numpy()], reference, x, names=("probs", "logits", "label"))
    # copy_outputs_to_cpu: copies, equal to the bound buffers
    copies = io.copy_outputs_to_cpu()
    assert copies[0].ctypes.data != probs.ctypes.data
    np.testing.assert_array_equal(copies[0], probs)
    # A second run with new input data in the same bound array writes the same buffers again.
    x[:] = _x(5, 2)
    sess.run_with_iobinding(io)
    check_mlp_outputs([probs, logits.numpy()], reference, x, names=("probs", "logits"))
    assert io.get_outputs()[0].data_ptr() == probs.ctypes.data


def test_iobinding_inputs_by_address_and_ortvalue(rt, mlp_model):
    path, _, reference = mlp_model
    sess = rt.mod.InferenceSession(path)
    x = _x(2, 3)
    io = sess.io_binding()
    io.bind_input("x", "cpu", 0, np.float32, list(x.shape), x.ctypes.data)
    io.bind_output("logits")
    sess.run_with_iobinding(io)
    check_mlp_outputs(io.copy_outputs_to_cpu(), reference, x, names=("logits",))
    io.clear_binding_inputs()
    y = _x(2, 4)
    io.bind_ortvalue_input("x", rt.mod.OrtValue.ortvalue_from_numpy(y))
    io.synchronize_inputs()
    sess.run_with_iobinding(io)
    check_mlp_outputs(io.copy_outputs_to_cpu(), reference, y, names=("logits",))


def test_iobinding_wrong_buffer_names_the_output(rt, mlp_model):
    """A preallocated buffer of the wrong shape or dtype is an error (a RuntimeError in both)
    with expected vs got, and the buffer is left as it was. Kiln names the output in both
    messages; ORT names it for the shape only."""
    sess = rt.mod.InferenceSession(mlp_model[0])
    x = _x(3, 5)
    for shape, dtype, got in (((3, 5), np.float32, "5"), ((3, 4), np.float64, "f64|double")):
        io = sess.io_binding()
        io.bind_cpu_input("x", x)
        buf = np.full(shape, -7, dtype)
        io.bind_output("probs", "cpu", 0, dtype, list(shape), buf.ctypes.data)
        with pytest.raises(RuntimeError, match=got) as e:
            sess.run_with_iobinding(io)
        if rt.name == "kiln" or dtype == np.float32:
            assert "probs" in str(e.value)
        assert (buf == -7).all()


def test_iobinding_needs_an_output_and_known_names(rt, mlp_model):
    sess = rt.mod.InferenceSession(mlp_model[0])
    io = sess.io_binding()
    io.bind_cpu_input("x", _x())
    with pytest.raises(RuntimeError, match="output"):
        sess.run_with_iobinding(io)  # no output bound
    with pytest.raises(RuntimeError, match="nope"):
        io.bind_output("nope")
        sess.run_with_iobinding(io)
    with pytest.raises(RuntimeError, match="nope"):
        io.bind_cpu_input("nope", _x())
    io.clear_binding_outputs()
    io.bind_output("label")
    io.clear_binding_inputs()
    with pytest.raises(RuntimeError, match="x"):  # no input bound
        sess.run_with_iobinding(io)


def test_bind_output_with_a_pointer_needs_type_and_shape(rt, mlp_model):
    io = rt.mod.InferenceSession(mlp_model[0]).io_binding()
    buf = np.empty((3, 4), np.float32)
    with pytest.raises(ValueError):
        io.bind_output("probs", "cpu", 0, None, None, buf.ctypes.data)


# -- run_async -------------------------------------------------------------------------------------

def _run_async(sess, feed, user_data, output_names=None):
    done = threading.Event()
    got = {}

    def callback(results, data, err):
        got.update(results=results, data=data, err=err, thread=threading.current_thread())
        done.set()

    assert sess.run_async(output_names, feed, callback, user_data) is None
    assert done.wait(30), "the callback was not called"
    return got


def test_run_async_calls_back_with_results(rt, mlp_model):
    path, _, reference = mlp_model
    sess = rt.mod.InferenceSession(path)
    x = _x(6, 6)
    marker = object()
    got = _run_async(sess, {"x": x}, marker)
    assert got["data"] is marker and got["err"] == ""
    assert got["thread"] is not threading.main_thread()
    check_mlp_outputs(got["results"], reference, x)
    got = _run_async(sess, {"x": x}, 7, output_names=["label"])
    check_mlp_outputs(got["results"], reference, x, names=("label",))


def test_run_async_reports_errors_to_the_callback(rt, mlp_model):
    sess = rt.mod.InferenceSession(mlp_model[0])
    got = _run_async(sess, {"x": np.zeros((3, 5), np.float32)}, "ud")
    assert got["results"] == [] and got["data"] == "ud"
    assert "x" in got["err"] and "5" in got["err"]
    with pytest.raises(ValueError, match="x"):  # a missing input raises at once
        sess.run_async(None, {}, lambda *a: None, None)


def test_run_async_many_at_once(rt, mlp_model):
    """16 runs in flight on one session; every callback gets its own input's result."""
    path, _, reference = mlp_model
    sess = rt.mod.InferenceSession(path)
    xs = [_x(1 + i % 3, 10 + i) for i in range(16)]
    results = [None] * 16
    remaining = threading.Semaphore(0)

    def callback(res, i, err):
        results[i] = (res, err)
        remaining.release()

    for i, x in enumerate(xs):
        sess.run_async(None, {"x": x}, callback, i)
    for _ in xs:
        assert remaining.acquire(timeout=60)
    for (res, err), x in zip(results, xs):
        assert err == ""
        check_mlp_outputs(res, reference, x)
