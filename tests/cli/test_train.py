"""Tests of `kiln train`: a tiny classifier learns (loss down, accuracy up, the exported model
runs under ONNX Runtime), bad flags and inputs are clear errors, and a run killed with SIGKILL
mid-epoch and resumed from its checkpoint ends with exactly the weights and loss curve of an
uninterrupted run.

References are independent of Kiln: the data's true classes (numpy), ONNX Runtime on the
exported model, and a second, uninterrupted Kiln run (for bit-identical resumption).
The binary is $KILN_BIN, or <repo>/build/bin/kiln.
"""
import csv
import fcntl
import os
import pathlib
import signal
import subprocess
import time

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
KILN = pathlib.Path(os.environ.get("KILN_BIN", REPO / "build" / "bin" / "kiln"))

pytestmark = pytest.mark.skipif(not KILN.is_file(), reason=f"kiln binary not built: {KILN}")

CLASSES = 3


def kiln(*args, timeout=300):
    return subprocess.run([str(KILN), *map(str, args)], capture_output=True, text=True, timeout=timeout)


def mlp(path, batch="N", seed=0):
    """x f32[batch,4] -> Gemm(4->8) -> Relu -> Gemm(8->3) -> logits f32[batch,3]."""
    rng = np.random.default_rng(seed)
    params = {"W1": rng.standard_normal((8, 4)) * 0.5, "b1": np.zeros(8),
              "W2": rng.standard_normal((CLASSES, 8)) * 0.5, "b2": np.zeros(CLASSES)}
    nodes = [helper.make_node("Gemm", ["x", "W1", "b1"], ["h"], transB=1),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "W2", "b2"], ["logits"], transB=1)]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, CLASSES])],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in params.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def blobs(path, n=240, seed=1, bad_label=None):
    """Three Gaussian clusters in 4-D; field x f32[4] and labels i64 per record."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((CLASSES, 4)) * 2
    labels = rng.integers(0, CLASSES, n)
    x = (centers[labels] + rng.standard_normal((n, 4)) * 0.5).astype(np.float32)
    if bad_label is not None:
        labels[n // 2] = bad_label
    np.savez(path, x=x, labels=labels.astype(np.int64))
    return path


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def initializers(path):
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}


def assert_clean_error(r, *needles):
    """A user error: non-zero exit, the message on stderr, no crash or traceback."""
    assert r.returncode not in (0, -6, -11, 134, 139), (r.returncode, r.stderr)
    assert r.returncode > 0, r.returncode
    for needle in needles:
        assert needle in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "terminate called" not in r.stderr and "bug in Kiln" not in r.stderr


@pytest.fixture
def setup(tmp_path):
    return mlp(tmp_path / "mlp.onnx"), blobs(tmp_path / "blobs.npz"), tmp_path


# ---- training works --------------------------------------------------------------------------

def test_loss_decreases_and_model_learns(setup):
    model, data, tmp = setup
    r = kiln("train", model, "--data", data, "--eval-split", "0.2", "--loss", "cross_entropy",
             "--optimizer", "adam", "--lr", "0.03", "--batch-size", "16", "--epochs", "4",
             "--metrics-csv", tmp / "m.csv", "--export", tmp / "out.onnx")
    assert r.returncode == 0, r.stderr
    rows = read_csv(tmp / "m.csv")
    train = [float(row["train_loss"]) for row in rows if row["train_loss"]]
    assert len(train) == 4 * (192 // 16)
    assert [int(row["step"]) for row in rows if row["train_loss"]] == list(range(1, len(train) + 1))
    assert np.mean(train[-5:]) < 0.5 * np.mean(train[:5]), train
    evals = [row for row in rows if row["eval_loss"]]
    assert len(evals) == 4 and float(evals[-1]["eval_loss"]) < float(evals[0]["eval_loss"])
    assert "eval: loss" in r.stderr and "accuracy" in r.stderr

    # The exported model under ONNX Runtime: its accuracy on the held-out records (the last 20%)
    # is what kiln's eval line reports, and the clusters are learned.
    ort = pytest.importorskip("onnxruntime")
    d = np.load(data)
    x, y = d["x"][192:], d["labels"][192:]
    logits = ort.InferenceSession(str(tmp / "out.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    acc = float((logits.argmax(1) == y).mean())
    assert acc > 0.9, acc
    assert abs(float(evals[-1]["eval_accuracy"]) - acc) < 1e-9
    # The eval loss is the mean cross-entropy over the 48 held-out records (numpy reference).
    z = logits - logits.max(1, keepdims=True)
    ce = np.mean(np.log(np.exp(z).sum(1)) - z[np.arange(len(y)), y])
    assert abs(float(evals[-1]["eval_loss"]) - ce) < 1e-4 * max(1.0, ce)


def test_partial_eval_batch_counts_every_record(setup):
    """45 eval records with batch 16: the last batch is padded, the loss and accuracy cover
    exactly the 45 records."""
    model, data, tmp = setup
    d = np.load(data)
    np.savez(tmp / "eval.npz", x=d["x"][:45], labels=d["labels"][:45])
    r = kiln("train", model, "--data", data, "--eval-data", tmp / "eval.npz", "--optimizer", "sgd",
             "--lr", "0.1", "--batch-size", "16", "--epochs", "1", "--metrics-csv", tmp / "m.csv",
             "--export", tmp / "out.onnx")
    assert r.returncode == 0, r.stderr
    assert "(45 records)" in r.stderr
    ort = pytest.importorskip("onnxruntime")
    logits = ort.InferenceSession(str(tmp / "out.onnx"), providers=["CPUExecutionProvider"]).run(
        None, {"x": d["x"][:45]})[0]
    y = d["labels"][:45]
    z = logits - logits.max(1, keepdims=True)
    ce = np.mean(np.log(np.exp(z).sum(1)) - z[np.arange(45), y])
    row = [row for row in read_csv(tmp / "m.csv") if row["eval_loss"]][-1]
    assert abs(float(row["eval_loss"]) - ce) < 1e-4
    assert abs(float(row["eval_accuracy"]) - float((logits.argmax(1) == y).mean())) < 1e-9


# ---- clear errors ----------------------------------------------------------------------------

def test_missing_data_file(setup):
    model, _, tmp = setup
    r = kiln("train", model, "--data", tmp / "nope.npz", "--batch-size", "8")
    assert_clean_error(r, "nope.npz", "no such file")


def test_label_out_of_range(setup):
    model, _, tmp = setup
    data = blobs(tmp / "bad.npz", bad_label=7)
    r = kiln("train", model, "--data", data, "--batch-size", "8", "--epochs", "1", "--no-shuffle")
    assert_clean_error(r, "label 7 out of range", "3 classes")


def test_unknown_optimizer(setup):
    model, data, _ = setup
    r = kiln("train", model, "--data", data, "--optimizer", "adagrad")
    assert_clean_error(r, "--optimizer")
    assert "adagrad" in r.stderr


def test_batch_size_mismatch_with_fixed_batch(setup):
    _, data, tmp = setup
    model = mlp(tmp / "fixed.onnx", batch=8)
    r = kiln("train", model, "--data", data, "--batch-size", "16")
    assert_clean_error(r, "--batch-size 16", "fixed at 8")
    ok = kiln("train", model, "--data", data, "--batch-size", "8", "--epochs", "1")
    assert ok.returncode == 0, ok.stderr


def test_resume_without_checkpoint(setup):
    model, data, tmp = setup
    r = kiln("train", model, "--data", data, "--checkpoint-dir", tmp / "ck", "--resume")
    assert_clean_error(r, "--resume: no checkpoint")


def test_bad_field_and_wrong_loss_output(setup):
    model, data, tmp = setup
    r = kiln("train", model, "--data", data, "--label-name", "target")
    assert_clean_error(r, "--label-name target", "labels i64")
    r = kiln("train", model, "--data", data, "--loss-output", "probs")
    assert_clean_error(r, "probs", "logits")


# ---- SIGKILL and --resume ---------------------------------------------------------------------

def train_args(model, data, tmp, name, *extra):
    return ["train", model, "--data", data, "--eval-split", "0.25", "--optimizer", "adam", "--lr", "0.01",
            "--schedule", "cosine", "--warmup", "5", "--batch-size", "4", "--epochs", "6", "--seed", "7",
            "--metrics-csv", tmp / f"{name}.csv", "--export", tmp / f"{name}.onnx", *extra]


def test_sigkill_then_resume_matches_uninterrupted_run(tmp_path):
    model = mlp(tmp_path / "mlp.onnx")
    data = blobs(tmp_path / "blobs.npz", n=480)
    ref = kiln(*train_args(model, data, tmp_path, "ref"))
    assert ref.returncode == 0, ref.stderr

    ckdir = tmp_path / "ck"
    args = [str(a) for a in train_args(model, data, tmp_path, "run", "--checkpoint-dir", ckdir,
                                         "--checkpoint-every", "1", "--log-every", "1")]
    # Killable by construction: the run's stderr is a pipe of one page that this test reads. It
    # prints a line per step (~70 bytes), so it blocks in a write at most ~60 steps past the last
    # line read; the test stops reading inside epoch 2 (line 100 of 540 steps), so the run can
    # never finish before the SIGKILL, however fast the machine.
    r, w = os.pipe()
    fcntl.fcntl(w, getattr(fcntl, "F_SETPIPE_SZ", 1031), 4096)
    proc = subprocess.Popen([str(KILN), *args], stdout=subprocess.DEVNULL, stderr=w)
    os.close(w)
    lines = 0
    with os.fdopen(r, "rb") as err:
        deadline = time.time() + 120
        while time.time() < deadline and err.readline():
            lines += 1
            if lines >= 100 and (ckdir / "checkpoint.kiln").exists():
                break
        assert proc.poll() is None, f"the run ended after {lines} lines of stderr, before the kill"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert (ckdir / "checkpoint.kiln").exists(), f"no checkpoint after {lines} steps"
    assert not (tmp_path / "run.onnx").exists()

    resumed = kiln(*train_args(model, data, tmp_path, "run", "--checkpoint-dir", ckdir, "--checkpoint-every", "1",
                               "--resume"))
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from" in resumed.stderr

    want, got = initializers(tmp_path / "ref.onnx"), initializers(tmp_path / "run.onnx")
    assert want.keys() == got.keys()
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    # The CSV continues: the same steps in order, the same losses, evaluations and learning rates.
    cols = ["epoch", "step", "train_loss", "eval_loss", "eval_accuracy", "lr"]
    ref_rows = [[row[c] for c in cols] for row in read_csv(tmp_path / "ref.csv")]
    run_rows = [[row[c] for c in cols] for row in read_csv(tmp_path / "run.csv")]
    assert run_rows == ref_rows


def test_resume_of_a_finished_run_only_exports(setup):
    model, data, tmp = setup
    base = ["train", model, "--data", data, "--batch-size", "16", "--epochs", "1", "--checkpoint-dir", tmp / "ck"]
    assert kiln(*base, "--export", tmp / "a.onnx").returncode == 0
    r = kiln(*base, "--resume", "--export", tmp / "b.onnx")
    assert r.returncode == 0, r.stderr
    a, b = initializers(tmp / "a.onnx"), initializers(tmp / "b.onnx")
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


# ---- data options, progress display, the training memory plan -------------------------------

def test_normalize_is_the_affine_map_of_the_data(setup):
    """--normalize 1,2 on x trains exactly as no flag on (x - 1) / 2 written by numpy."""
    model, data, tmp = setup
    d = np.load(data)
    np.savez(tmp / "pre.npz", x=((d["x"] - np.float32(1)) / np.float32(2)).astype(np.float32), labels=d["labels"])
    common = ["--optimizer", "sgd", "--lr", "0.1", "--batch-size", "16", "--epochs", "2", "--seed", "3"]
    a = kiln("train", model, "--data", data, "--normalize", "1,2", *common, "--export", tmp / "a.onnx")
    b = kiln("train", model, "--data", tmp / "pre.npz", *common, "--export", tmp / "b.onnx")
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    wa, wb = initializers(tmp / "a.onnx"), initializers(tmp / "b.onnx")
    for name in wa:
        np.testing.assert_array_equal(wa[name], wb[name], err_msg=name)


def test_random_flip_changes_training_deterministically(setup):
    model, data, tmp = setup
    common = ["--data", data, "--optimizer", "sgd", "--lr", "0.1", "--batch-size", "16", "--epochs", "1"]
    runs = [kiln("train", model, *common, *flags, "--export", tmp / f"{i}.onnx")
            for i, flags in enumerate([["--random-flip"], ["--random-flip"], []])]
    assert all(r.returncode == 0 for r in runs), [r.stderr for r in runs]
    w = [initializers(tmp / f"{i}.onnx")["W1"] for i in range(3)]
    np.testing.assert_array_equal(w[0], w[1])
    assert not np.array_equal(w[0], w[2])


def test_progress_redraws_in_place_on_a_terminal(setup):
    import pty
    model, data, _ = setup
    master, slave = pty.openpty()
    proc = subprocess.Popen([str(KILN), "train", str(model), "--data", str(data), "--batch-size", "16",
                             "--epochs", "2"], stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(timeout=120) == 0
    text = out.decode()
    assert "\r" in text and "\x1b[K" in text and "epoch 2/2" in text and "samples/s" in text


def test_progress_lines_when_not_a_terminal(setup):
    model, data, _ = setup
    r = kiln("train", model, "--data", data, "--batch-size", "16", "--epochs", "1", "--log-every", "3")
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.startswith("epoch 1/1 step")]
    assert [line.split()[3] for line in lines] == ["3/15", "6/15", "9/15", "12/15", "15/15"]
    assert "\r" not in r.stderr


def test_inspect_memory_of_the_training_step(setup):
    model, _, _ = setup
    peaks = []
    for batch in (8, 64):
        r = kiln("inspect", model, "--memory", "--train", "--batch-size", batch, "--optimizer", "adam")
        assert r.returncode == 0, r.stderr
        peaks.append(int(r.stdout.split("training step peak (planned intermediates): ")[1].split()[0]))
    assert 0 < peaks[0] < peaks[1]
    # The hidden layer h f32[64,8] alone is 2 KiB: the plan at batch 64 holds at least it.
    assert peaks[1] >= 64 * 8 * 4


def test_fields_cast_to_the_input_dtypes(setup):
    """x stored as f64 and labels as i32 train exactly as f32 / i64 (exactly representable data)."""
    model, data, tmp = setup
    d = np.load(data)
    np.savez(tmp / "wide.npz", x=d["x"].astype(np.float64), labels=d["labels"].astype(np.int32))
    common = ["--optimizer", "sgd", "--lr", "0.1", "--batch-size", "16", "--epochs", "1"]
    a = kiln("train", model, "--data", data, *common, "--export", tmp / "a.onnx")
    b = kiln("train", model, "--data", tmp / "wide.npz", *common, "--export", tmp / "b.onnx")
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    wa, wb = initializers(tmp / "a.onnx"), initializers(tmp / "b.onnx")
    for name in wa:
        np.testing.assert_array_equal(wa[name], wb[name], err_msg=name)
