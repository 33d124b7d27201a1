#!/usr/bin/env bash
# Kiln's main job on the model shipped in the repo: compile the trained digits CNN
# (models/digits/) to C kernels, run it on the 360 held-out images, and report the predicted
# digits, the accuracy against the true labels, and the latency.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${KILN_BUILD_DIR:-$ROOT/build}"
if [ ! -x "$BUILD/bin/kiln" ]; then
  "$ROOT/scripts/install_deps.sh"
  "$ROOT/scripts/build.sh" >/dev/null
fi
OUT="$BUILD/digits_out"
"$BUILD/bin/kiln" run "$ROOT/models/digits/digits_cnn.onnx" \
  --inputs "$ROOT/models/digits/test_images.npz" --output-dir "$OUT" --repeat 50 "$@"
python3 "$ROOT/scripts/digits_report.py" "$OUT" --labels "$ROOT/models/digits/test_labels.npy"
