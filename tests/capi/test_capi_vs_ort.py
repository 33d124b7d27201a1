"""The C API end to end: tests/capi/run_model.c (a C99 program linked with -lkiln) runs models
and writes its outputs as .npy; ONNX Runtime runs the same models on the same inputs.

The program is `$KILN_RUN_MODEL` (default `<repo>/build/bin/run_model`).
"""
import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "scripts"))

import make_models  # noqa: E402  (scripts/make_models.py)

DIGITS = os.path.join(REPO, "models", "digits")


def run_model_bin():
    path = os.environ.get("KILN_RUN_MODEL", os.path.join(REPO, "build", "bin", "run_model"))
    if not os.access(path, os.X_OK):
        pytest.fail(f"C API program not found at {path}: build it (ninja -C build capi_run_model)",
                    pytrace=False)
    return path


def run_c(model, feed, tmp_path, dims=None, extra=()):
    """Runs the C program on `feed` (saved as .npy); returns ({output: array}, stdout)."""
    args = [run_model_bin(), str(model), "--output-dir", str(tmp_path)]
    for name, value in feed.items():
        path = tmp_path / f"input_{name}.npy"
        np.save(path, np.ascontiguousarray(value))
        args += ["--input", f"{name}={path}"]
    for k, v in (dims or {}).items():
        args += ["--dim", f"{k}={v}"]
    proc = subprocess.run(args + list(extra), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    outs = {f[:-4]: np.load(tmp_path / f) for f in os.listdir(tmp_path)
            if f.endswith(".npy") and not f.startswith("input_")}
    return outs, proc.stdout


def ort_outputs(model, feed):
    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feed)))


def assert_matches_ort(got, ref):
    assert sorted(got) == sorted(ref)
    for name, r in ref.items():
        assert got[name].dtype == r.dtype, f"{name}: dtype {got[name].dtype}, ORT {r.dtype}"
        assert got[name].shape == r.shape, f"{name}: shape {got[name].shape}, ORT {r.shape}"
        if np.issubdtype(r.dtype, np.floating):
            np.testing.assert_allclose(got[name], r, rtol=1e-4, atol=1e-5, err_msg=name)
        else:
            np.testing.assert_array_equal(got[name], r, err_msg=name)


@pytest.mark.parametrize("n", [1, 37])
def test_digits_matches_ort(tmp_path, n):
    images = np.load(os.path.join(DIGITS, "test_images.npz"))["image"][:n]
    labels = np.load(os.path.join(DIGITS, "test_labels.npy"))[:n]
    model = os.path.join(DIGITS, "digits_cnn.onnx")
    feed = {"image": images}
    got, stdout = run_c(model, feed, tmp_path, dims={"N": n})
    assert f"probabilities: dtype 1 shape [{n},10]" in stdout
    assert_matches_ort(got, ort_outputs(model, feed))
    if n > 10:  # the trained model: most held-out digits right
        assert (got["digit"] == labels).mean() > 0.9


@pytest.mark.parametrize("name", ["mlp", "two_input_mix"])
def test_generated_models_match_ort(tmp_path, name):
    models = tmp_path / "models"
    path = make_models.write_test_model(name, str(models), check=False)
    feed = dict(np.load(models / f"{name}_inputs.npz"))
    out = tmp_path / "out"
    out.mkdir()
    got, _ = run_c(path, feed, out, extra=["--threads", "2"])
    assert_matches_ort(got, ort_outputs(path, feed))


def test_errors_reach_the_c_program(tmp_path):
    model = os.path.join(DIGITS, "digits_cnn.onnx")
    bad = tmp_path / "image.npy"
    np.save(bad, np.zeros((2, 1, 8, 9), np.float32))
    proc = subprocess.run([run_model_bin(), model, "--input", f"image={bad}"], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 1
    assert "kiln_session_run failed (InvalidArgument)" in proc.stderr
    assert "input 'image': expected shape f32[N,1,8,8], got [2,1,8,9]" in proc.stderr
