#!/usr/bin/env bash
# Creates the peer engines' virtual environment for bench/peers.py and bench/kernels.py:
# ONNX Runtime, OpenVINO, numpy, onnx and tritonclient (HTTP; the serving benchmarks' protocol
# check) in a venv of its own (default build/peers-venv), so the project's test environment is
# never touched. Idempotent: an existing venv is reused and
# pip runs only when a package is missing. Prints the venv's python path last.
#
# `--torch` makes the training peer's venv instead (default build/torch-venv): PyTorch 2.x from
# PyPI with its dependencies (about 7 GB: CUDA wheels come with it; they are never loaded on a
# CPU-only machine), numpy and onnx (its TorchScript exporter writes the models Kiln trains).
# bench/train_vs_torch.py uses it by default; Debian's python3-torch 1.13 runs matrix products on
# the reference BLAS, so it is only the float64 reference of the gradient tests, never a timed peer.
#
#   bench/setup_peers.sh [VENV_DIR]
#   bench/setup_peers.sh --torch [VENV_DIR]
#   $(bench/setup_peers.sh | tail -1) bench/peers.py --models mlp --rounds 3
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY_BASE="${PYTHON:-python3}"
if [ "${1:-}" = "--torch" ]; then
  shift
  VENV="${1:-${KILN_TORCH_VENV:-$ROOT/build/torch-venv}}"
  PACKAGES=(torch numpy onnx)
else
  VENV="${1:-${KILN_PEERS_VENV:-$ROOT/build/peers-venv}}"
  PACKAGES=(onnxruntime openvino numpy onnx tritonclient scipy)  # scipy: make_models.py's GELU reference
fi
# What pip installs for a missing package (its extras).
declare -A PIP_SPEC=([tritonclient]="tritonclient[http]")

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup_peers: creating $VENV" >&2
  mkdir -p "$(dirname "$VENV")"
  "$PY_BASE" -m venv "$VENV"
fi
missing=()
for p in "${PACKAGES[@]}"; do
  "$VENV/bin/python" -c "import importlib.metadata as m; m.version('$p')" 2>/dev/null \
    || missing+=("${PIP_SPEC[$p]:-$p}")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup_peers: pip install ${missing[*]}" >&2
  "$VENV/bin/python" -m pip install -q "${missing[@]}" >&2
fi
"$VENV/bin/python" - "${PACKAGES[@]}" >&2 <<'PYEOF'
import importlib.metadata as m, sys
print("setup_peers: " + ", ".join(f"{p} {m.version(p)}" for p in sys.argv[1:]))
PYEOF
echo "$VENV/bin/python"
