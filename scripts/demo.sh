#!/usr/bin/env bash
# The demo: builds the compiler, checks every example plan, and shows what the
# compiler makes of the tiny CPU Llama: its summary and its lowered per-rank
# schedule (every all-gather, reduce-scatter, cast and copy of one step).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
bash scripts/build.sh >/dev/null
PLANC=${BUILD_DIR:-build}/bin/planc

echo "== every example, checked and lowered"
for plan in examples/*.plan; do
  "$PLANC" "$plan"
  "$PLANC" "$plan" --emit=sched -o /dev/null
done
echo
echo "== examples/tiny_llama_cpu.plan: the schedule of one step on each of its 2 ranks"
"$PLANC" examples/tiny_llama_cpu.plan --emit=sched | sed -n '/sched.program/,$p'
echo
echo "== the same plan with an override: --set parallel.sharding=zero2"
"$PLANC" examples/tiny_llama_cpu.plan --set parallel.sharding=zero2
echo
echo "(training with plan-run and the memory/time report arrive with issues 4 and 5)"
