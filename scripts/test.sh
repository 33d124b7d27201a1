#!/usr/bin/env bash
# The full test run: installs what is missing, builds, then runs every test suite:
#  1. gtest unit tests per layer (ctest -j2)
#  2. the ONNX backend node conformance run (kiln test-onnx) against the expected-pass list,
#     at -O3 (with ONNX Runtime in the same run) and at -O0 (the pass pipeline's equivalence
#     property: both levels pass the same tests against the ONNX reference outputs)
#  3. the Python package: pip install (build tree build-python/, incremental, ccache) and
#     pytest tests/python (ONNX Runtime API parity, every test model vs ONNX Runtime)
#  4. pytest: CLI, models vs ONNX Runtime, bad-input errors
#  5. kiln serve end to end: tests/serve with tritonclient and perf_analyzer (a venv made by
#     scripts/serve_test_env.sh), the server started on a temporary model repository
#  6. training: scripts/train_digits.sh (the digits CNN from random initialization, >= 97%
#     held-out accuracy) and tests/training (Kiln vs PyTorch autograd, PyTorch from Debian's
#     python3-torch run by /usr/bin/python3)
#  7. bench smoke: the benchmark models through bench/peers.py once, Kiln's outputs vs ONNX
#     Runtime's (no timing assertions; keeps the benchmark script from rotting), and one model of
#     every family of the zoo (scripts/export_zoo.py, exported by Debian's PyTorch)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${KILN_BUILD_DIR:-$ROOT/build}"
export KILN_CACHE_DIR="${KILN_CACHE_DIR:-$BUILD/kernel_cache}"
# Every compile in the test run checks the graph after each pass (pass/verify_typed.h), as a
# debug build does: the build is RelWithDebInfo (NDEBUG), where it is off by default.
export KILN_VERIFY_PASSES=1

# A full run writes about 4 GB under $BUILD (build trees, venv, models, kernel cache) and
# build-python/; a CI run once ended in ENOSPC in its last minutes, so say up front how much
# room there is.
mkdir -p "$BUILD"
free_kb=$(df -Pk "$BUILD" | awk 'NR == 2 {print $4}')
echo "test.sh: $((free_kb / 1024)) MB free under $BUILD (a full run needs about 5000 MB)"
if [ "$free_kb" -lt $((5 * 1024 * 1024)) ]; then
  echo "test.sh: warning: less than 5 GB free; the run may end in 'No space left on device'" >&2
fi

"$ROOT/scripts/install_deps.sh"
"$ROOT/scripts/build.sh"

echo "== unit tests (ctest)"
(cd "$BUILD" && ctest -j2 --output-on-failure --timeout 600)

echo "== ONNX backend node conformance"
python3 "$ROOT/tests/conformance/run_conformance.py" --kiln "$BUILD/bin/kiln" \
  --expected "$ROOT/tests/conformance/expected_pass.txt"
echo "== ONNX backend node conformance at -O0"
python3 "$ROOT/tests/conformance/run_conformance.py" --kiln "$BUILD/bin/kiln" --no-ort -O0 \
  --expected "$ROOT/tests/conformance/expected_pass.txt" | tail -3

echo "== Python package (pip install, then tests/python)"
# The compilers and ccache base of build.sh, so the layer libraries' compiles hit ccache
# (scikit-build-core would otherwise pick Python's g++/gcc, a different ccache key than c++/cc).
CC="${CC:-cc}" CXX="${CXX:-c++}" CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}" \
  CMAKE_BUILD_PARALLEL_LEVEL="${KILN_JOBS:-$(nproc)}" \
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --no-build-isolation --disable-pip-version-check "$ROOT"
python3 -m pytest -q "$ROOT/tests/python" --ignore="$ROOT/tests/python/test_onnx_backend.py"
echo "== training vs PyTorch (tests/training; PyTorch runs under /usr/bin/python3)"
python3 -m pytest -q "$ROOT/tests/training"

