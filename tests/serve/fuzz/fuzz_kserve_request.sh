#!/usr/bin/env bash
# Fuzzes the KServe v2 request parsers with libFuzzer + ASan + UBSan (clang), outside the main
# build: compiles src/support and the KServe codec files of src/serve with the harness, seeds
# the corpus with a few hand-written requests (JSON and binary), and runs for SECONDS (default
# 60). Exit 0 when no crash was found. Not part of CI.
#
#   tests/serve/fuzz/fuzz_kserve_request.sh [SECONDS]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
BUILD="${KILN_BUILD_DIR:-$ROOT/build}"
SECONDS_TO_RUN="${1:-60}"
OUT="$BUILD/fuzz_kserve"
mkdir -p "$OUT/obj" "$OUT/corpus"
CXX="${CLANGXX:-clang++}"
FLAGS=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
       -DKILN_HAVE_DNNL=0 -DKILN_VERSION=\"fuzz\" -I"$ROOT/src" -I"$ROOT/include")
objs=()
for src in "$ROOT"/src/support/*.cc "$ROOT"/src/serve/kserve_*.cc; do
  obj="$OUT/obj/$(basename "$(dirname "$src")")_$(basename "$src" .cc).o"
  if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ]; then
    "$CXX" "${FLAGS[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj"
  fi
  objs+=("$obj")
done
"$CXX" "${FLAGS[@]}" -fsanitize=fuzzer "$ROOT/tests/serve/fuzz/kserve_request_fuzz.cc" "${objs[@]}" \
  -lfmt -ldl -lpthread -o "$OUT/kserve_request_fuzz"

python3 - "$OUT/corpus" <<'PYEOF'
import json, os, struct, sys
corpus = sys.argv[1]
def put(name, mode, body, header=None):
    prefix = bytes([mode]) + (struct.pack("<H", header) if header is not None else b"")
    open(os.path.join(corpus, name), "wb").write(prefix + body)
j = json.dumps({"id": "r", "parameters": {"priority": 1, "timeout": 5, "binary_data_output": True},
                "inputs": [{"name": "f", "shape": [2, 2], "datatype": "FP32", "data": [[1.5, 2], [3, 4]]},
                           {"name": "s", "shape": [1], "datatype": "BYTES", "data": ["ab"]},
                           {"name": "b", "shape": [2], "datatype": "BOOL", "data": [True, False]},
                           {"name": "h", "shape": [1], "datatype": "FP16", "data": [0.5]},
                           {"name": "i", "shape": [2], "datatype": "INT8", "data": [-1, 2]}],
                "outputs": [{"name": "y", "parameters": {"binary_data": False}}]}).encode()
put("json", 0, j); put("json_bin_out", 2, j)
h = json.dumps({"inputs": [{"name": "u", "shape": [2], "datatype": "UINT32", "parameters": {"binary_data_size": 8}},
                           {"name": "s", "shape": [2], "datatype": "BYTES", "parameters": {"binary_data_size": 11}}]}).encode()
put("binary", 1, h + struct.pack("<II", 1, 2) + struct.pack("<I", 3) + b"abc" + struct.pack("<I", 0), len(h))
put("index", 4, b'{"ready": true}'); put("load", 12, b'{"parameters": {"config": "{}"}}')
PYEOF
cd "$OUT"
"$OUT/kserve_request_fuzz" -max_total_time="$SECONDS_TO_RUN" -max_len=4096 -timeout=10 corpus
