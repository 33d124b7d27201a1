#!/usr/bin/env bash
# Fuzzes the artifact loader with libFuzzer + ASan + UBSan (clang), outside the main build:
# compiles src/support and src/runtime (without oneDNN) with the harness, seeds the corpus with
# artifacts written by artifact_tests (KILN_FUZZ_SEED_DIR) and the decoder inputs cut from them,
# and runs for SECONDS (default 60). Exit 0 when no crash was found.
#
#   tests/artifact/fuzz/fuzz_artifact_loader.sh [SECONDS]   (after a build: needs build/tests/artifact_tests)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
BUILD="${KILN_BUILD_DIR:-$ROOT/build}"
SECONDS_TO_RUN="${1:-60}"
OUT="$BUILD/fuzz_artifact"
mkdir -p "$OUT/obj" "$OUT/corpus" "$OUT/seeds"
CXX="${CLANGXX:-clang++}"
FLAGS=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
       -DKILN_HAVE_DNNL=0 -DKILN_VERSION=\"fuzz\" -I"$ROOT/src" -I"$ROOT/include")
objs=()
for src in "$ROOT"/src/support/*.cc "$ROOT"/src/runtime/*.cc; do
  obj="$OUT/obj/$(basename "$(dirname "$src")")_$(basename "$src" .cc).o"
  if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ]; then
    "$CXX" "${FLAGS[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj"
  fi
  objs+=("$obj")
done
"$CXX" "${FLAGS[@]}" -fsanitize=fuzzer "$ROOT/tests/artifact/fuzz/artifact_loader_fuzz.cc" "${objs[@]}" \
  -ldl -lpthread -o "$OUT/artifact_loader_fuzz"

# Seeds: real artifacts (mode byte 0) and their info + executable sections (mode byte 1).
KILN_ARTIFACT_SEED_DIR="$OUT/seeds" "$BUILD/tests/artifact_tests" --gtest_filter='ArtifactFuzzSeeds.*' >/dev/null
python3 - "$OUT/seeds" "$OUT/corpus" <<'PYEOF'
import os, struct, sys
seeds, corpus = sys.argv[1], sys.argv[2]
for name in os.listdir(seeds):
    b = open(os.path.join(seeds, name), "rb").read()
    open(os.path.join(corpus, name + ".file"), "wb").write(b"\x00" + b)
    sec = {}
    for i in range(4):
        kind, _, off, size, _ = struct.unpack_from("<IIQQQ", b, 64 + 32 * i)
        sec[kind] = b[off:off + size]
    info, exe = sec[1], sec[2]
    open(os.path.join(corpus, name + ".tables"), "wb").write(b"\x01" + struct.pack("<H", len(info)) + info + exe)
PYEOF
cd "$OUT"
"$OUT/artifact_loader_fuzz" -max_total_time="$SECONDS_TO_RUN" -max_len=65536 -timeout=10 corpus
