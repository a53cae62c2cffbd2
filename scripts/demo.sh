#!/usr/bin/env bash
# The demo: builds the compiler, checks every example plan, and shows what the
# compiler makes of the tiny CPU Llama: its summary and its plan IR.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
bash scripts/build.sh >/dev/null
PLANC=${BUILD_DIR:-build}/bin/planc

echo "== every example, checked"
for plan in examples/*.plan; do
  "$PLANC" "$plan"
done
echo
echo "== examples/tiny_llama_cpu.plan as plan IR"
"$PLANC" examples/tiny_llama_cpu.plan --emit=plan
echo
echo "== the same plan with an override: --set parallel.sharding=zero2"
"$PLANC" examples/tiny_llama_cpu.plan --set parallel.sharding=zero2
