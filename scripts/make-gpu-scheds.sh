#!/usr/bin/env bash
# Compiles, here (with planc, which needs MLIR), the schedules that
# scripts/gpu.sh runs on a GPU node (which has only the runtime-only build).
# Carry the output directory to the node and pass it to gpu.sh.
#
# usage: scripts/make-gpu-scheds.sh [OUT_DIR (default gpu-scheds)] [PLANC]
#   PLANC defaults to $PLANC, else build/bin/planc, else planc on PATH.
#
# OUT_DIR/equivalence/  every case of the equivalence matrix at world size 1
#                       (fp32 and bf16_mixed; test/equivalence/equivalence.py)
# OUT_DIR/peak/         schedules whose measured peak must be within 2% of the
#                       plan (test/equivalence/gpu_peak.py)
# Each peak and bench schedule has planc's report beside it (NAME.sched.report.json).
# OUT_DIR/bench/        the benchmark schedules (benchmarks/runtime/gpu_vs_fsdp2.py):
#   llama_1b.sched             TinyLlama-1.1B, bf16_mixed, one H100 SXM,
#                              8 x 2048 tokens a step, no recomputation
#   llama3_8b_offload.sched    Llama-3-8B full fine-tune on one H100 SXM with
#                              parameters, gradients and the fp32 AdamW state
#                              on the host (examples/llama3_8b_offload_rtx4090.plan);
#                              needs ~150 GiB of host memory
#   llama3_8b_l16_offload.sched the same with 16 of its 32 layers (~4.5 B
#                              parameters, ~75 GiB of host memory), for nodes
#                              with less host memory
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-gpu-scheds}
PLANC=${2:-${PLANC:-}}
if [[ -z "$PLANC" ]]; then
  if [[ -x "$ROOT/build/bin/planc" ]]; then PLANC=$ROOT/build/bin/planc
  else PLANC=$(command -v planc || true); fi
fi
if [[ -z "$PLANC" || ! -x "$PLANC" ]]; then
  echo "make-gpu-scheds.sh: no planc (build it, or pass its path)" >&2
  exit 1
fi
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT/equivalence" "$OUT/peak" "$OUT/bench"
EX=$ROOT/examples
ONE_H100=(--set cluster.nodes=1 --set cluster.gpus_per_node=1 --set cluster.gpu=h100_sxm)

echo "== equivalence matrix at world size 1 -> $OUT/equivalence"
"$PYTHON" "$ROOT/test/equivalence/equivalence.py" --compile-only --backend cuda \
  --world-max 1 --planc "$PLANC" --plan "$EX/tiny_llama_cpu.plan" \
  --schedules "$OUT/equivalence"

# The 1B benchmark plan: TinyLlama-1.1B (22 layers, hidden 2048, GQA 32/4),
# bf16 compute with fp32 master weights, AdamW, one GPU.
# (The recipe of examples/llama3_8b_fsdp_h100.plan: AdamW, grad_clip 1.0.)
BENCH_1B=("$EX/llama3_8b_fsdp_h100.plan" "${ONE_H100[@]}" --set model=tinyllama_1_1b
  --set parallel.sharding=no_shard
  --set train.micro_batch=8 --set train.seq_len=2048 --set train.grad_accum=1
  --set train.activation_checkpointing=none --set train.lr_schedule=constant
  --set parallel.backward_prefetch=none --set train.steps=0)
OFFLOAD_8B=("$EX/llama3_8b_offload_rtx4090.plan" "${ONE_H100[@]}"
  --set cluster.host_memory=192GiB --set train.lr_schedule=constant
  --set train.steps=0)

# compile OUT.sched PLAN ARGS...: the schedule, and next to it OUT.sched.report.json,
# planc's report of the same plan (predicted step time and peak), which
# gpu_vs_fsdp2.py and gpu_peak.py print against the measurements.
compile() {
  local out=$1
  shift
  "$PLANC" "$@" -o "$out"
  "$PLANC" "$@" --report=json > "$out.report.json" 2> /dev/null || {
    local code=$?
    # 2: the plan does not fit; the report is still written.
    [[ $code == 2 ]] || { echo "make-gpu-scheds.sh: planc --report=json failed for $out" >&2; exit 1; }
  }
}

echo "== peak-vs-plan schedules -> $OUT/peak"
TINY=("$EX/tiny_llama_cpu.plan" "${ONE_H100[@]}" --set train.steps=0)
compile "$OUT/peak/tiny-fp32.sched" "${TINY[@]}" --set train.precision=fp32
compile "$OUT/peak/tiny-bf16.sched" "${TINY[@]}" --set train.precision=bf16_mixed
compile "$OUT/peak/tiny-bf16-offload.sched" "${TINY[@]}" --set train.precision=bf16_mixed \
  --set parallel.offload.optimizer=cpu --set parallel.optimizer_step=cpu
compile "$OUT/peak/llama_1b.sched" "${BENCH_1B[@]}"

echo "== benchmark schedules -> $OUT/bench"
compile "$OUT/bench/llama_1b.sched" "${BENCH_1B[@]}"
compile "$OUT/bench/llama3_8b_offload.sched" "${OFFLOAD_8B[@]}"
compile "$OUT/bench/llama3_8b_l16_offload.sched" "${OFFLOAD_8B[@]}" --set model.layers=16

ls -l "$OUT"/peak "$OUT"/bench
echo "make-gpu-scheds.sh: $(find "$OUT" -name '*.sched' | wc -l) schedules in $OUT"
