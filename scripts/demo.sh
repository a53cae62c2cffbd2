#!/usr/bin/env bash
# The demo: builds everything, checks and lowers every example plan, shows
# what the compiler makes of the tiny CPU Llama (its schedule and its memory /
# communication / time report), writes its schedule file, and trains it for
# the plan's 10 steps on the CPU with 2 local ranks (plan-run --nproc 2, Gloo).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
bash scripts/build.sh >/dev/null
BIN=${BUILD_DIR:-build}/bin
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

echo "== every example, checked, lowered and fitted into its cluster's memory"
for plan in examples/*.plan; do
  "$BIN/planc" "$plan"
  "$BIN/planc" "$plan" --emit=sched -o /dev/null
done
echo
echo "== examples/tiny_llama_cpu.plan: the schedule of one step, as each of its 2 ranks runs it"
"$BIN/planc" examples/tiny_llama_cpu.plan --emit=sched | sed -n '/sched.program/,$p'
echo
echo "== its report: memory per rank, communication, predicted time"
"$BIN/planc" examples/tiny_llama_cpu.plan --report
echo
echo "== compiled to a schedule file, then trained for its 10 steps by 2 local CPU ranks"
"$BIN/planc" examples/tiny_llama_cpu.plan -o "$WORK/tiny.sched"
"$BIN/plan-run" --nproc 2 "$WORK/tiny.sched" --data synthetic \
  --metrics "$WORK/metrics.jsonl"
echo
echo "(per-step metrics were written as JSON lines: $(head -c 200 "$WORK/metrics.jsonl")...)"
