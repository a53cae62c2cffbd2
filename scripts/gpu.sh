#!/usr/bin/env bash
# One command for a GPU node: builds the runtime-only CUDA configuration and
# runs everything that needs a GPU, writing every number to a results
# directory. The node needs CUDA, NCCL, a C++ compiler, CMake, ninja and
# LibTorch (the torch wheel), not MLIR: the schedules come from
# scripts/make-gpu-scheds.sh, run where planc is. A bare node (no package
# registry, no -dev packages) builds with the headers scripts/gpu-deps.sh
# collects into .gpu-deps/ (carry it with the tree).
#
# usage: scripts/gpu.sh [SCHED_DIR (default gpu-scheds)]
#   results go to $OUT if set, else results-gpu/; the build to build-gpu/
#   (BUILD_DIR=... to change it); JOBS=N for the build (default: all cores).
#   GPU_DEPS=PREFIX: the build's dependency prefix (default .gpu-deps/, when
#     it exists; else the system's packages).
#   PLAN_BIN=DIR: run binaries built elsewhere for this node's LibTorch
#     (DIR/bin/plan-run, DIR/unittests/<gtest>) instead of building; the
#     LibTorch, NCCL and CUDA runtime libraries are then taken from python3's
#     torch wheel.
#   STAGES="...": only these stages (default: all, in the order below).
#
# Stages (each logs to RESULTS/<stage>.log; a failed stage does not stop the
# later ones; the exit code is 1 when any failed):
#   build        cmake -DPLAN_ENABLE_COMPILER=OFF -DPLAN_ENABLE_CUDA=ON + ninja
#   gtests       ctest: the runtime gtests, the CUDA ones among them (they
#                GTEST_SKIP without a device); gtests-cuda.log lists those.
#                With PLAN_BIN: its NcclCommTest and PlanRuntimeCoreTests
#   equivalence  test/equivalence/equivalence.py --backend cuda --world-max 1
#                --cross-backend cpu: every strategy against the CUDA
#                reference, and each reference against the CPU backend
#   peak         test/equivalence/gpu_peak.py: measured peak within 2% of plan
#   bench-1b     benchmarks/runtime/gpu_vs_fsdp2.py: ~1B Llama, bf16, vs FSDP2,
#                and a profile of one step of each (RESULTS/profile-1b/)
#   bench-offload  the same with --offload: Llama-3-8B (or, where the host has
#                too little memory for it, its 16-layer cut) vs FSDP2 + CPUOffloadPolicy
# RESULTS/summary.txt: one line per stage (appended to by each run).
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
STAGES=${STAGES:-build gtests equivalence peak bench-1b bench-offload}
DEPS=${GPU_DEPS:-$ROOT/.gpu-deps}
mkdir -p "$RESULTS"
SUMMARY=$RESULTS/summary.txt
echo "# $(date -u) stages: $STAGES${PLAN_BIN:+ (PLAN_BIN=$PLAN_BIN)}" >> "$SUMMARY"
STATUS=0

wanted() { [[ " $STAGES " == *" $1 "* ]]; }

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
  echo "cores: $(nproc)"
} > "$RESULTS/node.txt"
cat "$RESULTS/node.txt"

