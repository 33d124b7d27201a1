"""Fixtures of tests/training: the PyTorch references (torch_reference.py run by /usr/bin/python3,
which has torch; this interpreter does not), cached by the script's hash, so only the first run
after a change to it pays for PyTorch."""
import hashlib
import os
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TORCH_PYTHON = "/usr/bin/python3"
MODELS = ["mlp", "digits", "resnet", "transformer"]


def torch_available():
    try:
        return subprocess.run([TORCH_PYTHON, "-c", "import torch"], capture_output=True).returncode == 0
    except OSError:
        return False


def _cache_dir():
    with open(os.path.join(HERE, "torch_reference.py"), "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    base = os.environ.get("KILN_TRAINING_REFS", os.path.join(ROOT, "build", "training_refs"))
    return os.path.join(base, digest)


@pytest.fixture(scope="session")
def torch_refs():
    """The directory holding <model>.onnx (BatchNormalization made inference-mode) and
    <model>.npz for every model in MODELS."""
    if not torch_available():
        pytest.skip(f"{TORCH_PYTHON} has no torch (Debian's python3-torch): no PyTorch reference")
    out = _cache_dir()
    missing = [m for m in MODELS if not os.path.exists(os.path.join(out, m + ".kiln.onnx"))]
    if missing:
        os.makedirs(out, exist_ok=True)
        subprocess.run([TORCH_PYTHON, os.path.join(HERE, "torch_reference.py"), out, "--models", ",".join(missing)],
                       check=True, capture_output=True)
        from onnx_fixup import inference_batchnorm
        for m in missing:
            inference_batchnorm(os.path.join(out, m + ".onnx"), os.path.join(out, m + ".kiln.onnx"))
    return out
