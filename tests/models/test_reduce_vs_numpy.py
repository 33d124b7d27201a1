"""Reduce* and ArgMax/ArgMin against numpy (float64 for sums) on the layouts whose kernels differ
(op/defs/flat_reduce.h): long rows split over lanes and parallel chunks with a leftover tail
(odd lengths), short rows whose lanes combine in a tree, several trailing axes flattened, every axis, rows of a matrix, leading axes with
the last kept (the column schedule), a mixed axis set (the plain reduction), keepdims both ways,
noop_with_empty_axes, NaN propagation, float16 and integer inputs; ArgMax/ArgMin with ties both ways.

Each test builds one model holding all its cases (one compile, one `kiln run`), at 1 and 2
threads (the chunks of a long row run in parallel)."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from kiln_helpers import kiln_run_model

LONG = (1 << 17) + 7  # two chunks of the flat form and a tail of leftovers

# (name, op, shape, axes (None: input omitted), keepdims, noop_with_empty_axes, dtype)
REDUCE_CASES = [
    ("max_long_row", "ReduceMax", (1, LONG), [1], 1, 0, np.float32),
    ("sum_long_row_nokeep", "ReduceSum", (1, LONG), [-1], 0, 0, np.float32),
    ("mean_long_1d", "ReduceMean", (LONG,), [0], 1, 0, np.float32),
    ("min_rows", "ReduceMin", (5, 4099), [1], 1, 0, np.float32),
    ("sum_trailing_two_axes", "ReduceSum", (3, 50, 67), [1, 2], 0, 0, np.float32),
    ("mean_all_axes", "ReduceMean", (37, 1031), None, 0, 0, np.float32),
    ("l2_long", "ReduceL2", (2, 70001), [1], 1, 0, np.float32),
    ("logsumexp_long", "ReduceLogSumExp", (1, 50021), [1], 1, 0, np.float32),
    ("sum_square_all", "ReduceSumSquare", (64, 333), None, 1, 0, np.float32),
    ("max_axis0_cols", "ReduceMax", (1000, 77), [0], 1, 0, np.float32),
    ("sum_axis0_wide", "ReduceSum", (300, 1024), [0], 0, 0, np.float32),
    ("mean_leading_two", "ReduceMean", (20, 30, 40), [0, 1], 1, 0, np.float32),
    ("max_mixed_axes", "ReduceMax", (6, 7, 40), [0, 2], 0, 0, np.float32),
    ("sum_noop_empty_axes", "ReduceSum", (3, 41), [], 1, 1, np.float32),
    ("sum_int32_long", "ReduceSum", (2, 40009), [1], 0, 0, np.int32),
    ("max_int64_cols", "ReduceMax", (129, 33), [0], 1, 0, np.int64),
    ("max_long_with_nan_mid", "ReduceMax", (2, 30011), [1], 1, 0, np.float32),
    ("sum_rows_tail", "ReduceSum", (9, 1000), [1], 1, 0, np.float32),
    ("max_short_rows_tail", "ReduceMax", (33, 130), [-1], 0, 0, np.float32),
    ("min_short_rows_nan_tail", "ReduceMin", (4, 100), [1], 1, 0, np.float32),
    ("sum_f16_long", "ReduceSum", (2, 5003), [1], 1, 0, np.float16),
]


def _ref(op, x, axes, keepdims, noop):
    if noop and axes == []:
        return x
    ax = None if not axes else tuple(axes)
    keep = bool(keepdims)
    xd = x.astype(np.float64) if x.dtype.kind == "f" else x.astype(np.int64)
    if op == "ReduceMax":
        return np.max(x, axis=ax, keepdims=keep)
    if op == "ReduceMin":
        return np.min(x, axis=ax, keepdims=keep)
    if op == "ReduceSum":
        return np.sum(xd, axis=ax, keepdims=keep)
    if op == "ReduceMean":
        return np.mean(xd, axis=ax, keepdims=keep)
    if op == "ReduceL2":
        return np.sqrt(np.sum(xd * xd, axis=ax, keepdims=keep))
    if op == "ReduceSumSquare":
        return np.sum(xd * xd, axis=ax, keepdims=keep)
    if op == "ReduceLogSumExp":
        return np.log(np.sum(np.exp(xd), axis=ax, keepdims=keep))
    raise AssertionError(op)


def _onnx_type(dt):
    return {np.float32: TensorProto.FLOAT, np.float16: TensorProto.FLOAT16,
            np.int32: TensorProto.INT32, np.int64: TensorProto.INT64}[dt]


def _save(path, nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, str(path))


def _run(tmp_path, model, feed, threads):
    np.savez(tmp_path / "in.npz", **feed)
    out = tmp_path / f"out{threads}"
    out.mkdir()
    outs, _ = kiln_run_model(str(model), str(tmp_path / "in.npz"), str(out),
                             extra=["--repeat", "1", "--threads", str(threads)])
    return outs


@pytest.fixture(scope="module")
def reduce_model(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("reduce")
    rng = np.random.default_rng(24)
    nodes, inputs, outputs, inits, feed, refs = [], [], [], [], {}, {}
    for name, op, shape, axes, keep, noop, dt in REDUCE_CASES:
        if dt in (np.float32, np.float16):
            x = rng.standard_normal(shape).astype(dt)
            if "nan" in name:  # row 1 holds a NaN (in the middle or among the leftovers)
                x[1, shape[-1] // 2 if "mid" in name else shape[-1] - 2] = np.nan
        else:
            x = rng.integers(-1000, 1000, size=shape).astype(dt)
        ins = ["x_" + name]
        if axes is not None:
            inits.append(numpy_helper.from_array(np.array(axes, np.int64), "axes_" + name))
            ins.append("axes_" + name)
        attrs = {"keepdims": keep}
        if noop:
            attrs["noop_with_empty_axes"] = 1
        nodes.append(helper.make_node(op, ins, ["y_" + name], **attrs))
        ref = _ref(op, x, axes, keep, noop)
        inputs.append(helper.make_tensor_value_info("x_" + name, _onnx_type(dt), list(shape)))
        outputs.append(helper.make_tensor_value_info("y_" + name, _onnx_type(dt), list(ref.shape)))
        feed["x_" + name], refs["y_" + name] = x, ref
    model = tmp / "reduce.onnx"
    _save(model, nodes, inputs, outputs, inits)
    return tmp, model, feed, refs


@pytest.mark.parametrize("threads", [1, 2])
def test_reductions_match_numpy(reduce_model, threads):
    tmp, model, feed, refs = reduce_model
    outs = _run(tmp, model, feed, threads)
    for name, ref in refs.items():
        got = outs[name]
        assert got.shape == ref.shape, f"{name}: shape {got.shape} vs {ref.shape}"
        if got.dtype.kind in "iu":
            np.testing.assert_array_equal(got, ref, err_msg=name)
        elif "max" in name or "min" in name:  # exact, NaN where numpy has NaN
            np.testing.assert_array_equal(got, ref.astype(np.float32), err_msg=name)
        elif got.dtype == np.float16:  # f32 partials, one rounding to f16 at the end
            np.testing.assert_allclose(got, ref, rtol=1e-3, atol=2e-2, err_msg=name)
        else:  # reassociated float sums: a relative bound of a few ulps per element's share
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3, err_msg=name)
    for name in ("y_max_long_with_nan_mid", "y_min_short_rows_nan_tail"):
        assert np.isnan(outs[name][1, 0]) and not np.isnan(outs[name][0, 0]), name


# (name, op, shape, axis, keepdims, select_last_index)
ARG_CASES = [
    ("argmax_long_row", "ArgMax", (1, LONG), -1, 1, 0),
    ("argmin_rows_nokeep", "ArgMin", (7, 3001), 1, 0, 0),
    ("argmax_ties_first", "ArgMax", (3, 20011), 1, 1, 0),
    ("argmax_ties_last", "ArgMax", (3, 20011), 1, 1, 1),
    ("argmin_ties_last_axis0", "ArgMin", (999, 40), 0, 0, 1),
    ("argmax_axis0_cols", "ArgMax", (500, 130), 0, 1, 0),
]


def _arg_ref(op, x, axis, keep, last):
    f = np.argmax if op == "ArgMax" else np.argmin
    if last:  # numpy returns the first: flip the axis and map back
        r = x.shape[axis] - 1 - f(np.flip(x, axis=axis), axis=axis)
    else:
        r = f(x, axis=axis)
    return np.expand_dims(r, axis) if keep else r


@pytest.mark.parametrize("threads", [1, 2])
def test_arg_reductions_match_numpy(tmp_path, threads):
    rng = np.random.default_rng(7)
    nodes, inputs, outputs, feed, refs = [], [], [], {}, {}
    for name, op, shape, axis, keep, last in ARG_CASES:
        if "ties" in name:  # few distinct values: the extreme occurs many times per row
            x = rng.integers(0, 5, size=shape).astype(np.float32)
        else:
            x = rng.standard_normal(shape).astype(np.float32)
        nodes.append(helper.make_node(op, ["x_" + name], ["y_" + name], axis=axis, keepdims=keep,
                                      select_last_index=last))
        ref = _arg_ref(op, x, axis, keep, last)
        inputs.append(helper.make_tensor_value_info("x_" + name, TensorProto.FLOAT, list(shape)))
        outputs.append(helper.make_tensor_value_info("y_" + name, TensorProto.INT64, list(ref.shape)))
        feed["x_" + name], refs["y_" + name] = x, ref
    model = tmp_path / "arg.onnx"
    _save(model, nodes, inputs, outputs, [])
    outs = _run(tmp_path, model, feed, threads)
    for name, ref in refs.items():
        np.testing.assert_array_equal(outs[name], ref, err_msg=name)