if [[ -n "${PLAN_BIN:-}" ]]; then
  # Binaries built elsewhere against the same torch wheel: its libraries, and
  # the NCCL and CUDA runtime wheels beside it, from this node's python3.
  LIBS=$("$PYTHON" -W ignore -c "
import os, torch
site = os.path.dirname(os.path.dirname(torch.__file__))
dirs = [os.path.join(os.path.dirname(torch.__file__), 'lib')]
for sub in ('nvidia/nccl/lib', 'nvidia/cu13/lib', 'nvidia/cuda_runtime/lib'):
    if os.path.isdir(os.path.join(site, sub)):
        dirs.append(os.path.join(site, sub))
print(':'.join(dirs))") || { echo "gpu.sh: python3 has no torch" >&2; exit 1; }
  export LD_LIBRARY_PATH=$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  PLAN_RUN=$PLAN_BIN/bin/plan-run
  UNITTESTS=$PLAN_BIN/unittests
elif wanted build; then
  DEPS_FLAGS=()
  [[ -d "$DEPS" ]] && DEPS_FLAGS=(-DCMAKE_PREFIX_PATH="$DEPS" -DZLIB_ROOT="$DEPS")
  if ! stage build bash -c "cmake -G Ninja -S '$ROOT' -B '$BUILD' -DCMAKE_BUILD_TYPE=Release \
        -DPLAN_ENABLE_COMPILER=OFF -DPLAN_ENABLE_RUNTIME=ON -DPLAN_ENABLE_TESTS=ON \
        -DPLAN_ENABLE_CUDA=ON ${DEPS_FLAGS[*]} && ninja -C '$BUILD' -j $JOBS"; then
    cat "$SUMMARY"
    exit 1
  fi
  PLAN_RUN=$BUILD/bin/plan-run
else
  PLAN_RUN=$BUILD/bin/plan-run
fi
"$PLAN_RUN" --version | tee -a "$RESULTS/node.txt" || {
  echo "gpu.sh: $PLAN_RUN does not run" >&2
  exit 1
}

if wanted gtests; then
  if [[ -n "${PLAN_BIN:-}" ]]; then
    run_gtests() {
      local code=0
      for t in NcclCommTest PlanRuntimeCoreTests; do
        "$UNITTESTS/$t" || code=1
      done
      return $code
    }
    stage gtests run_gtests
  else
    stage gtests ctest --test-dir "$BUILD" -j "$JOBS" --output-on-failure --timeout 900
  fi
  # The CUDA gtests by name, with gtest's own verdict (ran or skipped).
  grep -iE '(cuda|nccl|gpu).*(Passed|Failed|Not Run)|^\[ *(OK|SKIPPED|FAILED) *\].*(cuda|nccl|gpu)' \
    "$RESULTS/gtests.log" > "$RESULTS/gtests-cuda.log" || true
fi

wanted equivalence && stage equivalence "$PYTHON" "$ROOT/test/equivalence/equivalence.py" \
  --backend cuda --world-max 1 --cross-backend cpu --plan-run "$PLAN_RUN" \
  --schedules "$SCHEDS/equivalence" --work "$RESULTS/equivalence"

wanted peak && stage peak "$PYTHON" "$ROOT/test/equivalence/gpu_peak.py" --plan-run "$PLAN_RUN" \
  --schedules "$SCHEDS/peak" --work "$RESULTS/peak"

wanted bench-1b && stage bench-1b "$PYTHON" "$ROOT/benchmarks/runtime/gpu_vs_fsdp2.py" \
  --plan-run "$PLAN_RUN" --schedule "$SCHEDS/bench/llama_1b.sched" \
  --json "$RESULTS/bench-1b.json" --profile "$RESULTS/profile-1b"

# The full Llama-3-8B where the host can hold its offloaded state, else the
# 16-layer cut (gpu_vs_fsdp2.py exits 77 when a schedule does not fit here).
if wanted bench-offload && ! stage bench-offload "$PYTHON" \
    "$ROOT/benchmarks/runtime/gpu_vs_fsdp2.py" --offload \
    --plan-run "$PLAN_RUN" --schedule "$SCHEDS/bench/llama3_8b_offload.sched" \
    --json "$RESULTS/bench-offload.json"; then
  stage bench-offload-l16 "$PYTHON" "$ROOT/benchmarks/runtime/gpu_vs_fsdp2.py" --offload \
    --plan-run "$PLAN_RUN" --schedule "$SCHEDS/bench/llama3_8b_l16_offload.sched" \
    --json "$RESULTS/bench-offload-l16.json"
fi

echo "== summary ($RESULTS)"
cat "$SUMMARY"
exit $STATUS
