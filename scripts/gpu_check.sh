#!/usr/bin/env bash
# The GPU check (issue 30), run on the GPU machine from the device bundle
# (scripts/device_bundle.sh; the test binary tests/gpu_tests passed to it as an extra binary):
#
#   sh device-bundle/unpack.sh DIR && DIR/kiln/scripts/gpu_check.sh OUTDIR
#   (or KILN_BUNDLE=DIR/kiln gpu_check.sh OUTDIR; from a source tree it uses build/)
#
# Steps (each one's failure is reported and the script goes on to the table):
#   1. the GPU (nvidia-smi) and where the CUDA libraries come from (python's nvidia wheels)
#   2. models: scripts/gpu_models.py exports gpu_mlp, gpu_encoder, gpu_resnet50 and gpu_bert
#      (BERT-base) with this machine's PyTorch and times PyTorch eager / CUDA graph on the GPU in
#      FP32 and FP16; scripts/make_models.py adds the test models mlp, bert_tiny, small_cnn and
#      resnet_block (onnx package)
#   3. bin/gpu_tests: every generated kernel vs the CPU kernel, cuBLAS, cuDNN (FP32, TF32,
#      FP16), the budget, graph replay, CPU placement, then the models vs the CPU (gtest XML)
#   4. `kiln run MODEL --device cuda --compare-cpu` per model and --gpu-math (fp32, tf32, fp16):
#      time per run, GPU kernel time, CUDA graph replay, error vs the CPU; and the kernel time
#      with --kernels generated
#   5. torch.compile's time, when the budget allows
#   6. the table, last. Everything is also in OUTDIR/gpu_check.log. Budget: under 7 minutes.
set -u
OUT="${1:-gpu_check_out}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
HERE="$(cd "$(dirname "$0")" && pwd)"
BUNDLE="${KILN_BUNDLE:-$(dirname "$HERE")}"
if [ -x "$BUNDLE/bin/kiln" ]; then
  KILN="$BUNDLE/bin/kiln"; GPU_TESTS="$BUNDLE/bin/gpu_tests"
else  # a source checkout
  KILN="$BUNDLE/build/bin/kiln"; GPU_TESTS="$BUNDLE/build/tests/gpu_tests"
fi
PY="${PYTHON:-python3}"
LOG="$OUT/gpu_check.log"
: > "$LOG"
exec > >(tee -a "$LOG") 2>&1
START=$(date +%s)
STATUS=()
record() { STATUS+=("$(printf '%-28s %s' "$1" "$2")"); }
run_step() {  # run_step NAME TIMEOUT CMD...: runs, records ok/FAILED(rc)
  local name="$1" limit="$2"; shift 2
  echo "=== $name ($(date -u +%H:%M:%S))"
  timeout "$limit" "$@"
  local rc=$?
  if [ $rc -eq 0 ]; then record "$name" ok; else record "$name" "FAILED (rc $rc)"; fi
  return $rc
}

echo "=== GPU"
GPU_NAME="$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
echo "$GPU_NAME"
# CUDA libraries (NVRTC, cuBLAS, cuDNN) from python's nvidia wheels, for Kiln's loader.
WHEEL_DIRS="$("$PY" - <<'PYEOF' 2>/dev/null
import glob, os, site, sys
roots = site.getsitepackages() + [site.getusersitepackages()] + [p for p in sys.path if p.endswith("-packages")]
dirs = []
for r in roots:
    for d in sorted(glob.glob(os.path.join(r, "nvidia", "*", "lib"))):
        if d not in dirs:
            dirs.append(d)
print(":".join(dirs))
PYEOF
)"
export KILN_CUDA_LIB_DIRS="${KILN_CUDA_LIB_DIRS:+$KILN_CUDA_LIB_DIRS:}$WHEEL_DIRS"
echo "KILN_CUDA_LIB_DIRS=$KILN_CUDA_LIB_DIRS"
# The kernel cache outside OUTDIR (OUTDIR comes back to the caller: keep it small).
export KILN_CACHE_DIR="${KILN_CACHE_DIR:-${TMPDIR:-/tmp}/kiln_gpu_check_cache}"
MODELS="${TMPDIR:-/tmp}/kiln_gpu_check_models"  # ~40 MB of weights: not in OUTDIR
mkdir -p "$MODELS"
echo "kiln: $KILN ($(cat "$BUNDLE/COMMIT" 2>/dev/null || git -C "$BUNDLE" rev-parse --short HEAD 2>/dev/null))"

