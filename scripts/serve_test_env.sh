#!/usr/bin/env bash
# Makes the Python environment of the `kiln serve` end-to-end tests (tests/serve/*.py): a venv
# at ${1:-build/serve-venv} with tritonclient[http,grpc] and a working perf_analyzer, then prints
# the venv's python. Idempotent (a stamp file records what was installed).
#
# Why a venv and not scripts/install_deps.sh's PY_PACKAGES: tritonclient 2.73 pins
# protobuf<7 and ml_dtypes<=0.5.4, and pip would downgrade the system's protobuf 7 and
# ml_dtypes 0.6 that the Kiln Python package and its tests run with. The venv sees the system's
# packages (--system-site-packages: numpy, onnx, onnxruntime, pytest) and shadows only those two.
#
# perf_analyzer: pip's `perf-analyzer` 0.1.0 is a placeholder without the binary. tritonclient's
# manylinux wheels bundled bin/perf_analyzer up to 2.57; from 2.52 on it needs glibc 2.38
# (Debian 12 has 2.36), so it comes from the 2.51.0 wheel (pip download, the binary only: that
# wheel's Python part pins numpy<2 and protobuf<5). It links libb64.so.0d (Debian libb64-0d,
# in install_deps.sh) and libcudart.so.12 (pip nvidia-cuda-runtime-cu12; loads without a GPU,
# only CUDA shared memory would use it), so a wrapper in the venv's bin sets LD_LIBRARY_PATH.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${1:-${KILN_BUILD_DIR:-$ROOT/build}/serve-venv}"
PY=${PYTHON:-python3}
TRITONCLIENT="tritonclient[http,grpc]==2.73.0"
PA_WHEEL_VERSION="2.51.0"
CUDART="nvidia-cuda-runtime-cu12==12.9.79"
STAMP="$VENV/.kiln-serve-env-$TRITONCLIENT-$PA_WHEEL_VERSION-$CUDART"

if [ ! -f "$STAMP" ]; then
  echo "serve_test_env: creating $VENV" >&2
  rm -rf "$VENV"
  $PY -m venv --system-site-packages "$VENV"
  PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
  PIP_ROOT_USER_ACTION=ignore "${PIP[@]}" "$TRITONCLIENT" "$CUDART" >&2

  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  "$VENV/bin/python" -m pip download -q --disable-pip-version-check --no-deps \
    --only-binary=:all: --platform manylinux1_x86_64 -d "$tmp" "tritonclient==$PA_WHEEL_VERSION" >&2
  "$VENV/bin/python" - "$tmp" "$VENV/libexec" <<'PYEOF'
import pathlib, stat, sys, zipfile
wheel = next(pathlib.Path(sys.argv[1]).glob("tritonclient-*.whl"))
out = pathlib.Path(sys.argv[2]); out.mkdir(parents=True, exist_ok=True)
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith("/data/bin/perf_analyzer"))
    target = out / "perf_analyzer"
    target.write_bytes(z.read(name))
    target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
PYEOF
  cudart_dir="$("$VENV/bin/python" -c 'import nvidia.cuda_runtime as m, os; print(os.path.join(list(m.__path__)[0], "lib"))')"
  cat >"$VENV/bin/perf_analyzer" <<EOF
#!/bin/sh
LD_LIBRARY_PATH="$cudart_dir\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$VENV/libexec/perf_analyzer" "\$@"
EOF
  chmod +x "$VENV/bin/perf_analyzer"
  "$VENV/bin/perf_analyzer" --version >/dev/null 2>&1 || "$VENV/bin/perf_analyzer" 2>&1 | head -3 >&2
  touch "$STAMP"
fi
echo "$VENV/bin/python"
