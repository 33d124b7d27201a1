"""Shared helpers of the model tests: locating and running the Kiln CLI, running ONNX Runtime.

The Kiln CLI is `$KILN_BIN` (default `<repo>/build/bin/kiln`):
    kiln run MODEL.onnx --inputs FILE.npz --output-dir DIR [--dim NAME=VALUE]... [--repeat N]
        [--threads N]
which writes DIR/<output name>.npy for each graph output.
"""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "scripts"))

import make_models  # noqa: E402  (scripts/make_models.py)

RTOL = 1e-4
ATOL = 1e-5
KILN_TIMEOUT_S = 900   # first compiles of resnet18 invoke the system C compiler many times


def kiln_bin():
    """Path of the Kiln CLI; fails the test (not skip) when it has not been built."""
    path = os.environ.get("KILN_BIN", os.path.join(REPO, "build", "bin", "kiln"))
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.fail(f"Kiln CLI not found at {path}: build it (ninja -C build kiln) or point "
                    f"KILN_BIN at the binary", pytrace=False)
    return path


def run_kiln(args, env=None, timeout=KILN_TIMEOUT_S):
    """Runs `kiln ARGS...`; returns the CompletedProcess (text mode, output captured)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([kiln_bin()] + [str(a) for a in args], capture_output=True, text=True,
                          env=full_env, timeout=timeout)


def kiln_has_dnnl():
    """Whether the kiln binary was built with oneDNN (`kiln --version` says)."""
    return "(oneDNN kernels)" in run_kiln(["--version"]).stdout


def kiln_run_model(model, inputs, out_dir, dims=None, extra=()):
    """`kiln run` that must succeed; returns ({output name: array}, CompletedProcess)."""
    args = ["run", model, "--inputs", inputs, "--output-dir", out_dir]
    for k, v in (dims or {}).items():
        args += ["--dim", f"{k}={v}"]
    args += list(extra)
    proc = run_kiln(args)
    assert proc.returncode == 0, (f"kiln {' '.join(map(str, args))} exited {proc.returncode}\n"
                                  f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    outs = {}
    for f in os.listdir(out_dir):
        if f.endswith(".npy"):
            outs[f[:-4]] = np.load(os.path.join(out_dir, f))
    return outs, proc


def ort_outputs(model, feed, threads=1):
    return make_models.ort_run(model, feed, threads)


def load_npz(path):
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def assert_matches_ort(kiln_outs, ort_outs, label, rtol=RTOL, atol=ATOL):
    """Every ORT output must be present in Kiln's outputs with the same shape and dtype, equal
    for integer outputs and within rtol/atol (default RTOL/ATOL) for floats."""
    for name, ref in ort_outs.items():
        assert name in kiln_outs, f"{label}: kiln wrote no {name}.npy (wrote {sorted(kiln_outs)})"
        got = kiln_outs[name]
        assert got.shape == ref.shape, \
            f"{label}/{name}: expected shape {ref.shape}, got {got.shape}"
        assert got.dtype == ref.dtype, \
            f"{label}/{name}: expected dtype {ref.dtype}, got {got.dtype}"
        if ref.dtype.kind in "iub":
            np.testing.assert_array_equal(got, ref, err_msg=f"{label}/{name}")
        else:
            np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol, err_msg=f"{label}/{name}")


MEDIAN_RE = re.compile(r"median\s+([0-9.]+)\s*ms")


def parse_median_ms(text):
    """The `median X.XX ms` line `kiln run --repeat N` prints, or None."""
    m = MEDIAN_RE.search(text)
    return float(m.group(1)) if m else None


def ort_quantize_static(quantization, f32, q, shape, rng):
    """ONNX Runtime's quantize_static (module `quantization`) of `f32` into `q`: QDQ, per-channel
    s8 weights, u8 activations, calibrated on 8 normal inputs `x` of `shape` drawn from `rng`."""

    class Reader(quantization.CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(8)])

        def get_next(self):
            return next(self.it, None)

    quantization.quantize_static(f32, q, Reader(), quant_format=quantization.QuantFormat.QDQ, per_channel=True,
                                 activation_type=quantization.QuantType.QUInt8,
                                 weight_type=quantization.QuantType.QInt8)