run_step "export (torch)" 120 "$PY" "$HERE/gpu_models.py" "$MODELS"
run_step "torch eager/graph timing" 120 "$PY" "$HERE/gpu_models.py" "$MODELS" --time
run_step "make_models (onnx)" 60 "$PY" "$HERE/make_models.py" --out "$MODELS" --skip-digits --only mlp,bert_tiny,small_cnn,resnet_block


if [ -x "$GPU_TESTS" ]; then
  # Kernels, cuBLAS, cuDNN, budget first (quick; the emulation ran in CI); the models (CPU compiles) next.
  run_step "gpu_tests (kernels)" 90 "$GPU_TESTS" --gtest_filter=-CudaModels.*:CudaEmulation.* --gtest_output="xml:$OUT/gpu_tests.xml"
  KILN_GPU_MODELS="$MODELS" run_step "gpu_tests (models)" 120 "$GPU_TESTS" --gtest_filter=CudaModels.* \
    --gtest_output="xml:$OUT/gpu_tests_models.xml"
else
  record "gpu_tests" "MISSING ($GPU_TESTS)"
fi

ROWS=()
# model|row label|kiln flags|torch_times key: ResNet-50 in FP32 (against PyTorch with TF32 off) and
# with --gpu-math tf32 (against PyTorch's default, which lets cuDNN use TF32 for convolutions);
# FP16 rows against PyTorch's model.half().
RUNS=("gpu_mlp|gpu_mlp||gpu_mlp" "gpu_mlp|mlp_fp16|--gpu-math fp16|gpu_mlp_fp16"
      "gpu_encoder|gpu_encoder||gpu_encoder" "gpu_encoder|encoder_fp16|--gpu-math fp16|gpu_encoder_fp16"
      "gpu_resnet50|resnet50||gpu_resnet50_fp32" "gpu_resnet50|resnet50_tf32|--gpu-math tf32|gpu_resnet50"
      "gpu_resnet50|resnet50_fp16|--gpu-math fp16 --profile-summary|gpu_resnet50_fp16"
      "gpu_bert|bert|--profile-summary|gpu_bert" "gpu_bert|bert_fp16|--gpu-math fp16 --profile-summary|gpu_bert_fp16"
      "gpu_resnet50_b32|r50_b32_fp16|--gpu-math fp16|gpu_resnet50_b32_fp16"
      "gpu_bert_b8|bert_b8_fp16|--gpu-math fp16|gpu_bert_b8_fp16"
      "mlp|mlp||mlp" "bert_tiny|bert_tiny||bert_tiny" "small_cnn|small_cnn||small_cnn" "resnet_block|resnet_block||resnet_block")
for r in "${RUNS[@]}"; do
  IFS='|' read -r m label flags tkey <<< "$r"
  f="$MODELS/$m.onnx"
  [ -f "$f" ] || { record "kiln run $label" "no model"; continue; }
  feeds=""  # the exported inputs (BERT's token ids must be valid), else kiln's seeded random ones
  [ -f "$MODELS/${m}_inputs.npz" ] && feeds="--inputs $MODELS/${m}_inputs.npz"
  # shellcheck disable=SC2086  # flags, feeds: words
  compare="--compare-cpu"  # the TF32 rows' error is the gtests' business (the CPU run takes time)
  case "$flags" in *tf32*) compare="" ;; esac
  run_step "kiln run $label" 120 "$KILN" run "$f" --device cuda $compare --repeat 20 $flags $feeds > "$OUT/run_$label.txt" 2>&1
  cat "$OUT/run_$label.txt"
  wall=$(sed -n 's/^median \([0-9.]*\) ms per run.*/\1/p' "$OUT/run_$label.txt")
  # (the median line only: the graph replay line also names its kernel time)
  gpu=$(sed -n 's/^median .*kernels on the GPU \([0-9.]*\) ms.*/\1/p' "$OUT/run_$label.txt" | head -1)
  err=$(sed -n 's/^max relative error vs CPU: \(.*\)/\1/p' "$OUT/run_$label.txt")
  kgraph=$(sed -n 's/^CUDA graph replay: median \([0-9.]*\) ms.*/\1/p' "$OUT/run_$label.txt")
  gen=-
  case "$m" in gpu_resnet50*|gpu_bert*) big=1 ;; *) big=0 ;; esac
  if [ -z "$flags" ] && [ $big = 0 ]; then
    # Kiln's generated kernels only (no cuBLAS/cuDNN): the GPU time of the kernels
    timeout 60 "$KILN" run "$f" --device cuda --kernels generated --repeat 20 > "$OUT/run_${label}_generated.txt" 2>&1
    gen=$(sed -n 's/^median .*kernels on the GPU \([0-9.]*\) ms.*/\1/p' "$OUT/run_${label}_generated.txt" | head -1)
  fi
  ROWS+=("$label|$tkey|${wall:-?}|${gpu:-?}|${kgraph:--}|${err:-?}|${gen:--}")
