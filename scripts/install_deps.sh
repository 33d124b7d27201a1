#!/usr/bin/env bash
# Installs what Kiln needs to build and test, idempotently: Debian packages (apt-get) and
# Python packages (pip). Safe to run again; skips what is already present.
set -euo pipefail

DEB_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libprotobuf-dev protobuf-compiler libonnx-dev
  libdnnl-dev  # oneDNN 2.6: the extern conv/matmul kernels (--kernels dnnl|auto)
  libxxhash-dev  # XXH3 checksums of compiled artifacts (header only: support/hash64.cc)
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev libfmt-dev nlohmann-json3-dev
  python3 python3-pip
  libcpp-httplib-dev libgrpc++-dev protobuf-compiler-grpc  # kiln serve: KServe v2 HTTP and gRPC
  libb64-0d  # perf_analyzer's libb64.so.0d (tests/serve; scripts/serve_test_env.sh)
  libpng-dev  # src/data: PNG images in image-directory datasets
  openmpi-bin libopenmpi-dev  # src/distributed: collectives and data-parallel training (mpirun)
  python3-torch python3-matplotlib  # training tests vs PyTorch autograd (tests/training); loss-curve PNGs
  python3-torchvision  # scripts/export_zoo.py: the benchmark zoo (bench/peers.py --zoo)
  time  # /usr/bin/time -v: peak RSS in bench/memory_figures.py
  patchelf xz-utils  # scripts/device_bundle.sh: binaries that find their bundled libraries
)
# onnx is pinned: 1.19.x is the newest wheel that still ships the backend node test data
# (onnx/backend/test/data/node) that `kiln test-onnx` and CI run.
# scikit-build-core and nanobind build the Python package (pyproject.toml; test.sh installs it
# with --no-build-isolation, so they must be here).
PY_PACKAGES=("onnx==1.19.1" "onnxruntime>=1.17" "numpy>=1.24" "pytest>=7" "scikit-learn>=1.3"
             "scikit-build-core>=0.10" "nanobind>=2.0")

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install_deps: apt-get install ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if ! $PY - <<'PYEOF' 2>/dev/null
import importlib.metadata as m, sys
need = {"onnx": "1.19.1"}
for pkg in ["onnxruntime", "numpy", "pytest", "scikit-learn", "scikit-build-core", "nanobind"]:
    m.version(pkg)
if m.version("onnx") != need["onnx"]:
    sys.exit(1)
PYEOF
then
  echo "install_deps: pip install ${PY_PACKAGES[*]}"
  $PY -m pip install -q --disable-pip-version-check "${PY_PACKAGES[@]}" 2>&1 | grep -v "Running pip as the 'root' user" || true
fi
echo "install_deps: ok"
