#!/usr/bin/env bash
# One command for a GPU node: builds the runtime-only CUDA configuration and
# runs everything that needs a GPU, writing every number to a results
# directory. The node needs CUDA, NCCL and LibTorch (the torch wheel), not
# MLIR: the schedules come from scripts/make-gpu-scheds.sh, run where planc is.
#
# usage: scripts/gpu.sh [SCHED_DIR (default gpu-scheds)]
#   results go to $OUT if set, else results-gpu/; the build to build-gpu/
#   (BUILD_DIR=... to change it); JOBS=N for the build (default: all cores).
#
# Stages (each logs to RESULTS/<stage>.log; a failed stage does not stop the
# later ones; the exit code is 1 when any failed):
#   build        cmake -DPLAN_ENABLE_COMPILER=OFF -DPLAN_ENABLE_CUDA=ON + ninja
#   gtests       ctest: the runtime gtests, the CUDA ones among them (they
#                GTEST_SKIP without a device); gtests-cuda.log lists those
#   equivalence  test/equivalence/equivalence.py --backend cuda --world-max 1
#   peak         test/equivalence/gpu_peak.py: measured peak within 2% of plan
#   bench-1b     benchmarks/runtime/gpu_vs_fsdp2.py: ~1B Llama, bf16, vs FSDP2
#   bench-offload  the same with --offload: Llama-3-8B (or, where the host has
#                too little memory for it, its 16-layer cut) vs FSDP2 + CPUOffloadPolicy
# RESULTS/summary.txt: one line per stage.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SCHEDS=$(cd "${1:-gpu-scheds}" 2>/dev/null && pwd) || {
  echo "gpu.sh: ${1:-gpu-scheds}: no such directory (make it with scripts/make-gpu-scheds.sh)" >&2
  exit 1
}
RESULTS=${OUT:-$ROOT/results-gpu}
BUILD=${BUILD_DIR:-$ROOT/build-gpu}
JOBS=${JOBS:-$(nproc)}
PYTHON=${PYTHON:-python3}
mkdir -p "$RESULTS"
SUMMARY=$RESULTS/summary.txt
: > "$SUMMARY"
STATUS=0

# stage NAME COMMAND...: runs COMMAND, its output to RESULTS/NAME.log (and the
# terminal), and records "NAME: passed|FAILED (code C)|skipped" in the summary.
stage() {
  local name=$1
  shift
  echo "== $name: $*" | tee "$RESULTS/$name.log"
  local start=$SECONDS
  "$@" 2>&1 | tee -a "$RESULTS/$name.log"
  local code=${PIPESTATUS[0]}
  local took=$((SECONDS - start))
  if [[ $code == 0 ]]; then
    echo "$name: passed (${took} s)" >> "$SUMMARY"
  elif [[ $code == 77 ]]; then
    echo "$name: skipped ($(tail -n 1 "$RESULTS/$name.log"))" >> "$SUMMARY"
  else
    echo "$name: FAILED (code $code, ${took} s; see $name.log)" >> "$SUMMARY"
    STATUS=1
  fi
  return "$code"
}

{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 || true
  "$PYTHON" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'devices', torch.cuda.device_count())" 2>&1
  grep MemTotal /proc/meminfo
} > "$RESULTS/node.txt"
cat "$RESULTS/node.txt"

if ! stage build bash -c "cmake -G Ninja -S '$ROOT' -B '$BUILD' -DCMAKE_BUILD_TYPE=Release \
      -DPLAN_ENABLE_COMPILER=OFF -DPLAN_ENABLE_RUNTIME=ON -DPLAN_ENABLE_TESTS=ON \
      -DPLAN_ENABLE_CUDA=ON && ninja -C '$BUILD' -j $JOBS"; then
  cat "$SUMMARY"
  exit 1
fi
PLAN_RUN=$BUILD/bin/plan-run
"$PLAN_RUN" --version | tee -a "$RESULTS/node.txt"

stage gtests ctest --test-dir "$BUILD" -j "$JOBS" --output-on-failure --timeout 900
# The CUDA gtests by name, with gtest's own verdict (ran or skipped).
ctest --test-dir "$BUILD" -N | grep -iE 'cuda|nccl|gpu' > "$RESULTS/gtests-cuda.log" || true
grep -iE '(cuda|nccl|gpu).*(Passed|Failed|Skipped|Not Run)' "$RESULTS/gtests.log" \
  >> "$RESULTS/gtests-cuda.log" || true

stage equivalence "$PYTHON" "$ROOT/test/equivalence/equivalence.py" --backend cuda \
  --world-max 1 --plan-run "$PLAN_RUN" --schedules "$SCHEDS/equivalence" \
  --work "$RESULTS/equivalence"

stage peak "$PYTHON" "$ROOT/test/equivalence/gpu_peak.py" --plan-run "$PLAN_RUN" \
  --schedules "$SCHEDS/peak" --work "$RESULTS/peak"

stage bench-1b "$PYTHON" "$ROOT/benchmarks/runtime/gpu_vs_fsdp2.py" \
  --plan-run "$PLAN_RUN" --schedule "$SCHEDS/bench/llama_1b.sched" \
  --json "$RESULTS/bench-1b.json"

# The full Llama-3-8B where the host can hold its offloaded state, else the
# 16-layer cut (gpu_vs_fsdp2.py exits 77 when a schedule does not fit here).
if ! stage bench-offload "$PYTHON" "$ROOT/benchmarks/runtime/gpu_vs_fsdp2.py" --offload \
    --plan-run "$PLAN_RUN" --schedule "$SCHEDS/bench/llama3_8b_offload.sched" \
    --json "$RESULTS/bench-offload.json"; then
  stage bench-offload-l16 "$PYTHON" "$ROOT/benchmarks/runtime/gpu_vs_fsdp2.py" --offload \
    --plan-run "$PLAN_RUN" --schedule "$SCHEDS/bench/llama3_8b_l16_offload.sched" \
    --json "$RESULTS/bench-offload-l16.json"
fi

echo "== summary ($RESULTS)"
cat "$SUMMARY"
exit $STATUS