done


# torch.compile last (it may compile for a minute): only while the 4-minute budget allows.
if [ $(( $(date +%s) - START )) -lt 200 ]; then
  run_step "torch.compile timing" 80 "$PY" "$HERE/gpu_models.py" "$MODELS" --time-compile
else
  record "torch.compile timing" "skipped (time)"
fi
cp "$MODELS/torch_times.json" "$OUT/" 2>/dev/null
echo
echo "=== steps"
printf '%s\n' "${STATUS[@]}"
for x in "$OUT"/gpu_tests*.xml; do
  [ -f "$x" ] || continue
  echo "$(basename "$x"): $(grep -o '<testsuites tests="[0-9]*" failures="[0-9]*" disabled="[0-9]*" errors="[0-9]*"' "$x" | head -1)"
  # per test: completed / skipped, and FAILED where a <failure> follows it
  awk '/<testcase /{ if (t != "") print t; match($0, /name="[^"]*"/); n = substr($0, RSTART + 6, RLENGTH - 7);
         match($0, /classname="[^"]*"/); c = substr($0, RSTART + 11, RLENGTH - 12);
         match($0, /result="[^"]*"/); r = substr($0, RSTART + 8, RLENGTH - 9); t = "  " c "." n " " r }
       /<failure/{ t = t " FAILED" } END { if (t != "") print t }' "$x"
  grep -A2 '<failure' "$x" | head -16
done
echo
echo "=== table (GPU: ${GPU_NAME:-unknown}; ms = median per run; torch from gpu_models.py)"
echo "kiln_run: wall per run incl. input/output copies; kiln_gpu: its kernels on the GPU clock; kiln_graph: wall with"
echo "CUDA graph replay; kiln_gen: kernels on the GPU clock with --kernels generated (no cuBLAS/cuDNN); torch: inputs on"
echo "the GPU; best/best: Kiln's better of run and graph over PyTorch's best of eager, graph and compile"
printf '%-14s %9s %9s %10s %9s %11s %11s %11s %10s %9s %9s\n' model kiln_run kiln_gpu kiln_graph kiln_gen torch_eager torch_graph torch_compl kiln/eager best/best err_vs_cpu
for r in "${ROWS[@]}"; do
  IFS='|' read -r m tkey wall gpu kgraph err gen <<< "$r"
  read -r eager graph compiled <<< "$("$PY" - "$OUT/torch_times.json" "$tkey" <<'PYEOF' 2>/dev/null
import json, sys
try:
    t = json.load(open(sys.argv[1]))[sys.argv[2]]  # the torch_times key
    c = t.get("compile_ms")
    print(f"{t['eager_ms']:.3f} {t['cuda_graph_ms']:.3f} {c:.3f}" if c else f"{t['eager_ms']:.3f} {t['cuda_graph_ms']:.3f} -")
except Exception:
    print("- - -")
PYEOF
)"
  ratio=$("$PY" -c "print(f'{float(\"$wall\")/float(\"$eager\"):.2f}')" 2>/dev/null || echo -)
  best=$("$PY" - "$wall" "$kgraph" "$eager" "$graph" "$compiled" <<'PYEOF' 2>/dev/null || echo -
import sys
def nums(xs):
    out = []
    for x in xs:
        try:
            out.append(float(x))
        except ValueError:
            pass
    return out
k, t = nums(sys.argv[1:3]), nums(sys.argv[3:6])
print(f"{min(k) / min(t):.2f}" if k and t else "-")
PYEOF
)
  printf '%-14s %9s %9s %10s %9s %11s %11s %11s %10s %9s %9s\n' "$m" "$wall" "$gpu" "$kgraph" "$gen" "${eager:--}" "${graph:--}" \
    "${compiled:--}" "$ratio" "$best" "$err"
done
echo "total $(( $(date +%s) - START )) s"