echo "== pytest (CLI, models vs ONNX Runtime, errors)"
KILN_BIN="$BUILD/bin/kiln" KILN_RUN_MODEL="$BUILD/bin/run_model" python3 -m pytest -q "$ROOT/tests/models" \
  "$ROOT/tests/cli" "$ROOT/tests/conformance" "$ROOT/tests/capi"

echo "== ONNX's backend test suite through kiln.backend (node tests vs the expected-pass list)"
python3 -m pytest -q -s "$ROOT/tests/python/test_onnx_backend.py"

echo "== kiln serve end to end (tests/serve)"
SERVE_PY="$("$ROOT/scripts/serve_test_env.sh" "$BUILD/serve-venv")"
KILN_BIN="$BUILD/bin/kiln" "$SERVE_PY" -m pytest -q "$ROOT/tests/serve"

echo "== training demo (scripts/train_digits.sh)"
KILN_BIN="$BUILD/bin/kiln" "$ROOT/scripts/train_digits.sh" "$BUILD/train_digits" | tail -4

echo "== bench smoke"
KILN_BIN="$BUILD/bin/kiln" python3 "$ROOT/bench/peers.py" --smoke --models-dir "$BUILD/models"
# The zoo's light members, one per family (the whole zoo, `--zoo --smoke`, takes ~10 min with a
# cold kernel cache on 2 cores: run by hand, see docs/benchmarks.md).
ZOO_CI=mobilenetv3_small,shufflenetv2,regnety_400mf,mnasnet,squeezenet,lraspp_mbv3,minilm,gpt2_small
ZOO_CI+=,lstm_tagger,bigru,tcn,audio_conv1d,mixer_s16,unet_small
KILN_BIN="$BUILD/bin/kiln" python3 "$ROOT/bench/peers.py" --zoo --smoke --zoo-dir "$BUILD/zoo" --models "$ZOO_CI"
KILN_BIN="$BUILD/bin/kiln" python3 "$ROOT/bench/cliffs_matvec_reduce.py" --smoke --work-dir "$BUILD/bench/cliffs"
KILN_BIN="$BUILD/bin/kiln" python3 "$ROOT/bench/cliffs_ops.py" --smoke --work-dir "$BUILD/bench/cliffs_ops"
KILN_BIN="$BUILD/bin/kiln" python3 "$ROOT/bench/int8.py" --smoke --work-dir "$BUILD/bench/int8"  # QDQ net: int8 kernels, vs ORT
# The many-core benchmark (run on the 16-core machine from scripts/device_bundle.sh), CI-sized.
python3 "$ROOT/bench/scaling.py" --smoke --kiln "$BUILD/bin/kiln" --exporter-python /usr/bin/python3 --out "$BUILD/bench/scaling"
# The serving benchmarks against the ORT KServe v2 server, untimed: both answer and agree.
# Training: recomputation on a deep net (both modes agree), untimed.
KILN_BIN="$BUILD/bin/kiln" python3 "$ROOT/bench/train_memory.py" --smoke
"$BUILD/bin/kiln-bench-train-pipeline" --smoke
KILN_BIN="$BUILD/bin/kiln" python3 "$ROOT/bench/distributed.py" --smoke --kiln "$BUILD/bin/kiln"  # mpiexec -n 2, untimed
KILN_BIN="$BUILD/bin/kiln" python3 "$ROOT/bench/pipeline_parallel.py" --smoke  # mpiexec -n 2 --microbatches, outputs vs in-process
KILN_BIN="$BUILD/bin/kiln" python3 "$ROOT/bench/pipeline_training.py" --smoke  # kiln train --pipeline-parallel, weights vs 1 process
python3 "$ROOT/bench/train_vs_torch.py" --smoke
python3 "$ROOT/bench/dynamic_shapes.py" --smoke  # one session, two lengths, outputs vs ORT
KILN_BIN="$BUILD/bin/kiln" python3 "$ROOT/bench/control_flow_frames.py" --smoke  # frames, 1 and 2 inter-op threads vs ORT
for b in serve_throughput serve_rt_be serve_load; do
  KILN_BIN="$BUILD/bin/kiln" python3 "$ROOT/bench/$b.py" --smoke --models-dir "$BUILD/models"
done
