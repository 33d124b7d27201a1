"""The dataflow executor against the sequential one, and the profiler's outputs, through the CLI.

Every test model of scripts/make_models.py (and the digits CNN) runs under
`kiln run --executor sequential` and `--executor dataflow --inter-op-threads 2`; outputs must be
bitwise equal (each kernel's math does not depend on scheduling). The Chrome trace written by
`--profile` must parse as JSON with one complete event per kernel launch per run.
"""
import json
import os

import numpy as np
import pytest

from kiln_helpers import REPO, kiln_run_model, make_models, run_kiln

DIGITS = os.path.join(REPO, "models", "digits")


def _model_files(models_dir, name):
    return str(models_dir / f"{name}.onnx"), str(models_dir / f"{name}_inputs.npz")


def _assert_bitwise_equal(a, b, label):
    assert sorted(a) == sorted(b), f"{label}: outputs {sorted(a)} vs {sorted(b)}"
    for name in a:
        assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape, f"{label}/{name}"
        assert a[name].tobytes() == b[name].tobytes(), f"{label}/{name}: outputs differ bitwise"


def _run_both(model, inputs, tmp_path, dims=None):
    seq, p1 = kiln_run_model(model, inputs, str(tmp_path / "seq"), dims=dims,
                             extra=["--executor", "sequential", "--threads", "2", "--repeat", "1"])
    dfl, p2 = kiln_run_model(model, inputs, str(tmp_path / "dataflow"), dims=dims,
                             extra=["--executor", "dataflow", "--threads", "2",
                                    "--inter-op-threads", "2", "--repeat", "3"])
    assert "executor sequential" in p1.stdout, p1.stdout
    assert "executor dataflow" in p2.stdout, p2.stdout
    return seq, dfl


@pytest.mark.parametrize("name", list(make_models.TEST_MODELS))
def test_dataflow_bitwise_equals_sequential(models_dir, tmp_path, name):
    model, inputs = _model_files(models_dir, name)
    seq, dfl = _run_both(model, inputs, tmp_path)
    _assert_bitwise_equal(seq, dfl, name)


def test_dataflow_bitwise_equals_sequential_digits(tmp_path):
    model = os.path.join(DIGITS, "digits_cnn.onnx")
    images = os.path.join(DIGITS, "test_images.npz")
    seq, dfl = _run_both(model, images, tmp_path, dims={"N": 360})
    _assert_bitwise_equal(seq, dfl, "digits")


def test_auto_picks_sequential_for_a_chain_and_one_inter_op_thread(models_dir, tmp_path):
    model, inputs = _model_files(models_dir, "mlp")
    _, proc = kiln_run_model(model, inputs, str(tmp_path),
                             extra=["--executor", "auto", "--inter-op-threads", "4", "--repeat", "1"])
    assert "executor sequential" in proc.stdout, proc.stdout
    model, inputs = _model_files(models_dir, "resnet18")
    _, proc = kiln_run_model(model, inputs, str(tmp_path / "r1"),
                             extra=["--executor", "auto", "--inter-op-threads", "1", "--repeat", "1"])
    assert "executor sequential" in proc.stdout, proc.stdout
    # ResNet-18's downsampling shortcuts run beside the main branch: width 2 (at -O0, where
    # the shortcut's BatchNormalization is a step of its own beside the main branch's).
    _, proc = kiln_run_model(model, inputs, str(tmp_path / "r2"),
                             extra=["--executor", "auto", "--inter-op-threads", "2", "--repeat", "1", "-O0"])
    assert "executor dataflow" in proc.stdout and "parallel width 2" in proc.stdout, proc.stdout


@pytest.mark.parametrize("executor", ["sequential", "dataflow"])
def test_profile_trace_parses_with_one_event_per_kernel_per_run(models_dir, tmp_path, executor):
    model, inputs = _model_files(models_dir, "small_cnn")
    trace = tmp_path / "trace.json"
    _, proc = kiln_run_model(model, inputs, str(tmp_path / "out"),
                             extra=["--executor", executor, "--inter-op-threads", "2", "--repeat", "2",
                                    "--profile", str(trace), "--profile-summary"])
    with open(trace) as f:
        doc = json.load(f)
    events = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    runs = sorted({e["args"]["run"] for e in events})
    assert runs == [0, 1, 2], runs  # warm-up + 2 timed runs
    per_run = [sorted(e["args"]["step"] for e in events if e["args"]["run"] == r) for r in runs]
    assert per_run[0] and all(p == list(range(len(per_run[0]))) for p in per_run), per_run
    names = {e["name"] for e in events}
    assert any("Conv" in n for n in names), names  # "Conv+Relu": a fused kernel's ops
    for e in events:
        assert e["dur"] >= 0 and e["ts"] >= 0 and e["pid"] == 1 and isinstance(e["tid"], int), e
        assert e["args"]["bytes"] > 0 and "f32[" in e["args"]["shapes"], e
    conv = next(e for e in events if "Conv" in e["name"])
    assert conv["args"]["flops"] > 0
    threads = {e["tid"] for e in doc["traceEvents"] if e["ph"] == "M"}
    assert {e["tid"] for e in events} == threads
    # The summary table: header, ranked rows, and the total line.
    assert "GFLOP/s" in proc.stdout and "share" in proc.stdout, proc.stdout
    # Three runs, the warm-up left out of the summary (the trace keeps it).
    assert "kernel time" in proc.stdout and "2 runs (the warm-up run left out)" in proc.stdout, proc.stdout


def test_profile_to_unwritable_path_is_an_error(models_dir, tmp_path):
    model, inputs = _model_files(models_dir, "mlp")
    proc = run_kiln(["run", model, "--inputs", inputs, "--repeat", "1",
                     "--profile", "/nonexistent_dir/trace.json"])
    assert proc.returncode == 1
    assert "cannot write profile '/nonexistent_dir/trace.json'" in proc.stderr, proc.stderr


def test_bad_executor_name_is_a_usage_error(models_dir):
    model, inputs = _model_files(models_dir, "mlp")
    proc = run_kiln(["run", model, "--executor", "parallel"])
    assert proc.returncode == 2
    assert "--executor" in proc.stderr, proc.stderr
