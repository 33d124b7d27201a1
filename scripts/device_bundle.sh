#!/usr/bin/env bash
# Packs a built Kiln for a machine that has no build tools or Kiln dependencies (the lent GPU
# machines: 16 Xeon cores, an Ubuntu image with PyTorch and ONNX Runtime, no network):
#
#   scripts/device_bundle.sh [BUILD_DIR] [OUT_DIR] [EXTRA_BINARY ...]
#
# OUT_DIR (default device-bundle/, ignored by git) receives kiln-bundle.tar.xz holding
#   bin/       build/bin/* and the EXTRA_BINARYs (test binaries), stripped, with an RPATH of
#              $ORIGIN/../lib so they need no LD_LIBRARY_PATH (which would leak into the C
#              compiler the kernel JIT runs)
#   lib/       every shared library they load except the C library family, libstdc++ and
#              libgcc_s (the target's own, newer ones are compatible) and the CUDA libraries
#              (the target's driver and its pip wheels provide those, loaded at run time)
#   bench/ scripts/ tests/models/  the scripts that run there (bench/scaling.py,
#              scripts/gpu_check.sh) and the test models
# and unpack.sh, which the device command runs first: `sh device-bundle/unpack.sh DIR`.
# It stays well under the 64 MiB that can travel with a device command (the size is printed).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
OUT="${2:-$ROOT/device-bundle}"
shift $(( $# > 2 ? 2 : $# ))
for tool in patchelf xz strip; do
  command -v "$tool" >/dev/null || { echo "device_bundle: $tool is missing (scripts/install_deps.sh installs it)" >&2; exit 1; }
done

STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/kiln/bin" "$STAGE/kiln/lib" "$OUT"

binaries=("$BUILD"/bin/* "$@")
for b in "${binaries[@]}"; do
  [ -f "$b" ] && [ -x "$b" ] || continue
  cp "$b" "$STAGE/kiln/bin/"
done

# Libraries left to the target: the C library family, the C++ runtime, CUDA's.
skip_lib() {
  case "$1" in
    linux-vdso*|ld-linux*|libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libresolv.so*) return 0 ;;
    libstdc++.so*|libgcc_s.so*) return 0 ;;
    libcuda.so*|libcudart.so*|libnvrtc*|libcublas*|libcudnn*|libnccl*|libnvJitLink*) return 0 ;;
  esac
  return 1
}
for b in "$STAGE"/kiln/bin/*; do
  ldd "$b" 2>/dev/null | awk '/=> \//{print $1" "$3}' | while read -r name path; do
    skip_lib "$name" && continue
    [ -f "$STAGE/kiln/lib/$name" ] || cp -L "$path" "$STAGE/kiln/lib/$name"
  done
done
for f in "$STAGE"/kiln/bin/* "$STAGE"/kiln/lib/*; do
  strip --strip-unneeded "$f" 2>/dev/null || true
done
for f in "$STAGE"/kiln/bin/*; do
  patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$f"
done
for f in "$STAGE"/kiln/lib/*; do
  patchelf --force-rpath --set-rpath '$ORIGIN' "$f" 2>/dev/null || true
done

mkdir -p "$STAGE/kiln/bench" "$STAGE/kiln/scripts" "$STAGE/kiln/tests"
cp "$ROOT"/bench/*.py "$ROOT"/bench/*.c "$STAGE/kiln/bench/"  # fma_peak.c: peers.py measures the peak
cp "$ROOT"/scripts/*.sh "$ROOT"/scripts/*.py "$STAGE/kiln/scripts/"
cp -r "$ROOT/tests/models" "$STAGE/kiln/tests/" 2>/dev/null || true
# (models are exported on the target by its own PyTorch: bench/scaling.py, scripts/gpu_check.sh)
git -C "$ROOT" rev-parse HEAD > "$STAGE/kiln/COMMIT" 2>/dev/null || echo unknown > "$STAGE/kiln/COMMIT"

tar -C "$STAGE" -cf - kiln | xz -T0 -6 > "$OUT/kiln-bundle.tar.xz"
cat > "$OUT/unpack.sh" <<'UNPACK'
#!/bin/sh
# sh device-bundle/unpack.sh DIR: unpacks the bundle into DIR/kiln and checks that kiln starts.
set -e
HERE="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$1"
xz -dc "$HERE/kiln-bundle.tar.xz" | tar -C "$1" -xf -
"$1/kiln/bin/kiln" --version
UNPACK
chmod +x "$OUT/unpack.sh"
echo "device_bundle: $(du -h "$OUT/kiln-bundle.tar.xz" | cut -f1) in $OUT/kiln-bundle.tar.xz ($(ls "$STAGE/kiln/bin" | wc -l) binaries, $(ls "$STAGE/kiln/lib" | wc -l) libraries)"
